# Who may reach what, read as an allow-list (docs/security.md). A plan may hold only the kinds of
# access-granting resources these policies can read, each granting only what an ssfkit module
# grants; anything else is denied, and so is anything whose grant the plan knows only after
# apply: what cannot be proved harmless is refused.
package ssfkit.access

import data.ssfkit.lib

# Resource types that grant access, by name: IAM of any kind, roles and their assignments,
# resource policies, permissions, grants, ACLs, shared access signatures, function URLs.
grants_access(t) if regex.match(`(^aws_iam_|_iam_|_policy($|_)|_permission|_role($|_)|_grant|_acl($|_)|access_|_access|_sas($|_)|_authorizer|_function_url|_key_vault_access)`, t)

# The access-granting types these policies read, each checked below or in sovereignty and
# public. (A Lambda function's role is checked here too, but a function grants nothing itself.)
known_types := {
	"aws_iam_role", "aws_iam_role_policy", "aws_iam_policy", "aws_kms_key", "aws_sqs_queue_policy",
	"aws_s3_bucket_public_access_block",
	"azurerm_role_assignment", "azurerm_role_definition",
	"google_project_iam_member", "google_bigtable_table_iam_member", "google_pubsub_topic_iam_member",
	"google_pubsub_subscription_iam_member", "google_cloud_run_v2_service_iam_member",
	"google_service_account_iam_member", "google_kms_crypto_key_iam_member", "google_storage_bucket_iam_member",
}

deny contains msg if {
	some r in lib.resources
	r.mode == "managed" # a data source (a policy document) grants nothing until a resource uses it
	grants_access(r.type)
	not r.type in known_types
	msg := sprintf("%s: %s grants access in a way these policies do not check, so it is refused; an ssfkit plan grants only what its modules grant (docs/security.md)", [r.address, r.type])
}

# unknown_at(r, path): the plan knows r's attribute at path, or anything inside it, only after
# apply.
unknown_at(r, path) if lib.unknown(r, path)

unknown_at(r, path) if {
	v := object.get(r.unknown, path, false)
	is_object(v)
	walk(v, [_, true])
}

unknown_at(r, path) if {
	v := object.get(r.unknown, path, false)
	is_array(v)
	walk(v, [_, true])
}

# The attributes that say who gets what, per type: unknown, they cannot be checked.
security_attributes := {
	"aws_iam_role": ["name", "assume_role_policy", "inline_policy", "managed_policy_arns"],
	"aws_iam_role_policy": ["role", "policy"],
	"aws_iam_policy": ["name", "policy"],
	"aws_s3_bucket_public_access_block": ["bucket", "block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"],
	"aws_kms_key": ["policy"],
	"aws_sqs_queue": ["policy"],
	"aws_sqs_queue_policy": ["policy"],
	"aws_lambda_function": ["role"],
	"azurerm_role_assignment": ["scope"],
	"azurerm_role_definition": ["permissions", "assignable_scopes"],
	"google_project_iam_member": ["role", "member", "condition"],
	"google_bigtable_table_iam_member": ["role", "member", "table"],
	"google_pubsub_topic_iam_member": ["role", "member", "topic"],
	"google_pubsub_subscription_iam_member": ["role", "member", "subscription"],
	"google_cloud_run_v2_service_iam_member": ["role", "member"],
	"google_service_account_iam_member": ["role", "member"],
	"google_kms_crypto_key_iam_member": ["role", "member"],
	"google_storage_bucket_iam_member": ["role", "member", "bucket", "condition"],
}

# Attributes the provider computes from other resources when the configuration leaves them
# unset: a role's inline and managed policies (from role policies and attachments, which are
# checked themselves), a queue's policy (from queue policy resources, likewise).
reflected := {"aws_iam_role": {"inline_policy", "managed_policy_arns"}, "aws_sqs_queue": {"policy"}}

deny contains msg if {
	some r in lib.resources
	some attr in security_attributes[r.type]
	unknown_at(r, [attr])
	not reflected_unset(r, attr)
	msg := sprintf("%s: %s is known only after apply, so what it grants cannot be checked; build it from names and variables the plan knows (as the ssfkit modules do)", [r.address, attr])
}

reflected_unset(r, attr) if {
	attr in object.get(reflected, r.type, set())
	lib.unconfigured(r, attr)
}

# AWS. The roles a plan may hold are the ssf module's: an SSF's (<environment>-<ssf>-ssf), which
# only Lambda may assume, and its collectors' scheduler role (<environment>-<ssf>-collectors),
# which only EventBridge Scheduler may assume; and the coordination module's: its writer's and
# heartbeat's (<environment>-<name>-coord-writer, -coord-heartbeat, named as their functions),
# which only Lambda may assume, and its scheduler's (-coord-scheduler), EventBridge Scheduler's.
role_kind(name) := "ssf" if endswith(name, "-ssf")

role_kind(name) := "collectors" if endswith(name, "-collectors")

role_kind(name) := "coord-writer" if endswith(name, "-coord-writer")

role_kind(name) := "coord-heartbeat" if endswith(name, "-coord-heartbeat")

role_kind(name) := "coord-scheduler" if endswith(name, "-coord-scheduler")

trusted_service := {
	"ssf": "lambda.amazonaws.com", "collectors": "scheduler.amazonaws.com",
	"coord-writer": "lambda.amazonaws.com", "coord-heartbeat": "lambda.amazonaws.com", "coord-scheduler": "scheduler.amazonaws.com",
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_role")
	is_string(r.values.name)
	not role_kind(r.values.name)
	msg := sprintf("%s: role %s is not an ssfkit role (<environment>-<ssf>-ssf or -collectors, <environment>-<name>-coord-writer, -coord-heartbeat or -coord-scheduler); the policies cannot tell what it may reach, so an ssfkit plan holds no other role", [r.address, r.values.name])
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_role")
	kind := role_kind(r.values.name)
	is_string(r.values.assume_role_policy)
	some s in lib.as_list(json.unmarshal(r.values.assume_role_policy).Statement)
	s.Effect == "Allow"
	not trusts_only(s, trusted_service[kind])
	msg := sprintf("%s: role %s may be assumed by %v; only %s may assume it", [r.address, r.values.name, object.get(s, "Principal", object.get(s, "NotPrincipal", "anyone")), trusted_service[kind]])
}

# One service principal, by name, with sts:AssumeRole only.
trusts_only(s, service) if {
	object.get(s, "NotPrincipal", null) == null
	object.get(s, "NotAction", null) == null
	p := object.get(s, "Principal", {})
	is_object(p)
	object.keys(p) == {"Service"}
	lib.as_list(p.Service) == [service]
	[lower(a) | some a in lib.as_list(object.get(s, "Action", []))] == ["sts:assumerole"]
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_role_policy")
	is_string(r.values.role)
	not plan_role(r.values.role)
	msg := sprintf("%s: a policy on role %s, which is not an ssfkit role of this plan; the policies cannot tell who holds it", [r.address, r.values.role])
}

plan_role(name) if {
	some role in lib.resources_of("aws_iam_role")
	role.values.name == name
	role_kind(name)
}

# The collectors' role may invoke its SSF's two collectors and nothing else.
deny contains msg if {
	some r in lib.resources_of("aws_iam_role_policy")
	role_kind(r.values.role) == "collectors"
	is_string(r.values.policy)
	some s in lib.as_list(json.unmarshal(r.values.policy).Statement)
	s.Effect == "Allow"
	not collectors_statement(s, trim_suffix(r.values.role, "-collectors"))
	msg := sprintf("%s: role %s may only invoke %s's intent and garbage collectors; a statement grants %v on %v", [r.address, r.values.role, trim_suffix(r.values.role, "-collectors"), object.get(s, "Action", object.get(s, "NotAction", "?")), object.get(s, "Resource", object.get(s, "NotResource", "?"))])
}

# A coordination service's scheduler role may invoke its heartbeat function and nothing else.
deny contains msg if {
	some r in lib.resources_of("aws_iam_role_policy")
	role_kind(r.values.role) == "coord-scheduler"
	is_string(r.values.policy)
	some s in lib.as_list(json.unmarshal(r.values.policy).Statement)
	s.Effect == "Allow"
	heartbeat := concat("", [trim_suffix(r.values.role, "-scheduler"), "-heartbeat"])
	not invokes_only(s, {heartbeat})
	msg := sprintf("%s: role %s may only invoke %s; a statement grants %v on %v", [r.address, r.values.role, heartbeat, object.get(s, "Action", object.get(s, "NotAction", "?")), object.get(s, "Resource", object.get(s, "NotResource", "?"))])
}

collectors_statement(s, owner) if invokes_only(s, {concat("", [owner, "-intent-collector"]), concat("", [owner, "-garbage-collector"])})

# lambda:InvokeFunction on the named functions, by plain ARN, and nothing else.
invokes_only(s, functions) if {
	object.get(s, "NotAction", null) == null
	object.get(s, "NotResource", null) == null
	object.get(s, "NotPrincipal", null) == null
	every a in lib.as_list(s.Action) {
		lower(a) == "lambda:invokefunction"
	}
	every res in lib.as_list(s.Resource) {
		regex.match(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]+:function:[A-Za-z0-9_-]+$`, res)
		split(res, ":function:")[1] in functions
	}
}

# Managed policies: only a coordination service's client policy (<environment>-<name>-coord-
# client), whose statements ssfkit.coordination reads. Attaching it is the application's affair.
deny contains msg if {
	some r in lib.resources_of("aws_iam_policy")
	not lib.unknown(r, ["name"])
	not is_string(lib.value(r, ["name"]))
	msg := sprintf("%s: a managed policy without a name the plan shows; an ssfkit plan holds only coordination client policies, by name", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_policy")
	is_string(r.values.name)
	not endswith(r.values.name, "-coord-client")
	msg := sprintf("%s: managed policy %s is not an ssfkit policy (<environment>-<name>-coord-client, the coordination module's client policy); an ssfkit plan holds no other", [r.address, r.values.name])
}

# A function runs as the role of its SSF, and an SSF's role is held by its functions only.
ssf_function_prefix(f) := trim_suffix(trim_suffix(f.values.function_name, "-intent-collector"), "-garbage-collector")

deny contains msg if {
	some f in lib.resources_of("aws_lambda_function")
	is_string(f.values.role)
	role := regex.replace(f.values.role, `^arn:aws[a-z-]*:iam::[0-9]+:role/`, "")
	role_kind(role) == "ssf"
	trim_suffix(role, "-ssf") != ssf_function_prefix(f)
	msg := sprintf("%s: function %s runs as %s, the identity of another SSF", [f.address, f.values.function_name, role])
}

deny contains msg if {
	some f in lib.resources_of("aws_lambda_function")
	ssf_function(f)
	is_string(f.values.role)
	not regex.match(concat("", [`^arn:aws[a-z-]*:iam::[0-9]+:role/`, ssf_function_prefix(f), `-ssf$`]), f.values.role)
	msg := sprintf("%s: function %s of an SSF runs as %s, not as its SSF's own role %s-ssf", [f.address, f.values.function_name, f.values.role, ssf_function_prefix(f)])
}

ssf_function(f) if {
	some e in object.get(f.values, "environment", [])
	"SSFKIT_SSF" in object.keys(object.get(e, "variables", {}))
}

# A key's policy lets only principals that are named reach it.
deny contains msg if {
	some r in lib.resources_of("aws_kms_key")
	is_string(r.values.policy)
	some s in lib.as_list(json.unmarshal(r.values.policy).Statement)
	s.Effect == "Allow"
	wildcard_principal(s)
	msg := sprintf("%s: the key policy allows %v, a principal with a wildcard or everyone but someone", [r.address, object.get(s, "Principal", object.get(s, "NotPrincipal", "?"))])
}

wildcard_principal(s) if object.get(s, "NotPrincipal", null) != null

wildcard_principal(s) if {
	p := object.get(s, "Principal", null)
	is_string(p)
	contains(p, "*")
}

wildcard_principal(s) if {
	some v in object.get(s, "Principal", {})
	some x in lib.as_list(v)
	contains(x, "*")
}

# GCP: each kind of grant gives the roles the ssf and environment modules give with it, to
# service accounts (the Pub/Sub service agent's token-creator grant included), and no other.
gcp_roles := {
	"google_project_iam_member": {"roles/datastore.user"},
	"google_bigtable_table_iam_member": {"roles/bigtable.user"},
	"google_pubsub_topic_iam_member": {"roles/pubsub.publisher"},
	"google_pubsub_subscription_iam_member": {"roles/pubsub.subscriber"},
	"google_cloud_run_v2_service_iam_member": {"roles/run.invoker"},
	"google_service_account_iam_member": {"roles/iam.serviceAccountTokenCreator"},
	"google_kms_crypto_key_iam_member": {"roles/cloudkms.cryptoKeyEncrypterDecrypter"},
	"google_storage_bucket_iam_member": {"roles/storage.objectUser", "roles/storage.objectViewer"},
}

# A bucket grant is on a bucket of the plan that the same module instance creates (a
# coordination service's own), named as the plan shows it.
deny contains msg if {
	some r in lib.resources_of("google_storage_bucket_iam_member")
	not lib.unknown(r, ["bucket"])
	not own_bucket(r)
	not provenance_grant(r)
	msg := sprintf("%s: a grant on bucket %v, which no resource of its module in this plan creates; ssfkit grants only a coordination service's own bucket, and an SSF its own partitions of its environment's provenance bucket", [r.address, object.get(r.values, "bucket", "unset")])
}

# An environment's provenance bucket (labelled ssfkit-provenance) holds every SSF's records:
# every grant on it is an SSF's grant of its own partitions, whichever module makes it.
deny contains msg if {
	some r in lib.resources_of("google_storage_bucket_iam_member")
	some b in lib.resources_of("google_storage_bucket")
	object.get(object.get(b.values, "labels", {}), "ssfkit-provenance", "") == "true"
	is_string(r.values.bucket)
	r.values.bucket == b.values.name
	not provenance_grant(r)
	msg := sprintf("%s: a grant on provenance bucket %s that is not an SSF's grant of its own partitions (roles/storage.objectUser to its identity, on a condition naming exactly PREFIX/invocations|data_events|calls/ssf=NAME/)", [r.address, r.values.bucket])
}

# An ssf module's grant of its own provenance partitions (modules/gcp/ssf): objectUser on a
# provenance bucket of the plan in the same environment (the ssfkit-environment label of the
# bucket and of the module's Cloud Run service), to the identity the service runs as, on the one
# condition the module writes: the three tables' partitions of the SSF the service serves.
provenance_grant(r) if {
	r.values.role == "roles/storage.objectUser"
	some run in lib.resources_of("google_cloud_run_v2_service")
	run.module == r.module
	some container in run.values.template[0].containers
	some env in container.env
	env.name == "SSFKIT_SSF"
	r.values.member == concat("", ["serviceAccount:", run.values.template[0].service_account])
	some b in lib.resources_of("google_storage_bucket")
	b.values.name == r.values.bucket
	labels := object.get(b.values, "labels", {})
	labels["ssfkit-provenance"] == "true"
	labels["ssfkit-environment"] == object.get(object.get(run.values, "labels", {}), "ssfkit-environment", null)
	count(r.values.condition) == 1
	r.values.condition[0].expression == provenance_condition(r.values.bucket, r.values.condition[0].expression, env.value)
}

# The condition the ssf module writes, with the prefix the expression names (letters, digits,
# ., _, - and /; nothing a pattern could be made of).
provenance_condition(bucket, expression, ssf) := concat(" || ", [sprintf(`resource.name.startsWith("projects/_/buckets/%s/objects/%s%s/ssf=%s/")`, [bucket, prefix, table, ssf]) |
	some table in ["invocations", "data_events", "calls"]
]) if {
	m := regex.find_all_string_submatch_n(`^resource\.name\.startsWith\("projects/_/buckets/[^/]+/objects/((?:[A-Za-z0-9._-]+/)*)invocations/`, expression, 1)
	count(m) == 1
	prefix := m[0][1]
}

own_bucket(r) if {
	some b in lib.resources_of("google_storage_bucket")
	b.module == r.module
	is_string(r.values.bucket)
	r.values.bucket == b.values.name
}

deny contains msg if {
	some t, roles in gcp_roles
	some r in lib.resources_of(t)
	is_string(r.values.role)
	not r.values.role in roles
	msg := sprintf("%s: %s grants %s; an ssfkit plan grants only %v with it", [r.address, t, r.values.role, sort(roles)])
}

deny contains msg if {
	some t, _ in gcp_roles
	some r in lib.resources_of(t)
	is_string(r.values.member)
	not startswith(r.values.member, "serviceAccount:")
	msg := sprintf("%s: %s is granted %v; ssfkit grants only service accounts (its SSFs', the scheduler's, the platform's service agents)", [r.address, r.values.member, r.values.role])
}

# Only Pub/Sub's service agent may mint tokens as a service account (to sign its push requests).
deny contains msg if {
	some r in lib.resources_of("google_service_account_iam_member")
	is_string(r.values.member)
	not regex.match(`^serviceAccount:service-[0-9]+@gcp-sa-pubsub\.iam\.gserviceaccount\.com$`, r.values.member)
	msg := sprintf("%s: %s may act as a service account; only Pub/Sub's service agent may (to sign push requests)", [r.address, r.values.member])
}

# Azure: roles by name from this list, on a scope in the resource group; or the environment's
# peer-invoker role, a custom role of the plan that allows reading a function app's host keys.
azure_roles := {
	"Storage Table Data Contributor", "Storage Queue Data Contributor", "Storage Queue Data Message Sender",
	"Storage Blob Data Owner", "Storage Blob Data Contributor", "Storage Blob Data Reader", "Key Vault Crypto Service Encryption User",
}

deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	name := object.get(r.values, "role_definition_name", null)
	is_string(name)
	name != ""
	not name in azure_roles
	not plan_role_definition_name(name)
	msg := sprintf("%s: %s is not a role ssfkit assigns (%v, or its peer-invoker role)", [r.address, name, sort(azure_roles)])
}

plan_role_definition_name(name) if {
	some d in lib.resources_of("azurerm_role_definition")
	d.values.name == name
}

# A role given by definition ID must be a custom role the plan defines (and checks below), by an
# ID the plan knows: .../providers/Microsoft.Authorization/roleDefinitions/<its GUID>.
deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	not lib.set(r, ["role_definition_name"])
	not plan_role_definition_id(r)
	msg := sprintf("%s: role definition %v is neither named nor a custom role this plan defines by a known ID, so what it grants cannot be checked", [r.address, object.get(r.values, "role_definition_id", "known only after apply")])
}

plan_role_definition_id(r) if {
	id := r.values.role_definition_id
	is_string(id)
	some d in lib.resources_of("azurerm_role_definition")
	guid := d.values.role_definition_id
	is_string(guid)
	endswith(lower(id), concat("", ["/providers/microsoft.authorization/roledefinitions/", lower(guid)]))
}

# The custom roles a plan may define: reading function apps' host keys, nothing else.
azure_custom_actions := {"microsoft.web/sites/host/listkeys/action"}

deny contains msg if {
	some d in lib.resources_of("azurerm_role_definition")
	some p in object.get(d.values, "permissions", [])
	some field in {"actions", "data_actions"}
	some a in object.get(p, field, [])
	not lower(a) in azure_custom_actions
	msg := sprintf("%s: custom role %v allows %s; an ssfkit custom role allows only %v", [d.address, d.values.name, a, sort(azure_custom_actions)])
}

deny contains msg if {
	some d in lib.resources_of("azurerm_role_definition")
	some p in object.get(d.values, "permissions", [])
	some field in {"not_actions", "not_data_actions"}
	count(object.get(p, field, [])) > 0
	msg := sprintf("%s: custom role %v uses %s; list what it allows instead", [d.address, d.values.name, field])
}
