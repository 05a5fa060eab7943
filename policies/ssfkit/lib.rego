# Helpers shared by the ssfkit policies, over `terraform show -json` of a plan.
package ssfkit.lib

# Resources the plan creates, updates, replaces or keeps (not those it only deletes), with their
# planned values and the module instance that declares them ("" for the root module): one ssf
# module instance is one SSF. A replacement (delete and create, in either order) is checked
# like a creation: what it creates is what will run.
resources contains r if {
	some rc in input.resource_changes
	rc.change.actions != ["delete"]
	r := {
		"address": rc.address, "type": rc.type, "module": object.get(rc, "module_address", ""), "mode": object.get(rc, "mode", "managed"),
		"values": object.get(rc.change, "after", {}), "unknown": object.get(rc.change, "after_unknown", {}),
	}
}

resources_of(t) := {r | some r in resources; r.type == t}

# unknown(r, path): the plan knows r's attribute at path (["function_name"], or
# ["push_config", 0, "push_endpoint"]) only after apply.
unknown(r, path) if object.get(r.unknown, path, false) == true

# as_list(x): x if it is an array, else [x] (IAM and JSON policies allow either).
as_list(x) := x if is_array(x)

as_list(x) := [x] if not is_array(x)

# value(r, path): r's planned attribute at path, null when it is unset (or known only after
# apply: check unknown first).
value(r, path) := object.get(r.values, path, null)

# set(r, path): r's planned attribute at path has a value: neither absent, nor null (a plan
# carries unset optional attributes as null), nor empty.
set(r, path) if not value(r, path) in {null, "", [], {}}

# referenced(r, path): the resources of the plan that the expression of r's attribute at path
# refers to in the configuration, within r's module instance. It links resources whose IDs the
# plan knows only after apply (a mapping's queue ARN, a subscription's topic ID).
referenced(r, path) := {x |
	some ref in config_references(r, path)
	some x in resources
	x.address == concat("", [module_prefix(r.module), ref])
}

# unconfigured(r, attr): r's configuration, which the plan shows, sets no value for attr (so an
# optional attribute the provider computes holds what other resources of the plan give it).
# A resource whose configuration the plan does not show is never unconfigured.
unconfigured(r, attr) if {
	c := config_of(r) # no configuration: never unconfigured
	not attr in object.keys(object.get(c, "expressions", {}))
}

config_references(r, path) := object.get(config_of(r), array.concat(array.concat(["expressions"], path), ["references"]), [])

# config_of(r): r's resource in its module's configuration.
config_of(r) := c if {
	some c in object.get(input, config_path(r.module), [])
	c.address == config_address(r)
}

module_prefix(m) := "" if m == ""

module_prefix(m) := concat("", [m, "."]) if m != ""

# The module calls' names in a module instance's address: module.a["x"].module.b[0] -> [a, b].
module_names(m) := [match[1] | some match in regex.find_all_string_submatch_n(`module\.([A-Za-z0-9_-]+)(\["[^"]*"\]|\[[0-9]+\])?`, m, -1)]

config_path(m) := array.concat(
	array.concat(["configuration", "root_module"], [step | some name in module_names(m); some step in ["module_calls", name, "module"]]),
	["resources"],
)

# A resource's address in its module's configuration: without the module and the instance key.
config_address(r) := regex.replace(trim_prefix(r.address, module_prefix(r.module)), `\[[^\]]*\]$`, "")

# covers(x, b): x (a public access block, an encryption configuration) applies to bucket b: by
# the bucket name the plan shows, or, when that is known only after apply, by the configuration's
# reference to b.
covers(x, b) if {
	not unknown(x, ["bucket"])
	is_string(value(x, ["bucket"]))
	value(x, ["bucket"]) == value(b, ["bucket"])
}

covers(x, b) if {
	unknown(x, ["bucket"])
	b.address in {y.address | some y in referenced(x, ["bucket"])}
}
