# terraform test for the coordination module, against a mocked azurerm provider: validations,
# and a plan and an apply whose assertions check the URLs and settings of both function apps,
# the storage account's security, the role assignments (each identity on exactly what it needs),
# the timer and the dead-lettering, and the deletion protection. The mocks give ARM-shaped IDs
# and endpoints to what Azure would compute. go test ./tests/terraform builds the artifact
# (tests/testdata/artifact.zip) and runs it.

mock_provider "azurerm" {
  mock_resource "azurerm_storage_account" {
    defaults = {
      id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestzkcoord12345678"
      primary_blob_endpoint  = "https://tftestzkcoord12345678.blob.core.windows.net/"
      primary_queue_endpoint = "https://tftestzkcoord12345678.queue.core.windows.net/"
      primary_table_endpoint = "https://tftestzkcoord12345678.table.core.windows.net/"
    }
  }

  mock_data "azurerm_client_config" {
    defaults = {
      object_id       = "99999999-9999-4999-8999-999999999999"
      subscription_id = "00000000-0000-0000-0000-000000000000"
      tenant_id       = "88888888-8888-4888-8888-888888888888"
    }
  }
}

variables {
  name     = "zk"
  artifact = "tests/testdata/artifact.zip"

  # What the environment module's context output looks like (an environment without SSFs).
  environment = {
    name                            = "tftest"
    location                        = "westeurope"
    resource_group_name             = "ssfkit-tftest"
    resource_group_id               = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest"
    encryption_key                  = null
    tags                            = { "ssfkit-environment" = "tftest" }
    identities                      = {}
    peer_invoker_role_definition_id = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/6f1c2f3e-0000-5000-8000-000000000000"
  }
  deletion_protection = false
}

run "rejects_names_with_underscores" {
  command = plan

  variables {
    name = "my_zk"
  }

  expect_failures = [var.name]
}

run "rejects_heartbeats_that_ncrontab_cannot_space" {
  command = plan

  variables {
    heartbeat_every_minutes = 90
  }

  expect_failures = [var.heartbeat_every_minutes]
}

run "plans_scopes_and_roles" {
  command = plan

  # Every identity on exactly its own: the writer consumes the requests, the clients only send
  # them and read the blobs; every scope is in the service's own account.
  assert {
    condition = {
      for k, a in azurerm_role_assignment.own : k => "${a.role_definition_name} ${trimprefix(a.scope, "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/${azurerm_storage_account.this.name}")}"
      } == {
      writer_table    = "Storage Table Data Contributor /tableServices/default/tables/coord"
      writer_requests = "Storage Queue Data Contributor /queueServices/default/queues/requests"
      writer_poison   = "Storage Queue Data Contributor /queueServices/default/queues/requests-poison"
      writer_host     = "Storage Blob Data Owner "
      heartbeat_table = "Storage Table Data Contributor /tableServices/default/tables/coord"
      heartbeat_host  = "Storage Blob Data Owner "
      client_table    = "Storage Table Data Contributor /tableServices/default/tables/coord"
      client_requests = "Storage Queue Data Message Sender /queueServices/default/queues/requests"
      client_blobs    = "Storage Blob Data Reader /blobServices/default/containers/blobs"
    }
    error_message = "the role assignments are not the least each identity needs"
  }

  assert {
    condition     = alltrue([for k, a in azurerm_role_assignment.own_keys : a.scope == "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/sites/${azurerm_service_plan.this[k].name}" && a.role_definition_id == var.environment.peer_invoker_role_definition_id])
    error_message = "each app's identity reads its own app's keys only"
  }

  assert {
    condition     = !azurerm_storage_account.this.shared_access_key_enabled && !azurerm_storage_account.this.allow_nested_items_to_be_public && azurerm_storage_account.this.min_tls_version == "TLS1_2" && azurerm_storage_container.blobs.container_access_type == "private"
    error_message = "the storage must be reachable with Entra ID only, over TLS 1.2, with private containers"
  }

  assert {
    condition     = length(regexall("^tftestzkcoord[0-9a-f]{8}$", azurerm_storage_account.this.name)) == 1 && azurerm_service_plan.this["writer"].name != azurerm_service_plan.this["heartbeat"].name
    error_message = "names: account ${azurerm_storage_account.this.name}, apps ${jsonencode({ for k, p in azurerm_service_plan.this : k => p.name })}"
  }
}

run "applies" {
  assert {
    condition     = output.store_url == "aztables://coord?endpoint=https://tftestzkcoord12345678.table.core.windows.net" && output.queue_url == "azqueue://requests?endpoint=https://tftestzkcoord12345678.queue.core.windows.net"
    error_message = "store ${output.store_url}, queue ${output.queue_url}"
  }

  assert {
    condition     = output.dead_letter_queue_url == "azqueue://requests-poison?endpoint=https://tftestzkcoord12345678.queue.core.windows.net" && startswith(output.blobs_url, "azblob://blobs?storage_account=tftestzkcoord")
    error_message = "dead letters ${output.dead_letter_queue_url}, blobs ${output.blobs_url}"
  }

  assert {
    condition     = keys(output.coord_config) == ["blobs", "dead_letter_queue", "environment", "function_ids", "queue", "store"] && output.coord_config.environment == "tftest" && length(output.coord_config.function_ids) == 2
    error_message = "coord_config is ${jsonencode(output.coord_config)}"
  }

  # Each app: its role, the service's URLs, its own identity, the other role's function
  # disabled, the writer's queue trigger, the heartbeat's timer, dead-lettering after
  # max_receive_count deliveries.
  assert {
    condition = alltrue([for k, d in azurerm_resource_group_template_deployment.app : alltrue([
      for want in [
        "SSFKIT_COORD_ROLE=${k}", "SSFKIT_ENVIRONMENT=tftest", "SSFKIT_COORD_STORE=${output.store_url}", "SSFKIT_COORD_QUEUE=${output.queue_url}",
        "SSFKIT_COORD_BLOBS=${output.blobs_url}", "SSFKIT_COORD_SNAPSHOT_EVERY=10000", "AZURE_STORAGE_ACCOUNT=${azurerm_storage_account.this.name}",
        "AZURE_CLIENT_ID=${azurerm_user_assigned_identity.this[k].client_id}", "SSFKIT_AZURE_SITE=/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/sites/${azurerm_service_plan.this[k].name}",
        "AzureWebJobs.${k == "writer" ? "heartbeat" : "queue"}.Disabled=true", "SSFKIT_QUEUE_NAME=requests", "SSFKIT_HEARTBEAT_SCHEDULE=0 */1 * * * *",
        "AzureFunctionsJobHost__extensions__queues__maxDequeueCount=5", "AzureFunctionsJobHost__functionTimeout=00:01:00",
      ] : contains([for s in jsondecode(d.template_content).resources[0].properties.siteConfig.appSettings : "${s.name}=${s.value}"], want)
    ])])
    error_message = "the apps' settings are wrong"
  }

  assert {
    condition     = alltrue([for k, d in azurerm_resource_group_template_deployment.app : keys(jsondecode(d.template_content).resources[0].identity.userAssignedIdentities) == [azurerm_user_assigned_identity.this[k].id]])
    error_message = "each app must run as its own identity"
  }

  assert {
    condition     = output.identity == azurerm_user_assigned_identity.this["writer"].id && output.client_identity == azurerm_user_assigned_identity.this["client"].id && output.writer_function_name == azurerm_service_plan.this["writer"].name && output.heartbeat_function_name == azurerm_service_plan.this["heartbeat"].name
    error_message = "the outputs must name the writer's and the clients' identities and both apps"
  }

  assert {
    condition     = length(azurerm_management_lock.state) == 0 && !terraform_data.deletion_guard.output.protected
    error_message = "a throwaway service has no lock"
  }
}

run "protected_by_default" {
  command = plan

  variables {
    deletion_protection = true
  }

  assert {
    condition     = length(azurerm_management_lock.state) == 1 && azurerm_management_lock.state[0].lock_level == "CanNotDelete"
    error_message = "the state must be locked by default"
  }
}
