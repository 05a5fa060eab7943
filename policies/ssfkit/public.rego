# Nothing public: SSFs are reached by their callers' identities, their queues and the collectors'
# schedules, never anonymously.
package ssfkit.public

import data.ssfkit.lib

deny contains msg if {
	some r in lib.resources_of("aws_lambda_function_url")
	r.values.authorization_type == "NONE"
	msg := sprintf("%s: a function URL without authorization makes the SSF public", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("aws_lambda_permission")
	r.values.principal == "*"
	msg := sprintf("%s: a permission for principal * lets anyone invoke the function", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("aws_sqs_queue_policy")
	some s in json.unmarshal(r.values.policy).Statement
	s.Effect == "Allow"
	anyone(s.Principal)
	msg := sprintf("%s: the queue policy allows anyone", [r.address])
}

deny contains msg if {
	some t in {"google_cloud_run_v2_service_iam_member", "google_cloud_run_service_iam_member", "google_cloudfunctions2_function_iam_member"}
	some r in lib.resources_of(t)
	r.values.member in {"allUsers", "allAuthenticatedUsers"}
	msg := sprintf("%s: %s may invoke the function", [r.address, r.values.member])
}

deny contains msg if {
	some t in {"google_cloud_run_v2_service_iam_binding", "google_pubsub_topic_iam_binding", "google_pubsub_topic_iam_member", "google_pubsub_subscription_iam_member"}
	some r in lib.resources_of(t)
	some m in members(r.values)
	m in {"allUsers", "allAuthenticatedUsers"}
	msg := sprintf("%s: %s is granted %s", [r.address, m, r.values.role])
}

deny contains msg if {
	some r in lib.resources_of("azurerm_storage_container")
	object.get(r.values, "container_access_type", "private") != "private"
	msg := sprintf("%s: container_access_type must be private", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("azurerm_storage_account")
	r.values.allow_nested_items_to_be_public == true
	msg := sprintf("%s: allow_nested_items_to_be_public must be false", [r.address])
}

anyone("*")

anyone(p) if p.AWS == "*"

members(v) := v.members if is_array(v.members)

members(v) := [v.member] if is_string(v.member)
