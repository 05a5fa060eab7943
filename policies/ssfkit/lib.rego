# Helpers shared by the ssfkit policies, over `terraform show -json` of a plan.
package ssfkit.lib

# Resources the plan creates, updates or keeps (not those it deletes), with their planned values
# and the module instance that declares them ("" for the root module): one ssf module instance
# is one SSF.
resources contains r if {
	some rc in input.resource_changes
	not "delete" in rc.change.actions
	r := {
		"address": rc.address, "type": rc.type, "module": object.get(rc, "module_address", ""),
		"values": object.get(rc.change, "after", {}), "unknown": object.get(rc.change, "after_unknown", {}),
	}
}

resources_of(t) := {r | some r in resources; r.type == t}
