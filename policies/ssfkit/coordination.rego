# A coordination service's identities (modules/<cloud>/coordination, docs/coordination.md) reach
# its own table, request queue and bucket, each only as its part needs, and nothing of an SSF or
# of another coordination service. AWS: the module names every resource <environment>-<name>-coord
# (the bucket <environment>-<name>-coord-<account>); the writer's and the heartbeat's roles are
# named as their functions (…-coord-writer, …-coord-heartbeat) and hold one inline policy each;
# the clients' (`ssfkit coord proxy`) identity is a managed policy, …-coord-client.
package ssfkit.coordination

import data.ssfkit.lib
import data.ssfkit.sovereignty

# --- AWS: the identities' policies -------------------------------------------------------------

kinds := {"writer", "heartbeat", "client"}

# The policy documents of coordination identities, with the service they belong to (owner,
# <environment>-<name>-coord) and the identity's kind.
identities contains p if {
	some r in lib.resources_of("aws_iam_role_policy")
	is_string(r.values.role)
	some kind in {"writer", "heartbeat"}
	suffix := concat("", ["-coord-", kind])
	endswith(r.values.role, suffix)
	is_string(r.values.policy)
	p := {"address": r.address, "owner": concat("", [trim_suffix(r.values.role, suffix), "-coord"]), "kind": kind, "policy": r.values.policy}
}

# Inline policies as a role shows them (declared on it, or read back after apply).
identities contains p if {
	some r in lib.resources_of("aws_iam_role")
	is_string(r.values.name)
	some kind in {"writer", "heartbeat"}
	suffix := concat("", ["-coord-", kind])
	endswith(r.values.name, suffix)
	some inline in object.get(r.values, "inline_policy", [])
	is_string(object.get(inline, "policy", null))
	inline.policy != ""
	p := {"address": r.address, "owner": concat("", [trim_suffix(r.values.name, suffix), "-coord"]), "kind": kind, "policy": inline.policy}
}

identities contains p if {
	some r in lib.resources_of("aws_iam_policy")
	is_string(r.values.name)
	endswith(r.values.name, "-coord-client")
	is_string(r.values.policy)
	p := {"address": r.address, "owner": trim_suffix(r.values.name, "-client"), "kind": "client", "policy": r.values.policy}
}

table_read := {"dynamodb:getitem", "dynamodb:query", "dynamodb:describetable"}

table_write := {"dynamodb:putitem", "dynamodb:updateitem", "dynamodb:deleteitem", "dynamodb:conditioncheckitem"}

bucket_read := {"s3:getobject", "s3:listbucket"}

bucket_write := {"s3:putobject", "s3:deleteobject"}

own_logs := {"logs:createlogstream", "logs:putlogevents"}

key_use := {"kms:decrypt", "kms:generatedatakey"}

# What each identity may hold: the writer applies requests from its queue, the heartbeat expires
# sessions and writes snapshots, the client reads, sends requests and writes only its sessions'
# and requests' partitions (see client_write below). Only the functions append to logs.
allowed_actions := {
	"writer": ((((table_read | table_write) | {"sqs:receivemessage", "sqs:deletemessage", "sqs:changemessagevisibility", "sqs:getqueueattributes", "sqs:getqueueurl"}) | (bucket_read | bucket_write)) | own_logs) | key_use,
	"heartbeat": (((table_read | table_write) | (bucket_read | bucket_write)) | own_logs) | key_use,
	"client": (((table_read | table_write) | {"sqs:sendmessage", "sqs:getqueueattributes", "sqs:getqueueurl"}) | bucket_read) | key_use,
}

service_of(action) := split(lower(action), ":")[0]

statements(doc) := lib.as_list(json.unmarshal(doc).Statement)

allows(s) if s.Effect == "Allow"

deny contains msg if {
	some p in identities
	some s in statements(p.policy)
	not object.get(s, "Effect", null) in {"Allow", "Deny"}
	msg := sprintf("%s: a statement of coordination service %s's %s policy has Effect %v, neither Allow nor Deny", [p.address, p.owner, p.kind, object.get(s, "Effect", "unset")])
}

deny contains msg if {
	some p in identities
	some s in statements(p.policy)
	allows(s)
	some key in {"NotAction", "NotResource", "NotPrincipal"}
	object.get(s, key, null) != null
	msg := sprintf("%s: a statement of coordination service %s's %s policy allows with %s, which grants everything it does not name", [p.address, p.owner, p.kind, key])
}

deny contains msg if {
	some p in identities
	some s in statements(p.policy)
	allows(s)
	some action in lib.as_list(object.get(s, "Action", []))
	not lower(action) in allowed_actions[p.kind]
	msg := sprintf("%s: the %s identity of coordination service %s may not hold %s: not on its allow-list (%v)", [p.address, p.kind, p.owner, action, sort(allowed_actions[p.kind])])
}

deny contains msg if {
	some p in identities
	some s in statements(p.policy)
	allows(s)
	some action in lib.as_list(object.get(s, "Action", []))
	lower(action) in allowed_actions[p.kind]
	some resource in lib.as_list(object.get(s, "Resource", []))
	not owned(p, lower(action), resource)
	not sovereignty.key_by_alias(service_of(action), resource, s)
	msg := sprintf("%s: the %s identity of coordination service %s may %s on %s, which is not its own", [p.address, p.kind, p.owner, action, resource])
}

# The client writes the table only where a condition confines it to the partitions of sessions
# and requests (DynamoDB's dynamodb:LeadingKeys, every key of the request: ForAllValues):
# zk/session, zk/req/<session> and zk/reqpart (a request too large for one row, in parts).
deny contains msg if {
	some p in identities
	p.kind == "client"
	some s in statements(p.policy)
	allows(s)
	some action in lib.as_list(object.get(s, "Action", []))
	lower(action) in table_write
	not leading_keys_confined(s)
	msg := sprintf("%s: the client identity of coordination service %s may %s on any partition; confine it with ForAllValues:StringLike on dynamodb:LeadingKeys to zk/session, zk/req/* and zk/reqpart", [p.address, p.owner, action])
}

client_partitions := {"zk/session", "zk/req/*", "zk/reqpart"}

leading_keys_confined(s) if {
	c := object.get(s, "Condition", {})
	object.keys(c) == {"ForAllValues:StringLike"}
	object.keys(c["ForAllValues:StringLike"]) == {"dynamodb:LeadingKeys"}
	keys := lib.as_list(c["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
	count(keys) > 0
	every k in keys {
		k in client_partitions
	}
}

# Its own resources, by ARN: the table (not its indexes or streams, which it does not use), the
# request queue, the bucket and its objects, its function's log group, the environment's key.
owned(p, action, resource) if {
	service_of(action) == "dynamodb"
	regex.match(`^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]+:table/[A-Za-z0-9_.-]+$`, resource)
	endswith(resource, concat("", [":table/", p.owner]))
}

owned(p, action, resource) if {
	service_of(action) == "sqs"
	regex.match(`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]+:[A-Za-z0-9_-]+$`, resource)
	endswith(resource, concat("", [":", p.owner]))
}

owned(p, action, resource) if {
	action == "s3:listbucket"
	regex.match(concat("", [`^arn:aws[a-z-]*:s3:::`, p.owner, `-[0-9]{12}$`]), resource)
}

owned(p, action, resource) if {
	action in {"s3:getobject", "s3:putobject", "s3:deleteobject"}
	regex.match(concat("", [`^arn:aws[a-z-]*:s3:::`, p.owner, `-[0-9]{12}/\*$`]), resource)
}

owned(p, action, resource) if {
	service_of(action) == "logs"
	p.kind in {"writer", "heartbeat"}
	regex.match(concat("", [`^arn:aws[a-z-]*:logs:[a-z0-9-]+:[0-9]+:log-group:/aws/lambda/`, p.owner, "-", p.kind, `:\*$`]), resource)
}

owned(_, action, resource) if {
	service_of(action) == "kms"
	sovereignty.owned("kms", resource, "")
}

# --- AWS: the functions ------------------------------------------------------------------------

# A coordination function is the writer or the heartbeat, named for it (…-coord-writer or
# …-coord-heartbeat), and runs as its own role, named as the function; a coordination role is
# held by its function only.
coordination_functions contains {"address": r.address, "name": r.values.function_name, "role": vars.SSFKIT_COORD_ROLE, "arn": object.get(r.values, "role", null)} if {
	some r in lib.resources_of("aws_lambda_function")
	some e in object.get(r.values, "environment", [])
	vars := object.get(e, "variables", {})
	"SSFKIT_COORD_ROLE" in object.keys(vars)
	not "SSFKIT_SSF" in object.keys(vars)
}

deny contains msg if {
	some f in coordination_functions
	not f.role in {"writer", "heartbeat"}
	msg := sprintf("%s: SSFKIT_COORD_ROLE is %v; a coordination function is the writer or the heartbeat", [f.address, f.role])
}

deny contains msg if {
	some f in coordination_functions
	f.role in {"writer", "heartbeat"}
	is_string(f.name)
	not endswith(f.name, concat("", ["-coord-", f.role]))
	msg := sprintf("%s: the coordination %s is named %s, not <environment>-<name>-coord-%s", [f.address, f.role, f.name, f.role])
}

deny contains msg if {
	some f in coordination_functions
	is_string(f.name)
	is_string(f.arn)
	not regex.match(concat("", [`^arn:aws[a-z-]*:iam::[0-9]+:role/`, f.name, `$`]), f.arn)
	msg := sprintf("%s: the coordination function %s runs as %s, not as its own role %s", [f.address, f.name, f.arn, f.name])
}

deny contains msg if {
	some r in lib.resources_of("aws_lambda_function")
	is_string(r.values.role)
	role := regex.replace(r.values.role, `^arn:aws[a-z-]*:iam::[0-9]+:role/`, "")
	some kind in {"writer", "heartbeat"}
	endswith(role, concat("", ["-coord-", kind]))
	role != r.values.function_name
	msg := sprintf("%s: function %s runs as %s, the identity of a coordination service's %s", [r.address, r.values.function_name, role, kind])
}

# --- GCP: the clients' service account ---------------------------------------------------------

# The coordination module's client service account (<…>-cc-<hash>) reads the bucket and
# publishes requests; it never writes objects nor consumes the queue.
gcp_client(member) if regex.match(`^serviceAccount:[a-z][-a-z0-9]*-cc-[0-9a-f]{6}@`, member)

deny contains msg if {
	some t in {"google_storage_bucket_iam_member", "google_pubsub_subscription_iam_member"}
	some r in lib.resources_of(t)
	is_string(r.values.member)
	gcp_client(r.values.member)
	not r.values.role in {"roles/storage.objectViewer"}
	msg := sprintf("%s: %s is a coordination service's client identity; it may only read the bucket (roles/storage.objectViewer) and publish requests, not hold %v", [r.address, r.values.member, r.values.role])
}
