package ssfkit.sovereignty_test

import data.ssfkit.plans
import data.ssfkit.sovereignty

own := [
	{"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
	{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": ["arn:aws:sqs:us-east-1:1:bank-accounts"]},
	{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": ["arn:aws:lambda:us-east-1:1:function:bank-teller"]},
]

test_own_table_and_queue_pass if count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", own)])

test_other_ssfs_table_denied if {
	other := array.concat(own, [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-teller"}])
	count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", other)])
}

test_own_dead_letter_queue_passes if {
	dlq := array.concat(own, [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:us-east-1:1:bank-accounts-dlq"}])
	count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", dlq)])
}

test_other_ssfs_dead_letter_queue_denied if {
	dlq := array.concat(own, [{"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "arn:aws:sqs:us-east-1:1:bank-teller-dlq"}])
	count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", dlq)])
}

# IAM is read as IAM reads it: actions are case-insensitive, and anything not on the allow-list
# of an SSF's actions and resources is denied, however it is spelled.
test_every_bypass_denied if {
	bypasses := [
		{"Effect": "Allow", "Action": "*", "Resource": "*"},
		{"Effect": "Allow", "Action": "DynamoDB:*", "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
		{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
		{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
		{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"},
		{"Effect": "Allow", "Action": "SQS:SendMessage", "Resource": "arn:aws:sqs:us-east-1:1:bank-teller"},
	]
	every bad in bypasses {
		count(sovereignty.deny) > 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", array.concat(own, [bad]))])
	}
}

test_own_logs_and_key_pass if {
	more := array.concat(own, [
		{"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": [
			"arn:aws:logs:us-east-1:1:log-group:/aws/lambda/bank-accounts:*",
			"arn:aws:logs:us-east-1:1:log-group:/aws/lambda/bank-accounts-intent-collector:*",
		]},
		{"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": "arn:aws:kms:us-east-1:1:key/1234abcd-12ab-34cd-56ef-1234567890ab"},
	])
	count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", more)])
}

# Policies reach an SSF's role other ways than its inline policy: all denied.
test_other_policies_on_the_role_denied if {
	every change in [
		plans.create("aws_iam_role_policy_attachment.admin", "aws_iam_role_policy_attachment", {"role": "bank-accounts-ssf", "policy_arn": "arn:aws:iam::aws:policy/AdministratorAccess"}),
		plans.create("aws_iam_policy_attachment.full", "aws_iam_policy_attachment", {"roles": ["bank-accounts-ssf"], "policy_arn": "arn:aws:iam::1:policy/full"}),
		plans.create("aws_iam_role.this", "aws_iam_role", {"name": "bank-accounts-ssf", "managed_policy_arns": ["arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess"]}),
		plans.create("aws_iam_role.this", "aws_iam_role", {"name": "bank-accounts-ssf", "inline_policy": [{"name": "x", "policy": json.marshal({"Statement": [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}]})}]}),
	] {
		count(sovereignty.deny) == 1 with input as plans.plan([change])
	}
}

test_every_queue_denied if {
	every_queue := array.concat(own, [{"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "*"}])
	count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", every_queue)])
}

# Provenance: an SSF's identity may put objects in its own partitions of its environment's
# provenance bucket, one resource per table, and nowhere else in it.
provenance(resources) := array.concat(own, [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": resources}])

test_own_provenance_partitions_pass if {
	every resources in [
		[
			"arn:aws:s3:::bank-provenance-1/provenance/invocations/ssf=accounts/*",
			"arn:aws:s3:::bank-provenance-1/provenance/data_events/ssf=accounts/*",
			"arn:aws:s3:::bank-provenance-1/provenance/calls/ssf=accounts/*",
		],
		["arn:aws:s3:::bank-provenance-1/calls/ssf=accounts/*"],
		["arn:aws:s3:::bank-provenance-1/a/b/invocations/ssf=accounts/*"],
	] {
		count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", provenance(resources))])
	}
}

test_provenance_beyond_own_partitions_denied if {
	every resource in [
		"arn:aws:s3:::bank-provenance-1/provenance/invocations/ssf=teller/*", # another SSF's
		"arn:aws:s3:::bank-provenance-1/provenance/*/ssf=accounts/*", # reaches P/x/ssf=teller/ssf=accounts/...
		"arn:aws:s3:::bank-provenance-1/provenance/invocations/ssf=accounts*", # ssf=accounts2
		"arn:aws:s3:::bank-provenance-1/provenance/*", # every SSF's
		"arn:aws:s3:::bank-provenance-1/*",
		"arn:aws:s3:::bank-provenance-1",
		"arn:aws:s3:::other-provenance-1/provenance/invocations/ssf=accounts/*", # another environment's
		"arn:aws:s3:::bank-state/provenance/invocations/ssf=accounts/*", # not a provenance bucket
		"arn:aws:s3:::bank-provenance-1/provenance/audit/ssf=accounts/*", # not a provenance table
		"arn:aws:s3:::*/provenance/invocations/ssf=accounts/*",
		"*",
	] {
		count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", provenance([resource]))])
	}
}

test_provenance_only_puts if {
	every action in ["s3:GetObject", "s3:ListBucket", "s3:DeleteObject", "s3:*", "s3:PutObjectAcl"] {
		bad := array.concat(own, [{"Effect": "Allow", "Action": action, "Resource": "arn:aws:s3:::bank-provenance-1/provenance/invocations/ssf=accounts/*"}])
		count(sovereignty.deny) > 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", bad)])
	}
}

# Azure: each SSF's module grants its identity data roles on its own storage account.
azure_account(ssf, name) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("azurerm_storage_account.this", "azurerm_storage_account", {"name": name}))

azure_grant(ssf, role, scope) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("azurerm_role_assignment.state", "azurerm_role_assignment", {"role_definition_name": role, "scope": scope}))

accounts_table := "/subscriptions/s/resourceGroups/bank/providers/Microsoft.Storage/storageAccounts/bankaccounts1a2b3c/tableServices/default/tables/state"

test_azure_own_table_passes if {
	count(sovereignty.deny) == 0 with input as plans.plan([
		azure_account("accounts", "bankaccounts1a2b3c"),
		azure_grant("accounts", "Storage Table Data Contributor", accounts_table),
	])
}

test_azure_other_ssfs_account_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([
		azure_account("accounts", "bankaccounts1a2b3c"),
		azure_grant("teller", "Storage Table Data Contributor", accounts_table),
	])
}

test_azure_resource_group_scope_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([azure_grant("teller", "Storage Queue Data Contributor", "/subscriptions/s/resourceGroups/bank")])
}


# GCP: Firestore access is a project grant with a condition naming the SSF's database.
gcp_database(ssf, name) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("google_firestore_database.this", "google_firestore_database", {"name": name}))

gcp_grant(ssf, role, conditions) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("google_project_iam_member.state", "google_project_iam_member", {"role": role, "member": "serviceAccount:x@p.iam.gserviceaccount.com", "condition": conditions}))

own_database := [{"title": "own", "expression": "resource.name == \"projects/p/databases/bank-accounts\""}]

test_gcp_own_database_passes if {
	count(sovereignty.deny) == 0 with input as plans.plan([gcp_database("accounts", "bank-accounts"), gcp_grant("accounts", "roles/datastore.user", own_database)])
}

test_gcp_other_ssfs_database_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([gcp_database("accounts", "bank-accounts"), gcp_grant("teller", "roles/datastore.user", own_database)])
}

test_gcp_unconditional_datastore_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([gcp_grant("teller", "roles/datastore.user", [])])
}

test_gcp_project_pubsub_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([gcp_grant("teller", "roles/pubsub.subscriber", [])])
}



# GCP Bigtable: a table-level grant on the SSF's own table.
gcp_bigtable_table(ssf, name) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("google_bigtable_table.state[0]", "google_bigtable_table", {"name": name, "instance_name": "bank-state"}))

gcp_bigtable_grant(ssf, table) := plans.in_module(sprintf("module.ssf[%q]", [ssf]), plans.create("google_bigtable_table_iam_member.state[0]", "google_bigtable_table_iam_member", {"table": table, "instance_name": "bank-state", "role": "roles/bigtable.user", "member": "serviceAccount:x@p.iam.gserviceaccount.com"}))

test_gcp_own_bigtable_table_passes if {
	count(sovereignty.deny) == 0 with input as plans.plan([gcp_bigtable_table("accounts", "bank-accounts"), gcp_bigtable_grant("accounts", "bank-accounts")])
}

test_gcp_other_ssfs_bigtable_table_denied if {
	count(sovereignty.deny) == 1 with input as plans.plan([gcp_bigtable_table("accounts", "bank-accounts"), gcp_bigtable_grant("teller", "bank-accounts")])
}

# After apply the role shows its module's own policy as an inline policy: that passes.
test_role_showing_its_own_policy_passes if {
	role := plans.create("aws_iam_role.this", "aws_iam_role", {"name": "bank-accounts-ssf", "inline_policy": [{"name": "ssf", "policy": json.marshal({"Version": "2012-10-17", "Statement": own})}]})
	count(sovereignty.deny) == 0 with input as plans.plan([role])
}

test_broad_roles_denied if {
	every change in [
		plans.create("google_project_iam_member.e", "google_project_iam_member", {"role": "roles/editor", "member": "serviceAccount:a@p.iam.gserviceaccount.com"}),
		plans.create("google_project_iam_binding.o", "google_project_iam_binding", {"role": "roles/owner", "members": ["serviceAccount:a@p.iam.gserviceaccount.com"]}),
		plans.create("google_project_iam_policy.p", "google_project_iam_policy", {"policy_data": "{}"}),
		plans.create("azurerm_role_assignment.c", "azurerm_role_assignment", {"role_definition_name": "Contributor", "scope": "/subscriptions/s/resourceGroups/bank"}),
		plans.create("azurerm_role_assignment.i", "azurerm_role_assignment", {"role_definition_id": "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c", "scope": "/subscriptions/s/resourceGroups/bank"}),
	] {
		count(sovereignty.deny) >= 1 with input as plans.plan([change])
	}
}

# A condition that does not confine the grant to one database, however it names one, is denied.
test_gcp_conditions_that_do_not_confine_denied if {
	every expr in [
		"!(resource.name == \"projects/p/databases/bank-accounts\")",
		"resource.name == \"projects/p/databases/bank-accounts\" || true",
		"resource.name != \"projects/p/databases/bank-accounts\"",
		"resource.name == \"projects/p/databases/bank-accounts\" || resource.name.startsWith(\"projects/p/databases/bank-teller/\")",
		"resource.type == \"x\" || resource.name.startsWith(\"projects/p/databases/bank-accounts/\")",
	] {
		count(sovereignty.deny) == 1 with input as plans.plan([gcp_database("accounts", "bank-accounts"), gcp_grant("accounts", "roles/datastore.user", [{"title": "t", "expression": expr}])])
	}
}

test_gcp_module_condition_passes if {
	expr := "resource.name == \"projects/p/databases/bank-accounts\" || resource.name.startsWith(\"projects/p/databases/bank-accounts/\")"
	count(sovereignty.deny) == 0 with input as plans.plan([gcp_database("accounts", "bank-accounts"), gcp_grant("accounts", "roles/datastore.user", [{"title": "t", "expression": expr}])])
}

# The environment's key by alias: any key of the account, confined to the one alias exactly.
key_statement(condition) := object.union(
	{"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": "arn:aws:kms:us-east-1:1:key/*"},
	condition,
)

test_key_by_alias if {
	count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", [key_statement({"Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": "alias/ssfkit-bank"}}})])])
	every condition in [
		{},
		{"Condition": {"ForAnyValue:StringLike": {"kms:ResourceAliases": "alias/ssfkit-bank"}}},
		{"Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": "alias/*"}}},
		{"Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/ssfkit-bank", "alias/other"]}}},
		{"Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": "alias/ssfkit-bank"}, "Bool": {"aws:SecureTransport": "true"}}},
		{"Condition": {"ForAllValues:StringEquals": {"kms:ResourceAliases": "alias/ssfkit-bank"}}},
	] {
		count(sovereignty.deny) == 2 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", [key_statement(condition)])])
	}
}

# A statement IAM would refuse (no Action nor NotAction, no Resource nor NotResource, or set to
# null) is not read as harmless.
test_statements_naming_nothing_denied if {
	every bad in [
		{"Effect": "Allow", "Action": "dynamodb:GetItem"},
		{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": null},
		{"Effect": "Allow", "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
		{"Effect": "Allow", "NotAction": null, "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
	] {
		count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", array.concat(own, [bad]))])
	}
}
