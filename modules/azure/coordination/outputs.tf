output "name" {
  description = "The coordination service's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL of the coordination table (aztables://coord?endpoint=https://ACCOUNT.table.core.windows.net): SSFKIT_COORD_STORE."
  value       = local.store_url
}

output "queue_url" {
  description = "The queue URL of the requests (azqueue://requests?endpoint=...): SSFKIT_COORD_QUEUE."
  value       = local.queue_url
}

output "dead_letter_queue_url" {
  description = "The queue URL of the poison queue the queue trigger moves failing requests to."
  value       = local.dead_letter_url
}

output "blobs_url" {
  description = "The container of large entries and snapshots, as gocloud.dev opens it (azblob://blobs?storage_account=ACCOUNT; the functions also get AZURE_STORAGE_ACCOUNT): SSFKIT_COORD_BLOBS."
  value       = local.blobs_url
}

output "writer_function_name" {
  description = "The writer's function app, fed by the queue trigger."
  value       = local.app_names["writer"]
  depends_on  = [azurerm_resource_group_template_deployment.app]
}

output "heartbeat_function_name" {
  description = "The heartbeat's function app, run by its timer."
  value       = local.app_names["heartbeat"]
  depends_on  = [azurerm_resource_group_template_deployment.app]
}

output "identity" {
  description = "The writer's identity: its user-assigned identity (resource ID)."
  value       = azurerm_user_assigned_identity.this["writer"].id
}

output "client_identity" {
  description = "What a `ssfkit coord proxy` runs as: the clients' user-assigned identity (resource ID; assign it to the application and set AZURE_CLIENT_ID to its client ID)."
  value       = azurerm_user_assigned_identity.this["client"].id
}

output "table_id" {
  description = "The table (its Resource Manager ID)."
  value       = local.table_id
  depends_on  = [azurerm_resource_group_template_deployment.table]
}

output "queue_id" {
  description = "The request queue (its Resource Manager ID)."
  value       = local.queue_ids.requests
  depends_on  = [azurerm_storage_queue.this]
}

output "bucket_id" {
  description = "The blobs' container (its Resource Manager ID)."
  value       = local.container_id
  depends_on  = [azurerm_storage_container.blobs]
}

output "coord_config" {
  description = "What `ssfkit coord proxy` needs (the store, queue, blobs and dead-letter queue URLs and the environment's name) and the writer's and heartbeat's function IDs (which `ssfkit up` syncs the triggers of on Azure)."
  value = {
    environment       = local.env.name
    store             = local.store_url
    queue             = local.queue_url
    blobs             = local.blobs_url
    dead_letter_queue = local.dead_letter_url
    function_ids      = [for role in ["writer", "heartbeat"] : local.function_ids[role]]
  }
  # The apps exist when the config is read (`ssfkit up` syncs their triggers).
  depends_on = [azurerm_resource_group_template_deployment.app]
}
