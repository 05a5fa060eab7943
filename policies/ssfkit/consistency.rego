# Strong consistency: the runtime's conditional writes and its reads of the linked DAAL's tail
# assume a strongly consistent store (docs/stores/).
package ssfkit.consistency

import data.ssfkit.lib

# Cosmos DB (Table API): only Strong consistency makes a read see the last conditional write.
deny contains msg if {
	some r in lib.resources_of("azurerm_cosmosdb_account")
	some p in r.values.consistency_policy
	p.consistency_level != "Strong"
	msg := sprintf("%s: consistency_level is %s; ssfkit needs Strong (a read must see the last conditional write)", [r.address, p.consistency_level])
}

# Bigtable: an app profile with multi-cluster routing reads replicas eventually; the driver
# refuses it, and the plan should not create it.
deny contains msg if {
	some r in lib.resources_of("google_bigtable_app_profile")
	r.values.multi_cluster_routing_use_any == true
	msg := sprintf("%s: multi-cluster routing is eventually consistent; ssfkit needs single_cluster_routing", [r.address])
}

# DynamoDB: reads in the driver are strongly consistent, but a global table's replicas resolve
# concurrent writes from different regions last-writer-wins, which breaks conditional writes.
deny contains msg if {
	some r in lib.resources_of("aws_dynamodb_table")
	count(object.get(r.values, "replica", [])) > 0
	msg := sprintf("%s: a global table (replica) resolves writes from different regions last-writer-wins; ssfkit's conditional writes need one region", [r.address])
}

# The same, with the replica declared as its own resource.
deny contains msg if {
	some r in lib.resources_of("aws_dynamodb_table_replica")
	msg := sprintf("%s: a global table replica resolves writes from different regions last-writer-wins; ssfkit's conditional writes need one region", [r.address])
}

# Cosmos DB without a consistency policy the plan shows cannot be proved Strong.
deny contains msg if {
	some r in lib.resources_of("azurerm_cosmosdb_account")
	count(object.get(r.values, "consistency_policy", [])) == 0
	not lib.unknown(r, ["consistency_policy"])
	msg := sprintf("%s: no consistency_policy; ssfkit needs Strong (a read must see the last conditional write)", [r.address])
}
