output "name" {
  description = "The coordination service's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL of the coordination table (firestore://PROJECT/coord?database=DB): SSFKIT_COORD_STORE."
  value       = local.store_url
}

output "queue_url" {
  description = "The queue URL of the requests (pubsub://PROJECT/TOPIC?subscription=SUB): SSFKIT_COORD_QUEUE."
  value       = local.queue_url
}

output "dead_letter_queue_url" {
  description = "The queue URL of the requests' dead-letter topic and its subscription."
  value       = local.dead_letter_url
}

output "blobs_url" {
  description = "The bucket of large entries and snapshots, as gocloud.dev opens it (gs://BUCKET): SSFKIT_COORD_BLOBS."
  value       = local.blobs_url
}

output "writer_function_name" {
  description = "The writer's Cloud Run service, pushed to by the request subscription."
  value       = google_cloud_run_v2_service.this["writer"].name
}

output "heartbeat_function_name" {
  description = "The heartbeat's Cloud Run service, run by Cloud Scheduler."
  value       = google_cloud_run_v2_service.this["heartbeat"].name
}

output "identity" {
  description = "The writer's identity: the service account (email) its service runs as."
  value       = local.identities.writer.email
  depends_on  = [google_service_account.this]
}

output "client_identity" {
  description = "What a `ssfkit coord proxy` runs as: the service account (email) whose grants it needs (run the application as it, or impersonate it)."
  value       = local.identities.client.email
  depends_on  = [google_service_account.this]
}

output "table_id" {
  description = "The Firestore database (projects/P/databases/DB)."
  value       = google_firestore_database.this.id
}

output "queue_id" {
  description = "The request topic (projects/P/topics/T)."
  value       = google_pubsub_topic.this.id
}

output "bucket_id" {
  description = "The bucket's name."
  value       = google_storage_bucket.this.name
}

output "coord_config" {
  description = "What `ssfkit coord proxy` needs (the store, queue, blobs and dead-letter queue URLs and the environment's name) and the writer's and heartbeat's function IDs (which `ssfkit up` syncs the triggers of on Azure)."
  value = {
    environment       = local.env.name
    store             = local.store_url
    queue             = local.queue_url
    blobs             = local.blobs_url
    dead_letter_queue = local.dead_letter_url
    function_ids      = [for role in ["writer", "heartbeat"] : google_cloud_run_v2_service.this[role].id]
  }
}
