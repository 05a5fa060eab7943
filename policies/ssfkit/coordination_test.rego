package ssfkit.coordination_test

import data.ssfkit.coordination
import data.ssfkit.plans

table := "arn:aws:dynamodb:us-east-1:123456789012:table/bank-zk-coord"

queue := "arn:aws:sqs:us-east-1:123456789012:bank-zk-coord"

bucket := "arn:aws:s3:::bank-zk-coord-123456789012"

role_policy(role, statements) := plans.create("aws_iam_role_policy.p", "aws_iam_role_policy", {"role": role, "policy": json.marshal({"Version": "2012-10-17", "Statement": statements})})

client_policy(name, statements) := plans.create("aws_iam_policy.client", "aws_iam_policy", {"name": name, "policy": json.marshal({"Version": "2012-10-17", "Statement": statements})})

allow(actions, resources) := {"Effect": "Allow", "Action": actions, "Resource": resources}

writer_statements := [
	allow(["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem", "dynamodb:Query", "dynamodb:DescribeTable"], [table]),
	allow(["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"], [queue]),
	allow(["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], [concat("", [bucket, "/*"])]),
	allow("s3:ListBucket", bucket),
	allow(["logs:CreateLogStream", "logs:PutLogEvents"], ["arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/bank-zk-coord-writer:*"]),
	object.union(allow(["kms:Decrypt", "kms:GenerateDataKey"], "arn:aws:kms:us-east-1:123456789012:key/*"), {"Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": "alias/ssfkit-bank"}}}),
]

leading_keys(keys) := {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": keys}}

client_statements := [
	allow(["dynamodb:GetItem", "dynamodb:Query", "dynamodb:DescribeTable"], table),
	object.union(allow(["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"], table), {"Condition": leading_keys(["zk/session", "zk/req/*", "zk/reqpart"])}),
	allow(["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"], queue),
	allow("s3:GetObject", concat("", [bucket, "/*"])),
	allow("s3:ListBucket", bucket),
]

test_the_modules_grants_pass if {
	count(coordination.deny) == 0 with input as plans.plan([
		role_policy("bank-zk-coord-writer", writer_statements),
		client_policy("bank-zk-coord-client", client_statements),
	])
}

test_writer_on_another_table_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-writer", [allow("dynamodb:PutItem", "arn:aws:dynamodb:us-east-1:123456789012:table/bank-teller")])])
}

test_writer_on_another_services_bucket_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-writer", [allow("s3:PutObject", "arn:aws:s3:::bank-other-coord-123456789012/*")])])
}

test_writer_on_every_bucket_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-writer", [allow("s3:GetObject", "*")])])
}

test_heartbeat_consuming_the_queue_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-heartbeat", [allow("sqs:ReceiveMessage", queue)])])
}

test_heartbeat_on_the_writers_logs_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-heartbeat", [allow("logs:PutLogEvents", "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/bank-zk-coord-writer:*")])])
}

test_wildcard_action_denied if {
	count(coordination.deny) == 1 with input as plans.plan([role_policy("bank-zk-coord-writer", [allow("dynamodb:*", table)])])
}

test_not_action_denied if {
	count(coordination.deny) >= 1 with input as plans.plan([role_policy("bank-zk-coord-writer", [{"Effect": "Allow", "NotAction": "iam:*", "Resource": table}])])
}

test_client_log_append_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [allow("logs:PutLogEvents", "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/bank-zk-coord-writer:*")])])
}

test_client_consuming_the_queue_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [allow("sqs:DeleteMessage", queue)])])
}

test_client_writing_the_bucket_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [allow("s3:PutObject", concat("", [bucket, "/*"]))])])
}

test_client_writing_any_partition_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [allow("dynamodb:PutItem", table)])])
}

test_client_writing_the_log_partition_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [object.union(allow("dynamodb:PutItem", table), {"Condition": leading_keys(["zk/session", "zk/txn"])})])])
}

test_client_partition_condition_of_another_kind_denied if {
	count(coordination.deny) == 1 with input as plans.plan([client_policy("bank-zk-coord-client", [object.union(allow("dynamodb:PutItem", table), {"Condition": {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["zk/session"]}}})])])
}

function(name, role, vars) := plans.create("aws_lambda_function.f", "aws_lambda_function", {"function_name": name, "role": role, "environment": [{"variables": vars}]})

test_functions_on_their_own_roles_pass if {
	count(coordination.deny) == 0 with input as plans.plan([
		function("bank-zk-coord-writer", "arn:aws:iam::123456789012:role/bank-zk-coord-writer", {"SSFKIT_COORD_ROLE": "writer"}),
		function("bank-zk-coord-heartbeat", "arn:aws:iam::123456789012:role/bank-zk-coord-heartbeat", {"SSFKIT_COORD_ROLE": "heartbeat"}),
	])
}

test_function_on_anothers_role_denied if {
	count(coordination.deny) == 2 with input as plans.plan([function("bank-zk-coord-heartbeat", "arn:aws:iam::123456789012:role/bank-zk-coord-writer", {"SSFKIT_COORD_ROLE": "heartbeat"})])
}

test_other_function_on_a_coordination_role_denied if {
	count(coordination.deny) == 1 with input as plans.plan([function("bank-teller", "arn:aws:iam::123456789012:role/bank-zk-coord-writer", {})])
}

test_unknown_coordination_role_denied if {
	count(coordination.deny) == 1 with input as plans.plan([function("bank-zk-coord-reader", "arn:aws:iam::123456789012:role/bank-zk-coord-reader", {"SSFKIT_COORD_ROLE": "reader"})])
}

gcp_grant(t, role, member) := plans.plan([plans.create("x.y", t, {"role": role, "member": member})])

test_gcp_client_reading_the_bucket_passes if {
	count(coordination.deny) == 0 with input as gcp_grant("google_storage_bucket_iam_member", "roles/storage.objectViewer", "serviceAccount:bank-zk-cc-1234ab@p.iam.gserviceaccount.com")
}

test_gcp_writer_writing_the_bucket_passes if {
	count(coordination.deny) == 0 with input as gcp_grant("google_storage_bucket_iam_member", "roles/storage.objectUser", "serviceAccount:bank-zk-cw-1234ab@p.iam.gserviceaccount.com")
}

test_gcp_client_writing_the_bucket_denied if {
	count(coordination.deny) == 1 with input as gcp_grant("google_storage_bucket_iam_member", "roles/storage.objectUser", "serviceAccount:bank-zk-cc-1234ab@p.iam.gserviceaccount.com")
}

test_gcp_client_consuming_requests_denied if {
	count(coordination.deny) == 1 with input as gcp_grant("google_pubsub_subscription_iam_member", "roles/pubsub.subscriber", "serviceAccount:bank-zk-cc-1234ab@p.iam.gserviceaccount.com")
}

# Azure: the coordination module's role assignments (its own storage account's table, queue and
# container, and the account for the apps' host storage) pass the allow-list and sovereignty.
azure_account := "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/bankzkcoord12345678"

azure_grant(key, role, scope) := plans.in_module("module.coordination", plans.create(sprintf("azurerm_role_assignment.own[%q]", [key]), "azurerm_role_assignment", {"role_definition_name": role, "scope": scope}))

azure_plan := plans.plan([
	plans.in_module("module.coordination", plans.create("azurerm_storage_account.this", "azurerm_storage_account", {"name": "bankzkcoord12345678", "min_tls_version": "TLS1_2", "https_traffic_only_enabled": true, "allow_nested_items_to_be_public": false})),
	azure_grant("writer_table", "Storage Table Data Contributor", concat("", [azure_account, "/tableServices/default/tables/coord"])),
	azure_grant("writer_requests", "Storage Queue Data Contributor", concat("", [azure_account, "/queueServices/default/queues/requests"])),
	azure_grant("writer_host", "Storage Blob Data Owner", azure_account),
	azure_grant("client_requests", "Storage Queue Data Message Sender", concat("", [azure_account, "/queueServices/default/queues/requests"])),
	azure_grant("client_blobs", "Storage Blob Data Reader", concat("", [azure_account, "/blobServices/default/containers/blobs"])),
])

test_azure_coordination_grants_pass if {
	count(data.ssfkit.access.deny) == 0 with input as azure_plan
	count(data.ssfkit.sovereignty.deny) == 0 with input as azure_plan
	count(data.ssfkit.public.deny) == 0 with input as azure_plan
	count(data.ssfkit.encryption.deny) == 0 with input as azure_plan
}
