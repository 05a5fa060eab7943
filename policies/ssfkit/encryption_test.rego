package ssfkit.encryption_test

import data.ssfkit.encryption
import data.ssfkit.plans

test_table_with_backups_and_encryption_passes if count(encryption.deny) == 0 with input as plans.plan([plans.table("aws_dynamodb_table.this", true, true)])

test_table_without_backups_denied if count(encryption.deny) == 1 with input as plans.plan([plans.table("aws_dynamodb_table.this", false, true)])

test_table_without_encryption_denied if count(encryption.deny) == 1 with input as plans.plan([plans.table("aws_dynamodb_table.this", true, false)])

queue(after) := plans.plan([plans.create("aws_sqs_queue.this", "aws_sqs_queue", after)])

test_queue_encrypted_passes if count(encryption.deny) == 0 with input as queue({"sqs_managed_sse_enabled": true})

test_queue_with_key_passes if count(encryption.deny) == 0 with input as queue({"sqs_managed_sse_enabled": false, "kms_master_key_id": "arn:aws:kms:us-east-1:1:key/k"})

test_queue_unencrypted_denied if count(encryption.deny) == 1 with input as queue({"sqs_managed_sse_enabled": false})

firestore(pitr) := plans.plan([plans.create("google_firestore_database.ssf", "google_firestore_database", {"point_in_time_recovery_enablement": pitr})])

test_firestore_pitr_passes if count(encryption.deny) == 0 with input as firestore("POINT_IN_TIME_RECOVERY_ENABLED")

test_firestore_without_pitr_denied if count(encryption.deny) == 1 with input as firestore("POINT_IN_TIME_RECOVERY_DISABLED")

bigtable(after) := plans.plan([plans.create("google_bigtable_table.state", "google_bigtable_table", after)])

test_bigtable_backed_up_passes if count(encryption.deny) == 0 with input as bigtable({"automated_backup_policy": [{"retention_period": "168h", "frequency": "24h"}]})

test_bigtable_backups_off_denied if count(encryption.deny) == 1 with input as bigtable({"automated_backup_policy": [{"retention_period": "0", "frequency": "0"}]})

test_bigtable_without_backup_policy_denied if count(encryption.deny) == 1 with input as bigtable({})

storage_account(https, tls) := plans.plan([plans.create("azurerm_storage_account.this", "azurerm_storage_account", {"https_traffic_only_enabled": https, "min_tls_version": tls})])

test_storage_account_https_tls12_passes if count(encryption.deny) == 0 with input as storage_account(true, "TLS1_2")

test_storage_account_plain_http_denied if count(encryption.deny) == 1 with input as storage_account(false, "TLS1_2")

test_storage_account_old_tls_denied if count(encryption.deny) == 1 with input as storage_account(true, "TLS1_0")

# A real plan carries an unset key as null: that is no key.
test_queue_with_null_key_denied if count(encryption.deny) == 1 with input as queue({"sqs_managed_sse_enabled": false, "kms_master_key_id": null})

test_queue_with_empty_key_denied if count(encryption.deny) == 1 with input as queue({"sqs_managed_sse_enabled": null, "kms_master_key_id": ""})

# A replacement creates what will run: it is checked like a creation.
test_replaced_queue_unencrypted_denied if {
	change := object.union(plans.create("aws_sqs_queue.this", "aws_sqs_queue", {"sqs_managed_sse_enabled": false}), {"change": {"actions": ["delete", "create"], "after": {"sqs_managed_sse_enabled": false}, "after_unknown": {}}})
	count(encryption.deny) == 1 with input as plans.plan([change])
}

test_deleted_queue_not_checked if {
	change := {"address": "aws_sqs_queue.old", "type": "aws_sqs_queue", "change": {"actions": ["delete"], "after": null, "after_unknown": {}}}
	count(encryption.deny) == 0 with input as plans.plan([change])
}

s3_bucket := plans.create("aws_s3_bucket.b", "aws_s3_bucket", {"bucket": "bank-zk-coord-123456789012"})

sse(algorithm) := plans.create("aws_s3_bucket_server_side_encryption_configuration.b", "aws_s3_bucket_server_side_encryption_configuration", {"bucket": "bank-zk-coord-123456789012", "rule": [{"apply_server_side_encryption_by_default": [{"sse_algorithm": algorithm}]}]})

test_encrypted_bucket_passes if count(encryption.deny) == 0 with input as plans.plan([s3_bucket, sse("aws:kms")])

test_bucket_without_encryption_denied if count(encryption.deny) == 1 with input as plans.plan([s3_bucket])

test_bucket_encryption_unknown_denied if {
	count(encryption.deny) == 1 with input as plans.plan([s3_bucket, plans.unknown_after_apply(sse(null), ["rule"])])
}
