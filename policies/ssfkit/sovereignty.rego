# Data sovereignty (Beldi §2): an SSF's identity reaches its own table and queue and no other
# SSF's. AWS: the ssf module names an SSF's role <environment>-<ssf>-ssf and its table and queue
# <environment>-<ssf>. Azure and GCP: an SSF's grants are made by its own ssf module instance,
# on storage that instance creates; grants broader than one SSF's storage are denied.
package ssfkit.sovereignty

import data.ssfkit.lib

ssf_policies contains p if {
	some r in lib.resources_of("aws_iam_role_policy")
	endswith(r.values.role, "-ssf")
	p := {"address": r.address, "owner": trim_suffix(r.values.role, "-ssf"), "values": r.values, "unknown": r.unknown}
}

# Inline policies as the role shows them (declared on it, or read back after apply from its
# role policies): checked against the same allow-list.
ssf_policies contains p if {
	some r in lib.resources_of("aws_iam_role")
	ssf_role_name(r.values.name)
	some inline in object.get(r.values, "inline_policy", [])
	is_string(object.get(inline, "policy", null))
	inline.policy != ""
	p := {"address": r.address, "owner": trim_suffix(r.values.name, "-ssf"), "values": {"policy": inline.policy}, "unknown": {}}
}

# AWS: an SSF's role holds the ssf module's inline policy and nothing else, and every Allow
# statement in it is on this allow-list (actions compared case-insensitively, as IAM does): its
# own table and queue, its dead-letter queue, its log groups, its peers' functions and the
# environment's key. Anything the list does not name (a wildcard, another service, NotAction,
# NotResource) is denied: what cannot be proved harmless is refused.
allowed_actions := {
	"dynamodb": {
		"dynamodb:getitem", "dynamodb:putitem", "dynamodb:updateitem", "dynamodb:deleteitem",
		"dynamodb:conditioncheckitem", "dynamodb:query", "dynamodb:describetable",
	},
	"sqs": {
		"sqs:sendmessage", "sqs:receivemessage", "sqs:deletemessage", "sqs:changemessagevisibility",
		"sqs:getqueueattributes", "sqs:getqueueurl",
	},
	"logs": {"logs:createlogstream", "logs:putlogevents"},
	"lambda": {"lambda:invokefunction"},
	"kms": {"kms:decrypt", "kms:generatedatakey"},
	"s3": {"s3:putobject"},
}

service_of(action) := split(lower(action), ":")[0]

allowed_action(action) if lower(action) in allowed_actions[service_of(action)]

# IAM reads Effect exactly: anything but "Allow" or "Deny" is a document these rules cannot read.
deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	not object.get(s, "Effect", null) in {"Allow", "Deny"}
	msg := sprintf("%s: a statement of SSF %s's policy has Effect %v, neither Allow nor Deny", [p.address, p.owner, object.get(s, "Effect", "unset")])
}

deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	s.Effect == "Allow"
	some key in {"NotAction", "NotResource", "NotPrincipal"}
	object.get(s, key, null) != null
	msg := sprintf("%s: a statement of SSF %s's policy allows with %s, which grants everything it does not name; list what the SSF may do", [p.address, p.owner, key])
}

# A statement must name what it allows and on what: one with neither Action nor NotAction, or
# neither Resource nor NotResource, cannot be read (IAM refuses it; a rule that passed it would
# pass whatever IAM made of it).
deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	s.Effect == "Allow"
	some key in ["Action", "Resource"]
	object.get(s, key, null) == null
	object.get(s, concat("", ["Not", key]), null) == null
	msg := sprintf("%s: a statement of SSF %s's policy names no %s (nor Not%s)", [p.address, p.owner, key, key])
}

deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	s.Effect == "Allow"
	some action in lib.as_list(object.get(s, "Action", []))
	not allowed_action(action)
	msg := sprintf("%s: the identity of SSF %s may not hold %s: not on the allow-list of an SSF's actions (its table, queues, logs, peers, key, provenance)", [p.address, p.owner, action])
}

deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	s.Effect == "Allow"
	some action in lib.as_list(object.get(s, "Action", []))
	allowed_action(action)
	some resource in lib.as_list(object.get(s, "Resource", []))
	not owned(service_of(action), resource, p.owner)
	not key_by_alias(service_of(action), resource, s)
	msg := sprintf("%s: the identity of SSF %s may %s on %s, which is not its own", [p.address, p.owner, action, resource])
}

# An SSF's role holds no other policy: managed (or customer-managed) policies attached to it,
# inline policies declared on the role itself.
deny contains msg if {
	some r in lib.resources_of("aws_iam_role_policy_attachment")
	ssf_role_name(r.values.role)
	msg := sprintf("%s: a managed policy (%v) attached to SSF role %s; an SSF's role holds only its ssf module's own policy", [r.address, r.values.policy_arn, r.values.role])
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_policy_attachment")
	some role in object.get(r.values, "roles", [])
	ssf_role_name(role)
	msg := sprintf("%s: a policy attached to SSF role %s; an SSF's role holds only its ssf module's own policy", [r.address, role])
}

deny contains msg if {
	some r in lib.resources_of("aws_iam_role")
	ssf_role_name(r.values.name)
	count(object.get(r.values, "managed_policy_arns", [])) > 0
	msg := sprintf("%s: SSF role %s declares managed_policy_arns; an SSF's role holds only its ssf module's own policy", [r.address, r.values.name])
}

ssf_role_name(name) if endswith(name, "-ssf")

statements(doc) := lib.as_list(json.unmarshal(doc).Statement)

owned("dynamodb", resource, owner) if {
	# the table, or its indexes and streams
	some suffix in {"", "/*", "/index/*", "/stream/*"}
	endswith(resource, concat("", [":table/", owner, suffix]))
}

# the queue, or its dead-letter queue (the runtime records instances it gave up on there)
owned("sqs", resource, owner) if {
	parts := split(resource, ":")
	parts[count(parts) - 1] in {owner, concat("", [owner, "-dlq"])}
}

# its functions' log groups (/aws/lambda/<owner>, -intent-collector, -garbage-collector)
owned("logs", resource, owner) if {
	m := regex.find_all_string_submatch_n(`^arn:aws[a-z-]*:logs:[a-z0-9-]+:[0-9]+:log-group:/aws/lambda/([A-Za-z0-9_-]+):\*$`, resource, 1)
	count(m) == 1
	m[0][1] in {owner, concat("", [owner, "-intent-collector"]), concat("", [owner, "-garbage-collector"])}
}

# its own partitions of its environment's provenance bucket (<environment>-provenance...), one
# resource per table: [PREFIX/]TABLE/ssf=<ssf>/* (adapters/provenance/blobsink). The owner is
# <environment>-<ssf>, and an SSF's name has no hyphen, so the environment is what precedes the
# last one. A pattern anywhere else (the table, the prefix) could reach another SSF's partition.
owned("s3", resource, owner) if {
	m := regex.find_all_string_submatch_n(`^arn:aws[a-z-]*:s3:::([a-z0-9][a-z0-9.-]*)/((?:[A-Za-z0-9._-]+/)*)(invocations|data_events|calls)/ssf=([A-Za-z0-9_]+)/\*$`, resource, 1)
	count(m) == 1
	ssf := m[0][4]
	endswith(owner, concat("", ["-", ssf]))
	environment := trim_suffix(owner, concat("", ["-", ssf]))
	startswith(m[0][1], concat("", [environment, "-provenance"]))
}

# a named function (its peers'), never a pattern
owned("lambda", resource, _) if regex.match(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]+:function:[A-Za-z0-9_-]+$`, resource)

# a named key (the environment's), never a pattern
owned("kms", resource, _) if regex.match(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]+:key/[A-Za-z0-9-]+$`, resource)

# any key of the account, confined by one exact condition to the keys that carry one named alias
# (the environment's key, whose ID exists only after apply: the ssf module names it so that the
# plan shows the whole policy)
key_by_alias("kms", resource, s) if {
	regex.match(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]+:key/\*$`, resource)
	object.keys(s.Condition) == {"ForAnyValue:StringEquals"}
	c := s.Condition["ForAnyValue:StringEquals"]
	object.keys(c) == {"kms:ResourceAliases"}
	aliases := lib.as_list(c["kms:ResourceAliases"])
	count(aliases) == 1
	regex.match(`^alias/[A-Za-z0-9/_-]+$`, aliases[0])
}

# Azure: data roles on storage (Storage Table/Queue/Blob Data ...) scoped to one storage account
# or below it, and that account created by the same SSF's module.
azure_data_role(r) if regex.match(`^Storage .*Data `, object.get(r.values, "role_definition_name", ""))

storage_account_of(scope) := lower(m[0][1]) if {
	m := regex.find_all_string_submatch_n(`(?i)/providers/Microsoft\.Storage/storageAccounts/([^/]+)`, scope, 1)
	count(m) == 1
}

deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	azure_data_role(r)
	is_string(r.values.scope)
	not storage_account_of(r.values.scope)
	msg := sprintf("%s: %s at %s reaches every SSF's storage there; scope it to the SSF's own account, table or queue", [r.address, r.values.role_definition_name, r.values.scope])
}

deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	azure_data_role(r)
	account := storage_account_of(r.values.scope)
	some a in lib.resources_of("azurerm_storage_account")
	lower(a.values.name) == account
	a.module != r.module
	msg := sprintf("%s: %s on storage account %s, which belongs to %s, not to this SSF (%s)", [r.address, r.values.role_definition_name, account, a.module, r.module])
}

# GCP: Firestore has no database-level IAM, so an SSF's access is a project-level grant with a
# condition naming its database; project-level Pub/Sub and Bigtable data roles reach every SSF.
gcp_project_grants contains r if {
	some t in {"google_project_iam_member", "google_project_iam_binding"}
	some r in lib.resources_of(t)
}

# The database a grant's condition confines it to. Only the exact forms the ssf module writes
# are read: the database itself, or the database and what is below it. Anything else (a
# negation, "|| true", another attribute) cannot be proved to confine the grant, and reads as
# no confinement.
condition_database(r) := m[0][2] if {
	some c in r.values.condition
	m := regex.find_all_string_submatch_n(`^resource\.name == "projects/([a-z0-9-]+)/databases/([a-z0-9-]+)"$`, c.expression, 1)
	count(m) == 1
}

condition_database(r) := m[0][2] if {
	some c in r.values.condition
	m := regex.find_all_string_submatch_n(`^resource\.name == "projects/([a-z0-9-]+)/databases/([a-z0-9-]+)" \|\| resource\.name\.startsWith\("projects/([a-z0-9-]+)/databases/([a-z0-9-]+)/"\)$`, c.expression, 1)
	count(m) == 1
	m[0][1] == m[0][3]
	m[0][2] == m[0][4]
}

deny contains msg if {
	some r in gcp_project_grants
	startswith(r.values.role, "roles/datastore.")
	not condition_unknown(r)
	not condition_database(r)
	msg := sprintf("%s: %s at the project without a condition naming one database reaches every SSF's state", [r.address, r.values.role])
}

# The plan marks a condition block [{}] when it is known, [{"expression": true}] when its
# expression is not, true when the whole block is not.
condition_unknown(r) if r.unknown.condition == true

condition_unknown(r) if {
	some c in r.unknown.condition
	c.expression == true
}

deny contains msg if {
	some r in gcp_project_grants
	db := condition_database(r)
	some d in lib.resources_of("google_firestore_database")
	d.values.name == db
	d.module != r.module
	msg := sprintf("%s: %s on database %s, which belongs to %s, not to this SSF (%s)", [r.address, r.values.role, db, d.module, r.module])
}

deny contains msg if {
	some r in gcp_project_grants
	some prefix in {"roles/pubsub.", "roles/bigtable."}
	startswith(r.values.role, prefix)
	not r.values.role in {"roles/pubsub.viewer", "roles/bigtable.viewer"}
	msg := sprintf("%s: %s at the project reaches every SSF's queues or tables; grant it on the SSF's own topic, subscription or table", [r.address, r.values.role])
}

# Bigtable has table-level policies: an SSF's grant is on the table its own module made.
deny contains msg if {
	some t in {"google_bigtable_table_iam_member", "google_bigtable_table_iam_binding"}
	some r in lib.resources_of(t)
	some tbl in lib.resources_of("google_bigtable_table")
	tbl.values.name == r.values.table
	tbl.values.instance_name == r.values.instance_name
	tbl.module != r.module
	msg := sprintf("%s: %s on Bigtable table %s, which belongs to %s, not to this SSF (%s)", [r.address, r.values.role, tbl.values.name, tbl.module, r.module])
}

# Broad roles reach every SSF's state at once, whatever else the rules allow: GCP's basic roles
# on the project, Azure's Owner, Contributor and User Access Administrator anywhere, and any
# Azure role given by its definition ID (which these rules cannot read as a name).
deny contains msg if {
	some r in gcp_project_grants
	r.values.role in {"roles/owner", "roles/editor", "roles/viewer"}
	msg := sprintf("%s: %s at the project reaches every SSF's state; grant the SSF's own resources only", [r.address, r.values.role])
}

deny contains msg if {
	some r in lib.resources_of("google_project_iam_policy")
	msg := sprintf("%s: an authoritative project IAM policy replaces every grant, the SSFs' included; use members on the SSFs' own resources", [r.address])
}

azure_broad_roles := {"owner", "contributor", "user access administrator"}

# Their built-in definition IDs, the same in every subscription.
azure_broad_role_ids := {
	"8e3af657-a8ff-443c-a75c-2fe8c4bcb635", # Owner
	"b24988ac-6180-42a0-ab88-20f7382dd24c", # Contributor
	"18d7d88d-d35e-4fb5-a5c3-7773c20a72d9", # User Access Administrator
}

deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	lower(object.get(r.values, "role_definition_name", "")) in azure_broad_roles
	msg := sprintf("%s: %s at %v reaches every SSF's state there", [r.address, r.values.role_definition_name, object.get(r.values, "scope", "its scope")])
}

# (After apply the provider fills in the ID of a role given by name: it is checked too.)
deny contains msg if {
	some r in lib.resources_of("azurerm_role_assignment")
	id := lower(object.get(r.values, "role_definition_id", ""))
	some broad in azure_broad_role_ids
	endswith(id, broad)
	msg := sprintf("%s: role definition %s (Owner, Contributor or User Access Administrator) reaches every SSF's state there", [r.address, id])
}
