output "name" {
  description = "The environment's name: pass it to each SSF module as `environment`."
  value       = var.name
}

output "encryption_key" {
  description = "The key the SSFs encrypt with (null with customer_managed_key = false): pass it to each SSF module."
  value       = var.customer_managed_key ? aws_kms_key.this[0].arn : null
}

output "encryption_key_alias" {
  description = "The key's alias (null with customer_managed_key = false): pass it to each SSF module, whose policy then reaches the key through it."
  value       = var.customer_managed_key ? aws_kms_alias.this[0].name : null
}

output "tags" {
  description = "The tags every SSF of the environment should carry: pass them to each SSF module."
  value       = local.tags
}

output "region" {
  description = "The region the environment lives in."
  value       = data.aws_region.current.name
}

output "provenance_sink" {
  description = "The provenance bucket's sink URL (null with provenance_retention_days = 0): pass it to each SSF module as provenance_sink."
  value       = local.provenance ? "s3://${aws_s3_bucket.provenance[0].bucket}?region=${data.aws_region.current.name}&prefix=${local.provenance_prefix}" : null
}
