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

# Resource policies on queues (the queue policy resource, or the queue's own policy attribute):
# an Allow for anyone, for a principal with a wildcard, or for everyone but someone (NotPrincipal).
queue_policies contains {"address": r.address, "policy": r.values.policy} if {
	some r in lib.resources_of("aws_sqs_queue_policy")
	is_string(r.values.policy)
}

queue_policies contains {"address": r.address, "policy": r.values.policy} if {
	some r in lib.resources_of("aws_sqs_queue")
	is_string(r.values.policy)
	r.values.policy != ""
}

deny contains msg if {
	some q in queue_policies
	some s in lib.as_list(json.unmarshal(q.policy).Statement)
	s.Effect == "Allow"
	anyone_in(s)
	msg := sprintf("%s: the queue policy allows anyone", [q.address])
}

anyone_in(s) if anyone(object.get(s, "Principal", null))

anyone_in(s) if object.get(s, "NotPrincipal", null) != null

# Any principal value with a wildcard: "*", {"AWS": "*"}, {"AWS": ["*"]}, arn:aws:iam::*:root.
anyone(p) if {
	is_string(p)
	contains(p, "*")
}

anyone(p) if {
	is_object(p)
	some v in p
	some x in lib.as_list(v)
	contains(x, "*")
}


# GCP: any IAM member or binding resource, of any service, for everyone.
deny contains msg if {
	some r in lib.resources
	regex.match(`^google_.+_iam_(member|binding)$`, r.type)
	some m in members(r.values)
	m in {"allUsers", "allAuthenticatedUsers"}
	msg := sprintf("%s: %s is granted %v", [r.address, m, object.get(r.values, "role", "a role")])
}

# GCP: a whole IAM policy (google_*_iam_policy) whose bindings include everyone.
deny contains msg if {
	some r in lib.resources
	regex.match(`^google_.+_iam_policy$`, r.type)
	some b in object.get(json.unmarshal(r.values.policy_data), "bindings", [])
	some m in b.members
	m in {"allUsers", "allAuthenticatedUsers"}
	msg := sprintf("%s: the policy grants %s %v", [r.address, m, object.get(b, "role", "a role")])
}

# Cloud Run without its invoker check: anyone on the network may call the service.
deny contains msg if {
	some r in lib.resources_of("google_cloud_run_v2_service")
	r.values.invoker_iam_disabled == true
	msg := sprintf("%s: invoker_iam_disabled lets anyone invoke the service", [r.address])
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

# AWS: a bucket (the coordination module's, for large entries) is private: a public access block
# of the plan, all four settings on, covers it.
deny contains msg if {
	some b in lib.resources_of("aws_s3_bucket")
	not blocked(b)
	msg := sprintf("%s: no aws_s3_bucket_public_access_block with all four settings on covers bucket %v; a bucket of ssfkit is private", [b.address, object.get(b.values, "bucket", "?")])
}

blocked(b) if {
	some a in lib.resources_of("aws_s3_bucket_public_access_block")
	lib.covers(a, b)
	every attr in ["block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"] {
		a.values[attr] == true
	}
}

# GCP: a bucket prevents public access and has uniform bucket-level access (no object ACLs).
deny contains msg if {
	some b in lib.resources_of("google_storage_bucket")
	object.get(b.values, "public_access_prevention", null) != "enforced"
	msg := sprintf("%s: public_access_prevention is %v, not enforced", [b.address, object.get(b.values, "public_access_prevention", "unset")])
}

deny contains msg if {
	some b in lib.resources_of("google_storage_bucket")
	object.get(b.values, "uniform_bucket_level_access", null) != true
	msg := sprintf("%s: uniform_bucket_level_access must be true (no object ACLs)", [b.address])
}

members(v) := v.members if is_array(v.members)

members(v) := [v.member] if is_string(v.member)
