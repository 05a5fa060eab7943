# Plans for the policies' tests: the shape of `terraform show -json` that the policies read.
package ssfkit.plans

plan(changes) := {"format_version": "1.2", "resource_changes": changes}

create(address, type, after) := {"address": address, "type": type, "change": {"actions": ["create"], "after": after, "after_unknown": {}}}

ssf_policy(role, statements) := create(
	sprintf("module.ssf[%q].aws_iam_role_policy.this", [role]),
	"aws_iam_role_policy",
	{"role": role, "policy": json.marshal({"Version": "2012-10-17", "Statement": statements})},
)

table(address, pitr, sse) := create(address, "aws_dynamodb_table", {
	"name": "bank-accounts",
	"point_in_time_recovery": [{"enabled": pitr}],
	"server_side_encryption": [{"enabled": sse}],
})

# in_module is a change declared by the module instance module (one SSF's ssf module).
in_module(module, change) := object.union(change, {"module_address": module, "address": sprintf("%s.%s", [module, change.address])})

# unknown_after_apply marks attributes of a change as known only after apply.
unknown_after_apply(change, attrs) := object.union(change, {"change": object.union(change.change, {"after_unknown": {a: true | some a in attrs}})})
