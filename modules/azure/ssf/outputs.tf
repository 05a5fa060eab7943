output "name" {
  description = "The SSF's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL the ssfkit runtime opens for this SSF: aztables://state?endpoint=https://ACCOUNT.table.core.windows.net (Entra ID)."
  value       = local.store_url
}

output "queue_url" {
  description = "The queue URL of the SSF's asynchronous starts: azqueue://starts?endpoint=https://ACCOUNT.queue.core.windows.net."
  value       = local.queue_url
}

output "dead_letter_queue_url" {
  description = "The queue URL of the poison queue, where the queue trigger moves a start after max_receive_count deliveries."
  value       = local.dead_letter_url
}

output "function_name" {
  description = "The SSF's function app (the collectors are functions of the same app)."
  value       = local.app_name
  depends_on  = [azurerm_resource_group_template_deployment.app]
}

output "function_id" {
  description = "The function app's resource ID."
  value       = local.function_id
  depends_on  = [azurerm_resource_group_template_deployment.app]
}

output "collector_function_names" {
  description = "The intent and garbage collectors: timer-triggered functions of the SSF's function app, named APP/FUNCTION as Resource Manager names them (Microsoft.Web/sites/functions)."
  value = {
    intent_collector  = "${local.app_name}/intent-collector"
    garbage_collector = "${local.app_name}/garbage-collector"
  }
}

output "identity" {
  description = "The SSF's identity: the resource ID of the user-assigned identity its function app runs as."
  value       = local.identity.id
}

output "table_id" {
  description = "The SSF's table (resource ID)."
  value       = local.table_id
  depends_on  = [azurerm_resource_group_template_deployment.table]
}

output "queue_id" {
  description = "The SSF's queue of asynchronous starts (resource ID)."
  value       = azurerm_storage_queue.this["starts"].id
}

output "delivery_window_seconds" {
  description = "The longest time after a start is sent at which the queue trigger may still deliver it: the messages' time-to-live (SSFKIT_QUEUE_MESSAGE_TTL_SECONDS, which the runtime sets on each start), and max_receive_count deliveries each held the function timeout plus the retry delay. gc_bound_seconds must exceed it."
  value       = local.delivery_window_seconds
}

output "ssfkit_config" {
  description = "The SSF's entry in an ssfkit config file (`ssfkit up` writes it): the runtime's settings as the function receives them."
  value = {
    name                   = var.name
    store                  = local.store_url
    queue                  = local.queue_url
    dead_letter_queue      = local.dead_letter_url
    lifetime_seconds       = var.function_timeout_seconds - 1
    gc_bound_seconds       = var.gc_bound_seconds
    relaunch_delay_seconds = var.relaunch_delay_seconds
    function_id            = local.function_id
  }
  # The app exists when the config is read (`ssfkit up` syncs its triggers).
  depends_on = [azurerm_resource_group_template_deployment.app]
}
