# Data sovereignty (Beldi §2): an SSF's identity reaches its own table and queue and no other
# SSF's. The ssf module names an SSF's role <environment>-<ssf>-ssf and its table and queue
# <environment>-<ssf>.
package ssfkit.sovereignty

import data.ssfkit.lib

ssf_policies contains p if {
	some r in lib.resources_of("aws_iam_role_policy")
	endswith(r.values.role, "-ssf")
	p := {"address": r.address, "owner": trim_suffix(r.values.role, "-ssf"), "values": r.values, "unknown": r.unknown}
}

deny contains msg if {
	some p in ssf_policies
	some s in statements(p.values.policy)
	s.Effect == "Allow"
	some action in as_list(s.Action)
	some service in {"dynamodb", "sqs"}
	startswith(action, concat("", [service, ":"]))
	some resource in as_list(s.Resource)
	not owned(service, resource, p.owner)
	msg := sprintf("%s: the identity of SSF %s may %s on %s, which is not its own", [p.address, p.owner, action, resource])
}

# A policy computed from resources the plan creates (and the role it is attached to) is unknown
# until they exist: plan again after the apply (as tests/terraform does) to check it.
warn contains msg if {
	some r in lib.resources_of("aws_iam_role_policy")
	r.unknown.policy == true
	msg := sprintf("%s: the policy is known only after apply; check a plan made after it", [r.address])
}

statements(doc) := as_list(json.unmarshal(doc).Statement)

as_list(x) := x if is_array(x)

as_list(x) := [x] if not is_array(x)

owned("dynamodb", resource, owner) if {
	# the table, or its indexes and streams
	some suffix in {"", "/*", "/index/*", "/stream/*"}
	endswith(resource, concat("", [":table/", owner, suffix]))
}

owned("sqs", resource, owner) if {
	parts := split(resource, ":")
	parts[count(parts) - 1] == owner
}
