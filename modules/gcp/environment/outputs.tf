output "context" {
  description = "What every SSF module of the environment takes as its `environment` variable."
  value = {
    name           = var.name
    project        = var.project
    project_number = local.project_number
    region         = var.region
    encryption_key = var.encryption_key
    tags           = local.tags
    identities     = local.identities
    scheduler      = local.scheduler
    services       = local.services
    bigtable = var.bigtable == null ? null : {
      instance = google_bigtable_instance.state[0].name
      cluster  = local.bigtable_cluster
    }
  }

  # The SSFs' resources use the service accounts, the key and the instance: they wait for them.
  depends_on = [google_service_account.ssf, google_service_account.scheduler, google_kms_crypto_key_iam_member.service_agents, google_bigtable_instance.state]
}

output "name" {
  description = "The environment's name."
  value       = var.name
}

output "project" {
  description = "The project the environment lives in."
  value       = var.project
}

output "region" {
  description = "The region the environment lives in."
  value       = var.region
}

output "identities" {
  description = "Each SSF's service account: SSF name to its email, IAM member (serviceAccount:EMAIL) and resource ID."
  value       = local.identities
  depends_on  = [google_service_account.ssf]
}

output "scheduler" {
  description = "Cloud Scheduler's service account for the SSFs' collector jobs: its email, IAM member and resource ID."
  value       = local.scheduler
  depends_on  = [google_service_account.scheduler]
}

output "services" {
  description = "Each SSF's Cloud Run service: SSF name to its service name and deterministic URL (what peers and `ssfkit invoke` call)."
  value       = local.services
}

output "provenance_sink" {
  description = "The provenance bucket's sink URL (null with provenance_retention_days = 0): pass it to each SSF module as provenance_sink."
  value       = local.provenance ? "gs://${google_storage_bucket.provenance[0].name}?prefix=${local.provenance_prefix}" : null
}
