package ssfkit.consistency_test

import data.ssfkit.consistency
import data.ssfkit.plans

cosmos(level) := plans.plan([plans.create("azurerm_cosmosdb_account.state", "azurerm_cosmosdb_account", {"consistency_policy": [{"consistency_level": level}]})])

test_cosmos_strong_passes if count(consistency.deny) == 0 with input as cosmos("Strong")

test_cosmos_session_denied if count(consistency.deny) == 1 with input as cosmos("Session")

bigtable(multi) := plans.plan([plans.create("google_bigtable_app_profile.ssf", "google_bigtable_app_profile", {"multi_cluster_routing_use_any": multi, "single_cluster_routing": []})])

test_bigtable_single_cluster_passes if count(consistency.deny) == 0 with input as bigtable(false)

test_bigtable_multi_cluster_denied if count(consistency.deny) == 1 with input as bigtable(true)

test_dynamodb_one_region_passes if count(consistency.deny) == 0 with input as plans.plan([plans.table("aws_dynamodb_table.this", true, true)])

test_dynamodb_global_table_denied if {
	t := plans.table("aws_dynamodb_table.this", true, true)
	global := object.union(t, {"change": object.union(t.change, {"after": object.union(t.change.after, {"replica": [{"region_name": "eu-west-1"}]})})})
	count(consistency.deny) == 1 with input as plans.plan([global])
}

test_replica_resource_denied if {
	count(consistency.deny) == 1 with input as plans.plan([plans.create("aws_dynamodb_table_replica.eu", "aws_dynamodb_table_replica", {"global_table_arn": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"})])
}

test_cosmos_without_policy_denied if {
	count(consistency.deny) == 1 with input as plans.plan([plans.create("azurerm_cosmosdb_account.a", "azurerm_cosmosdb_account", {"consistency_policy": []})])
}
