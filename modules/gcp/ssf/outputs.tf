output "name" {
  description = "The SSF's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL the ssfkit runtime opens for this SSF (firestore://PROJECT/state?database=DB)."
  value       = local.store_url
}

output "queue_url" {
  description = "The queue URL of the SSF's asynchronous starts (pubsub://PROJECT/TOPIC?subscription=SUB)."
  value       = local.queue_url
}

output "dead_letter_queue_url" {
  description = "The queue URL of the dead-letter topic and its subscription."
  value       = local.dead_letter_queue_url
}

output "function_name" {
  description = "The SSF's Cloud Run service."
  value       = google_cloud_run_v2_service.this.name
}

output "function_id" {
  description = "The SSF's Cloud Run service (projects/P/locations/R/services/S)."
  value       = google_cloud_run_v2_service.this.id
}

output "collector_function_names" {
  description = "The intent and garbage collectors: on Google Cloud they are routes of the SSF's service, run by these Cloud Scheduler jobs."
  value = {
    intent_collector  = google_cloud_scheduler_job.collector["intent_collector"].name
    garbage_collector = google_cloud_scheduler_job.collector["garbage_collector"].name
  }
}

output "identity" {
  description = "The SSF's identity: the service account (email) its service runs as, created by the environment."
  value       = local.identity.email
}

output "table_id" {
  description = "The SSF's Firestore database (projects/P/databases/DB) or Bigtable table (projects/P/instances/I/tables/T)."
  value       = local.on_bigtable ? google_bigtable_table.state[0].id : google_firestore_database.this[0].id
}

output "queue_id" {
  description = "The SSF's Pub/Sub topic (projects/P/topics/T)."
  value       = google_pubsub_topic.this.id
}

output "delivery_window_seconds" {
  description = "The longest time after a start is published at which Pub/Sub may still push it to the SSF: the subscription's retention + the push's hold (the function timeout, at least the ack deadline), and max_receive_count pushes with the longest backoff between them. gc_bound_seconds must exceed it."
  value       = local.delivery_window_seconds
}

output "ssfkit_config" {
  description = "The SSF's entry in an ssfkit config file (`ssfkit up` writes it): the runtime's settings as the function receives them."
  value = {
    name                   = var.name
    store                  = local.store_url
    queue                  = local.queue_url
    dead_letter_queue      = local.dead_letter_queue_url
    lifetime_seconds       = var.function_timeout_seconds - 1
    gc_bound_seconds       = var.gc_bound_seconds
    relaunch_delay_seconds = var.relaunch_delay_seconds
    function_id            = google_cloud_run_v2_service.this.id
  }
}
