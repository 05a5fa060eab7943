# State is encrypted at rest and backed up.
package ssfkit.encryption

import data.ssfkit.lib

deny contains msg if {
	some r in lib.resources_of("aws_dynamodb_table")
	not pitr_on(r.values)
	msg := sprintf("%s: point-in-time recovery must be on (the SSF's state has no other backup)", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("aws_dynamodb_table")
	not sse_on(r.values)
	msg := sprintf("%s: server-side encryption must be on", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("aws_sqs_queue")
	not r.values.sqs_managed_sse_enabled == true
	not lib.set(r, ["kms_master_key_id"])
	not lib.unknown(r, ["kms_master_key_id"])
	msg := sprintf("%s: the queue must be encrypted (sqs_managed_sse_enabled or kms_master_key_id)", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("google_firestore_database")
	r.values.point_in_time_recovery_enablement != "POINT_IN_TIME_RECOVERY_ENABLED"
	msg := sprintf("%s: point-in-time recovery must be on", [r.address])
}

# Bigtable has no point-in-time recovery; its automated backups are what restores a table (a
# table created without the policy has none).
deny contains msg if {
	some r in lib.resources_of("google_bigtable_table")
	not bigtable_backups_on(r.values)
	msg := sprintf("%s: automated backups must be on (automated_backup_policy with a retention_period other than 0)", [r.address])
}

bigtable_backups_on(v) if {
	some b in v.automated_backup_policy
	not b.retention_period in {"0", "", null}
}

# Azure storage: encrypted at rest always; the rules keep data in transit encrypted too.
deny contains msg if {
	some r in lib.resources_of("azurerm_storage_account")
	r.values.https_traffic_only_enabled == false
	msg := sprintf("%s: https_traffic_only_enabled must be true", [r.address])
}

deny contains msg if {
	some r in lib.resources_of("azurerm_storage_account")
	not r.values.min_tls_version in {"TLS1_2", "TLS1_3"}
	msg := sprintf("%s: min_tls_version is %v; TLS 1.2 or later is required", [r.address, r.values.min_tls_version])
}

# AWS: a bucket has an explicit default encryption of the plan (SSE-S3 or SSE-KMS).
deny contains msg if {
	some b in lib.resources_of("aws_s3_bucket")
	not bucket_encrypted(b)
	msg := sprintf("%s: no aws_s3_bucket_server_side_encryption_configuration of the plan sets bucket %v's default encryption (AES256 or aws:kms)", [b.address, object.get(b.values, "bucket", "?")])
}

bucket_encrypted(b) if {
	some e in lib.resources_of("aws_s3_bucket_server_side_encryption_configuration")
	lib.covers(e, b)
	some rule in e.values.rule
	some d in rule.apply_server_side_encryption_by_default
	d.sse_algorithm in {"AES256", "aws:kms", "aws:kms:dsse"}
}

pitr_on(v) if {
	some p in v.point_in_time_recovery
	p.enabled == true
}

sse_on(v) if {
	some s in v.server_side_encryption
	s.enabled == true
}
