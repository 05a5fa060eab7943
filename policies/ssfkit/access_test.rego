package ssfkit.access_test

import data.ssfkit.access
import data.ssfkit.plans

trust(service) := json.marshal({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": service}}]})

ssf_role := plans.create("module.ssf[\"accounts\"].aws_iam_role.this", "aws_iam_role", {"name": "bank-accounts-ssf", "assume_role_policy": trust("lambda.amazonaws.com")})

collectors_role := plans.create("module.ssf[\"accounts\"].aws_iam_role.scheduler", "aws_iam_role", {"name": "bank-accounts-collectors", "assume_role_policy": trust("scheduler.amazonaws.com")})

collectors_policy(statements) := plans.create("module.ssf[\"accounts\"].aws_iam_role_policy.scheduler", "aws_iam_role_policy", {"role": "bank-accounts-collectors", "policy": json.marshal({"Statement": statements})})

invoke_collectors := [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": [
	"arn:aws:lambda:us-east-1:1:function:bank-accounts-intent-collector",
	"arn:aws:lambda:us-east-1:1:function:bank-accounts-garbage-collector",
]}]

function(name, role, env) := plans.create(sprintf("aws_lambda_function.%s", [name]), "aws_lambda_function", {"function_name": name, "role": role, "environment": [{"variables": env}]})

module_plan := [ssf_role, collectors_role, collectors_policy(invoke_collectors), plans.ssf_policy("bank-accounts-ssf", [])]

test_the_modules_roles_pass if count(access.deny) == 0 with input as plans.plan(module_plan)

test_unknown_type_that_grants_access_denied if {
	every t in ["aws_iam_policy", "aws_iam_role_policy_attachment", "aws_iam_user_policy", "aws_lambda_permission", "aws_iam_group", "aws_s3_bucket_policy", "aws_kms_grant", "aws_lambda_function_url", "google_project_iam_binding", "google_storage_bucket_iam_member", "google_project_iam_custom_role", "azurerm_key_vault_access_policy", "azurerm_storage_account_sas"] {
		count(access.deny) == 1 with input as plans.plan([plans.create(sprintf("%s.x", [t]), t, {})])
	}
}

test_resources_that_grant_nothing_pass if {
	every t in ["aws_dynamodb_table", "aws_sqs_queue", "aws_cloudwatch_log_group", "google_firestore_database", "azurerm_storage_account", "azurerm_management_lock"] {
		count(access.deny) == 0 with input as plans.plan([plans.create(sprintf("%s.x", [t]), t, {})])
	}
}

test_unknown_policy_denied if {
	p := plans.unknown_after_apply(plans.ssf_policy("bank-accounts-ssf", []), ["policy", "role"])
	count(access.deny) == 2 with input as plans.plan([ssf_role, p])
}

test_unknown_function_role_denied if {
	f := plans.unknown_after_apply(function("bank-accounts", null, {"SSFKIT_SSF": "accounts"}), ["role"])
	count(access.deny) == 1 with input as plans.plan([f])
}

test_azure_unknown_scope_denied if {
	g := plans.unknown_after_apply(plans.create("azurerm_role_assignment.x", "azurerm_role_assignment", {"role_definition_name": "Storage Blob Data Owner"}), ["scope"])
	count(access.deny) == 1 with input as plans.plan([g])
}

test_gcp_known_condition_passes if {
	g := plans.create("google_project_iam_member.state", "google_project_iam_member", {"role": "roles/datastore.user", "member": "serviceAccount:x@p.iam.gserviceaccount.com", "condition": [{"expression": "x"}]})
	known := object.union(g, {"change": object.union(g.change, {"after_unknown": {"condition": [{}]}})})
	count(access.deny) == 0 with input as plans.plan([known])
}

test_gcp_unknown_condition_denied if {
	g := plans.create("google_project_iam_member.state", "google_project_iam_member", {"role": "roles/datastore.user", "member": "serviceAccount:x@p.iam.gserviceaccount.com", "condition": [{}]})
	unknown := object.union(g, {"change": object.union(g.change, {"after_unknown": {"condition": [{"expression": true}]}})})
	count(access.deny) == 1 with input as plans.plan([unknown])
}

test_other_roles_denied if {
	other := plans.create("aws_iam_role.admin", "aws_iam_role", {"name": "admin", "assume_role_policy": trust("lambda.amazonaws.com")})
	count(access.deny) == 1 with input as plans.plan([other])
	p := plans.create("aws_iam_role_policy.admin", "aws_iam_role_policy", {"role": "admin", "policy": json.marshal({"Statement": []})})
	count(access.deny) == 1 with input as plans.plan([p])
}

test_trust_beyond_the_service_denied if {
	every policy in [
		json.marshal({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": "*"}}]}),
		json.marshal({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": ["lambda.amazonaws.com", "ec2.amazonaws.com"]}}]}),
		json.marshal({"Statement": [{"Effect": "Allow", "Action": "sts:*", "Principal": {"Service": "lambda.amazonaws.com"}}]}),
		json.marshal({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "NotPrincipal": {"AWS": "arn:aws:iam::1:root"}}]}),
		trust("scheduler.amazonaws.com"),
	] {
		r := plans.create("aws_iam_role.this", "aws_iam_role", {"name": "bank-accounts-ssf", "assume_role_policy": policy})
		count(access.deny) == 1 with input as plans.plan([r])
	}
}

test_collectors_role_reaches_only_its_collectors if {
	every statements in [
		[{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": "arn:aws:lambda:us-east-1:1:function:bank-accounts"}],
		[{"Effect": "Allow", "Action": "lambda:*", "Resource": invoke_collectors[0].Resource}],
		[{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": "*"}],
		[{"Effect": "Allow", "Action": "lambda:InvokeFunction", "NotResource": "arn:aws:lambda:us-east-1:1:function:x"}],
		[{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": "arn:aws:lambda:us-east-1:1:function:bank-teller-intent-collector"}],
	] {
		count(access.deny) == 1 with input as plans.plan([collectors_role, collectors_policy(statements)])
	}
	count(access.deny) == 0 with input as plans.plan([collectors_role, collectors_policy([object.union(invoke_collectors[0], {"Action": "LAMBDA:invokefunction"})])])
}

test_function_runs_as_its_own_role if {
	count(access.deny) == 0 with input as plans.plan([
		function("bank-accounts", "arn:aws:iam::1:role/bank-accounts-ssf", {"SSFKIT_SSF": "accounts"}),
		function("bank-accounts-intent-collector", "arn:aws:iam::1:role/bank-accounts-ssf", {"SSFKIT_SSF": "accounts"}),
	])
	count(access.deny) == 1 with input as plans.plan([function("bank-accounts", "arn:aws:iam::1:role/admin", {"SSFKIT_SSF": "accounts"})])

	# another SSF's identity, by an SSF's function or by any other
	count(access.deny) == 2 with input as plans.plan([function("bank-accounts", "arn:aws:iam::1:role/bank-teller-ssf", {"SSFKIT_SSF": "accounts"})])
	count(access.deny) == 1 with input as plans.plan([function("exporter", "arn:aws:iam::1:role/bank-teller-ssf", {})])
}

test_key_policy_for_anyone_denied if {
	k := plans.create("aws_kms_key.this", "aws_kms_key", {"policy": json.marshal({"Statement": [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*", "Principal": {"AWS": ["arn:aws:iam::1:root", "*"]}}]})})
	count(access.deny) == 1 with input as plans.plan([k])
}

gcp(t, role, member) := plans.create(sprintf("%s.x", [t]), t, {"role": role, "member": member})

test_gcp_grants_on_the_allow_list if {
	count(access.deny) == 0 with input as plans.plan([
		gcp("google_pubsub_topic_iam_member", "roles/pubsub.publisher", "serviceAccount:a@p.iam.gserviceaccount.com"),
		gcp("google_cloud_run_v2_service_iam_member", "roles/run.invoker", "serviceAccount:b@p.iam.gserviceaccount.com"),
		gcp("google_service_account_iam_member", "roles/iam.serviceAccountTokenCreator", "serviceAccount:service-1@gcp-sa-pubsub.iam.gserviceaccount.com"),
	])
	count(access.deny) == 1 with input as plans.plan([gcp("google_pubsub_topic_iam_member", "roles/pubsub.admin", "serviceAccount:a@p.iam.gserviceaccount.com")])
	count(access.deny) == 1 with input as plans.plan([gcp("google_cloud_run_v2_service_iam_member", "roles/run.invoker", "user:mallory@example.com")])
	count(access.deny) == 1 with input as plans.plan([gcp("google_service_account_iam_member", "roles/iam.serviceAccountTokenCreator", "serviceAccount:a@p.iam.gserviceaccount.com")])
	count(access.deny) == 3 with input as plans.plan([gcp("google_service_account_iam_member", "roles/iam.serviceAccountUser", "group:ops@example.com")])
}

azure(role_name, role_id) := plans.create("azurerm_role_assignment.x", "azurerm_role_assignment", {"scope": "/subscriptions/s/resourceGroups/g", "role_definition_name": role_name, "role_definition_id": role_id})

peer_invoker(actions) := plans.create("azurerm_role_definition.peer_invoker", "azurerm_role_definition", {"name": "ssfkit peer invoker", "role_definition_id": "4444", "permissions": [{"actions": actions, "not_actions": []}]})

test_azure_roles_on_the_allow_list if {
	count(access.deny) == 0 with input as plans.plan([azure("Storage Queue Data Contributor", null)])
	count(access.deny) == 1 with input as plans.plan([azure("Storage Account Contributor", null)])
	by_id := azure(null, "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/4444")
	count(access.deny) == 0 with input as plans.plan([peer_invoker(["Microsoft.Web/sites/host/listkeys/action"]), by_id])
	count(access.deny) == 1 with input as plans.plan([by_id])
	count(access.deny) == 1 with input as plans.plan([peer_invoker(["Microsoft.Web/sites/*"]), by_id])
	unknown_id := plans.unknown_after_apply(azure(null, null), ["role_definition_id"])
	count(access.deny) == 1 with input as plans.plan([peer_invoker(["Microsoft.Web/sites/host/listkeys/action"]), unknown_id])
}

# A queue's policy known only after apply passes only when the plan's configuration shows the
# queue sets none: without its configuration, it is denied.
test_reflected_attribute_needs_the_configuration if {
	q := plans.unknown_after_apply(plans.create("aws_sqs_queue.q", "aws_sqs_queue", {"name": "bank-a"}), ["policy"])
	count(access.deny) == 1 with input as plans.plan([q])
	config := {"root_module": {"resources": [{"address": "aws_sqs_queue.q", "expressions": {"name": {"constant_value": "bank-a"}}}]}}
	count(access.deny) == 0 with input as object.union(plans.plan([q]), {"configuration": config})
	set_policy := {"root_module": {"resources": [{"address": "aws_sqs_queue.q", "expressions": {"policy": {"references": ["aws_iam_policy_document.x"]}}}]}}
	count(access.deny) == 1 with input as object.union(plans.plan([q]), {"configuration": set_policy})
}

coord_role(name, service) := plans.create(sprintf("aws_iam_role.%s", [replace(name, "-", "_")]), "aws_iam_role", {"name": name, "assume_role_policy": trust(service)})

test_coordination_roles_pass if {
	count(access.deny) == 0 with input as plans.plan([
		coord_role("bank-zk-coord-writer", "lambda.amazonaws.com"),
		coord_role("bank-zk-coord-heartbeat", "lambda.amazonaws.com"),
		coord_role("bank-zk-coord-scheduler", "scheduler.amazonaws.com"),
	])
}

test_coordination_writer_assumable_by_scheduler_denied if {
	count(access.deny) == 1 with input as plans.plan([coord_role("bank-zk-coord-writer", "scheduler.amazonaws.com")])
}

scheduler_policy(resource) := plans.create("aws_iam_role_policy.scheduler", "aws_iam_role_policy", {"role": "bank-zk-coord-scheduler", "policy": json.marshal({"Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": resource}]})})

test_coordination_scheduler_invoking_its_heartbeat_passes if {
	count(access.deny) == 0 with input as plans.plan([coord_role("bank-zk-coord-scheduler", "scheduler.amazonaws.com"), scheduler_policy("arn:aws:lambda:us-east-1:1:function:bank-zk-coord-heartbeat")])
}

test_coordination_scheduler_invoking_the_writer_denied if {
	count(access.deny) == 1 with input as plans.plan([coord_role("bank-zk-coord-scheduler", "scheduler.amazonaws.com"), scheduler_policy("arn:aws:lambda:us-east-1:1:function:bank-zk-coord-writer")])
}

managed(name) := plans.create("aws_iam_policy.p", "aws_iam_policy", {"name": name, "policy": "{}"})

test_coordination_client_policy_passes if count(access.deny) == 0 with input as plans.plan([managed("bank-zk-coord-client")])

test_other_managed_policy_denied if count(access.deny) == 1 with input as plans.plan([managed("bank-readers")])

test_managed_policy_named_after_apply_denied if {
	count(access.deny) == 1 with input as plans.plan([plans.unknown_after_apply(managed(null), ["name"])])
}

gcs_bucket(module) := plans.in_module(module, plans.create("google_storage_bucket.this", "google_storage_bucket", {"name": "bank-zk-coord-1234abcd"}))

bucket_grant(module, bucket, role) := plans.in_module(module, plans.create("google_storage_bucket_iam_member.this", "google_storage_bucket_iam_member", {"bucket": bucket, "role": role, "member": "serviceAccount:bank-zk-cw-1234ab@p.iam.gserviceaccount.com"}))

test_grant_on_the_modules_own_bucket_passes if {
	count(access.deny) == 0 with input as plans.plan([gcs_bucket("module.coordination"), bucket_grant("module.coordination", "bank-zk-coord-1234abcd", "roles/storage.objectUser")])
}

test_grant_on_another_modules_bucket_denied if {
	count(access.deny) == 1 with input as plans.plan([gcs_bucket("module.coordination"), bucket_grant("module.other", "bank-zk-coord-1234abcd", "roles/storage.objectViewer")])
}

test_grant_on_a_bucket_outside_the_plan_denied if {
	count(access.deny) == 1 with input as plans.plan([bucket_grant("module.coordination", "exports", "roles/storage.objectViewer")])
}

test_bucket_admin_denied if {
	count(access.deny) == 1 with input as plans.plan([gcs_bucket("module.coordination"), bucket_grant("module.coordination", "bank-zk-coord-1234abcd", "roles/storage.admin")])
}

# GCP provenance: an ssf module grants its identity its own partitions of its environment's
# provenance bucket, by one exact condition; nothing else may be granted on that bucket.
provenance_bucket := plans.in_module("module.environment", plans.create("google_storage_bucket.provenance[0]", "google_storage_bucket", {"name": "bank-provenance-1", "labels": {"ssfkit-environment": "bank", "ssfkit-provenance": "true"}}))

teller_service(environment) := plans.in_module(`module.ssf["teller"]`, plans.create("google_cloud_run_v2_service.this", "google_cloud_run_v2_service", {
	"labels": {"ssfkit-environment": environment},
	"template": [{"service_account": "bank-teller@p.iam.gserviceaccount.com", "containers": [{"env": [{"name": "SSFKIT_SSF", "value": "teller"}]}]}],
}))

teller_condition(prefix, ssf) := concat(" || ", [sprintf(`resource.name.startsWith("projects/_/buckets/bank-provenance-1/objects/%s%s/ssf=%s/")`, [prefix, t, ssf]) | some t in ["invocations", "data_events", "calls"]])

provenance_grant(module, values) := plans.in_module(module, plans.create("google_storage_bucket_iam_member.provenance[0]", "google_storage_bucket_iam_member", object.union(
	{"bucket": "bank-provenance-1", "role": "roles/storage.objectUser", "member": "serviceAccount:bank-teller@p.iam.gserviceaccount.com", "condition": [{"title": "t", "expression": teller_condition("provenance/", "teller")}]},
	values,
)))

test_own_provenance_partitions_grant_passes if {
	every values in [{}, {"condition": [{"title": "t", "expression": teller_condition("", "teller")}]}] {
		count(access.deny) == 0 with input as plans.plan([provenance_bucket, teller_service("bank"), provenance_grant(`module.ssf["teller"]`, values)])
	}
}

test_provenance_grant_beyond_own_partitions_denied if {
	every values in [
		{"condition": [{"title": "t", "expression": teller_condition("provenance/", "accounts")}]}, # another SSF's
		{"condition": [{"title": "t", "expression": teller_condition("provenance/", "tell")}]},
		{"condition": [{"title": "t", "expression": `resource.name.startsWith("projects/_/buckets/bank-provenance-1/objects/provenance/")`}]},
		{"condition": [{"title": "t", "expression": concat("", [teller_condition("provenance/", "teller"), " || true"])}]},
		{"condition": [{"title": "t", "expression": teller_condition("provenance/*/", "teller")}]},
		{"condition": []}, # the whole bucket
		{"role": "roles/storage.objectViewer"}, # reading every SSF's records
		{"role": "roles/storage.admin"},
		{"member": "serviceAccount:bank-accounts@p.iam.gserviceaccount.com"}, # another identity
		{"bucket": "other-provenance-1"},
	] {
		count(access.deny) > 0 with input as plans.plan([provenance_bucket, teller_service("bank"), provenance_grant(`module.ssf["teller"]`, values)])
	}
}

test_provenance_grant_from_elsewhere_denied if {
	# from a module with no SSF service, from another environment's SSF, from the bucket's own module
	count(access.deny) > 0 with input as plans.plan([provenance_bucket, teller_service("bank"), provenance_grant("module.extra", {})])
	count(access.deny) > 0 with input as plans.plan([provenance_bucket, teller_service("other"), provenance_grant(`module.ssf["teller"]`, {})])
	count(access.deny) > 0 with input as plans.plan([provenance_bucket, teller_service("bank"), provenance_grant("module.environment", {"condition": []})])
}
