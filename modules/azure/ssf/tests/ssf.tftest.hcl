# terraform test for the ssf module, against a mocked azurerm provider: the validations, and
# plans and applies whose assertions check the runtime's URLs and settings, the storage
# account's security, the role assignments' scopes (this SSF's own table, queues and account;
# the invoker role on this app for its peers only), the timers, the dead-lettering and the
# deletion protection. The mocks give ARM-shaped IDs and endpoints to what Azure would compute.

mock_provider "azurerm" {
  mock_resource "azurerm_storage_account" {
    defaults = {
      id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestcounter58511336"
      primary_blob_endpoint  = "https://tftestcounter58511336.blob.core.windows.net/"
      primary_queue_endpoint = "https://tftestcounter58511336.queue.core.windows.net/"
      primary_table_endpoint = "https://tftestcounter58511336.table.core.windows.net/"
    }
  }

  mock_resource "azurerm_storage_container" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestcounter58511336/blobServices/default/containers/deployment"
    }
  }

  mock_resource "azurerm_service_plan" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/serverFarms/tftest-counter-585113"
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

# Each queue gets its own ID, as in Azure.
override_resource {
  target = azurerm_storage_queue.this["starts"]
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestcounter58511336/queueServices/default/queues/starts"
  }
}

override_resource {
  target = azurerm_storage_queue.this["poison"]
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestcounter58511336/queueServices/default/queues/starts-poison"
  }
}

variables {
  name     = "counter"
  artifact = "tests/testdata/artifact.zip"

  # What the environment module's context output looks like.
  environment = {
    name                = "tftest"
    location            = "westeurope"
    resource_group_name = "ssfkit-tftest"
    resource_group_id   = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest"
    encryption_key      = null
    tags                = { "ssfkit-environment" = "tftest" }
    identities = {
      counter = {
        id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-counter"
        principal_id = "11111111-1111-4111-8111-111111111111"
        client_id    = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
      }
      caller = {
        id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-caller"
        principal_id = "22222222-2222-4222-8222-222222222222"
        client_id    = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
      }
      other = {
        id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-other"
        principal_id = "33333333-3333-4333-8333-333333333333"
        client_id    = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
      }
    }
    peer_invoker_role_definition_id = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/44444444-4444-4444-8444-444444444444"
  }
}

run "rejects_gc_bound_within_function_timeout" {
  command = plan

  variables {
    function_timeout_seconds = 120
    gc_bound_seconds         = 120
  }

  expect_failures = [var.gc_bound_seconds]
}

# The delivery window (the messages' time-to-live, max_receive_count deliveries each held the
# function timeout plus the retry delay) must stay below T: 450 s at the defaults.
run "accepts_gc_bound_just_above_the_delivery_window" {
  command = plan

  variables {
    gc_bound_seconds = 451
  }

  assert {
    condition     = output.delivery_window_seconds == 450
    error_message = "the default delivery window is ${output.delivery_window_seconds} s, want 450 (5 x (60 s + 30 s))"
  }
}

run "rejects_gc_bound_at_the_delivery_window" {
  command = plan

  variables {
    gc_bound_seconds = 450
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_receive_counts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    max_receive_count = 10 # 10 x (60 s + 30 s)
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_timeouts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    function_timeout_seconds = 150 # 5 x (150 s + 30 s)
    relaunch_delay_seconds   = 150
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_names_the_runtime_refuses" {
  command = plan

  variables {
    name = "my-ssf"
    # The environment has an identity of that name, so only the name's own rule fails.
    environment = merge(var.environment, { identities = merge(var.environment.identities, { "my-ssf" = var.environment.identities.counter }) })
  }

  expect_failures = [var.name]
}

run "rejects_unknown_storage_replication" {
  command = plan

  variables {
    storage_replication = "PREMIUM"
  }

  expect_failures = [var.storage_replication]
}

run "rejects_ssfs_the_environment_does_not_know" {
  command = plan

  variables {
    name = "ghost"
  }

  expect_failures = [var.environment]
}

run "rejects_reserved_environment_variables" {
  command = plan

  variables {
    environment_variables = { SSFKIT_STORE = "mem://" }
  }

  expect_failures = [var.environment_variables]
}

run "rejects_peers_outside_the_environment" {
  command = plan

  variables {
    peers = ["caller", "stranger"]
  }

  expect_failures = [var.peers]
}

run "rejects_memory_flex_consumption_cannot_give" {
  command = plan

  variables {
    memory_mb = 8192
  }

  expect_failures = [var.memory_mb]
}

run "rejects_timeouts_beyond_an_http_call" {
  command = plan

  variables {
    function_timeout_seconds = 300
    relaunch_delay_seconds   = 300
    gc_bound_seconds         = 3600 # above the delivery window such a timeout would need
  }

  expect_failures = [var.function_timeout_seconds]
}

run "rejects_periods_a_timer_cannot_keep" {
  command = plan

  variables {
    intent_collector_every_minutes = 90
  }

  expect_failures = [var.intent_collector_every_minutes]
}

run "plans_the_defaults" {
  command = plan

  # The account's endpoints, known at plan here as the mock gives them at apply.
  override_resource {
    target          = azurerm_storage_account.this
    override_during = plan
    values = {
      id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Storage/storageAccounts/tftestcounter58511336"
      primary_blob_endpoint  = "https://tftestcounter58511336.blob.core.windows.net/"
      primary_queue_endpoint = "https://tftestcounter58511336.queue.core.windows.net/"
      primary_table_endpoint = "https://tftestcounter58511336.table.core.windows.net/"
    }
  }

  override_resource {
    target          = azurerm_service_plan.this
    override_during = plan
    values = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/serverFarms/tftest-counter-585113"
    }
  }

  assert {
    condition     = output.store_url == "aztables://state?endpoint=https://tftestcounter58511336.table.core.windows.net"
    error_message = "store_url is ${output.store_url}"
  }

  assert {
    condition     = output.queue_url == "azqueue://starts?endpoint=https://tftestcounter58511336.queue.core.windows.net"
    error_message = "queue_url is ${output.queue_url}"
  }

  assert {
    condition     = output.dead_letter_queue_url == "azqueue://starts-poison?endpoint=https://tftestcounter58511336.queue.core.windows.net"
    error_message = "dead_letter_queue_url is ${output.dead_letter_queue_url}"
  }

  assert {
    condition     = azurerm_storage_account.this.name == "tftestcounter58511336" && azurerm_storage_account.this.account_replication_type == "ZRS"
    error_message = "the storage account is ${azurerm_storage_account.this.name} (${azurerm_storage_account.this.account_replication_type})"
  }

  assert {
    condition     = output.function_name == "tftest-counter-585113" && output.function_id == "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/sites/tftest-counter-585113"
    error_message = "the function app is ${output.function_name} (${output.function_id})"
  }

  assert {
    condition     = output.collector_function_names == { intent_collector = "tftest-counter-585113/intent-collector", garbage_collector = "tftest-counter-585113/garbage-collector" }
    error_message = "collector_function_names are ${jsonencode(output.collector_function_names)}"
  }

  # Deletion protection is on by default: the lock, and the guard against terraform destroy.
  assert {
    condition     = length(azurerm_management_lock.state) == 1 && azurerm_management_lock.state[0].lock_level == "CanNotDelete" && azurerm_management_lock.state[0].scope == azurerm_storage_account.this.id
    error_message = "the storage account must carry a CanNotDelete lock by default"
  }

  assert {
    condition     = terraform_data.deletion_guard.input.protected
    error_message = "the destroy guard must be armed by default"
  }

  # Point-in-time recovery is on by default: versioning, change feed and restore of the blobs.
  assert {
    condition = (azurerm_storage_account.this.blob_properties[0].versioning_enabled &&
      azurerm_storage_account.this.blob_properties[0].change_feed_enabled &&
    azurerm_storage_account.this.blob_properties[0].restore_policy[0].days == 7)
    error_message = "point_in_time_recovery must turn on versioning, change feed and point-in-time restore"
  }

  # The contract's default memory (256 MB) gets Flex Consumption's smallest instance.
  assert {
    condition     = jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.functionAppConfig.scaleAndConcurrency.instanceMemoryMB == 512
    error_message = "memory_mb = 256 must get 512 MB instances"
  }

  assert {
    condition = alltrue([
      for k, v in {
        SSFKIT_SSF                                                   = "counter"
        SSFKIT_ENVIRONMENT                                           = "tftest"
        SSFKIT_LIFETIME_SECONDS                                      = "59"
        SSFKIT_GC_BOUND_SECONDS                                      = "900"
        SSFKIT_RELAUNCH_DELAY_SECONDS                                = "120"
        SSFKIT_KEY_RETENTION_SECONDS                                 = "86400"
        SSFKIT_MAX_ATTEMPTS                                          = "10"
        SSFKIT_MAX_RECEIVE_COUNT                                     = "5"
        SSFKIT_DEAD_LETTER_QUEUE                                     = output.dead_letter_queue_url
        SSFKIT_PEERS                                                 = "{}"
        SSFKIT_QUEUE_MESSAGE_TTL_SECONDS                             = "450"
        AzureFunctionsJobHost__extensions__queues__visibilityTimeout = "00:00:30"
        SSFKIT_INTENT_COLLECTOR_SCHEDULE                             = "0 */1 * * * *"
        SSFKIT_GARBAGE_COLLECTOR_SCHEDULE                            = "0 */5 * * * *"
        AzureFunctionsJobHost__functionTimeout                       = "00:01:00"
        AzureFunctionsJobHost__extensions__queues__maxDequeueCount   = "5"
      } : { for s in jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.appSettings : s.name => s.value }[k] == v
    ])
    error_message = "the default settings are wrong: ${azurerm_resource_group_template_deployment.app.template_content}"
  }

  assert {
    condition     = length(azurerm_role_assignment.peer_invoker) == 0
    error_message = "an SSF without peers must let no one invoke it"
  }
}

run "applies" {
  command = apply

  variables {
    peers                           = ["caller"]
    function_timeout_seconds        = 90
    gc_bound_seconds                = 900
    memory_mb                       = 3000
    intent_collector_every_minutes  = 2
    garbage_collector_every_minutes = 120
    max_receive_count               = 7
    deletion_protection             = false
    point_in_time_recovery          = false
    encryption_key                  = "https://tftest-vault.vault.azure.net/keys/ssfkit"
    environment_variables           = { GREETING = "hello", AZURE_CLIENT_ID = "not-mine" }
    tags                            = { team = "payments" }
  }

  assert {
    condition     = output.store_url == "aztables://state?endpoint=https://tftestcounter58511336.table.core.windows.net"
    error_message = "store_url is ${output.store_url}"
  }

  assert {
    condition     = output.queue_url == "azqueue://starts?endpoint=https://tftestcounter58511336.queue.core.windows.net"
    error_message = "queue_url is ${output.queue_url}"
  }

  assert {
    condition = output.ssfkit_config == {
      name                   = "counter"
      store                  = "aztables://state?endpoint=https://tftestcounter58511336.table.core.windows.net"
      queue                  = "azqueue://starts?endpoint=https://tftestcounter58511336.queue.core.windows.net"
      dead_letter_queue      = "azqueue://starts-poison?endpoint=https://tftestcounter58511336.queue.core.windows.net"
      lifetime_seconds       = 89
      gc_bound_seconds       = 900
      relaunch_delay_seconds = 120
      function_id            = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/sites/tftest-counter-585113"
    }
    error_message = "ssfkit_config is ${jsonencode(output.ssfkit_config)}"
  }

  # 7 deliveries of a start each held 90 s and retried 30 s later: the runtime's time-to-live
  # (SSFKIT_QUEUE_MESSAGE_TTL_SECONDS, in the settings below) and the window, below T.
  assert {
    condition     = output.delivery_window_seconds == 840 && output.delivery_window_seconds < output.ssfkit_config.gc_bound_seconds
    error_message = "the delivery window is ${output.delivery_window_seconds} s, want 840 s, below T"
  }

  assert {
    condition     = output.identity == var.environment.identities.counter.id && output.queue_id == azurerm_storage_queue.this["starts"].id
    error_message = "identity or queue_id is wrong"
  }

  assert {
    condition     = output.table_id == "${azurerm_storage_account.this.id}/tableServices/default/tables/state" && jsondecode(azurerm_resource_group_template_deployment.table.template_content).resources[0].name == "tftestcounter58511336/default/state"
    error_message = "the table is not the account's table state: ${output.table_id}"
  }

  assert {
    condition     = azurerm_storage_queue.this["starts"].name == "starts" && azurerm_storage_queue.this["poison"].name == "starts-poison"
    error_message = "the queues must be starts and starts-poison"
  }

  # The storage account takes Entra ID over TLS 1.2 only, and exposes nothing publicly.
  assert {
    condition = (!azurerm_storage_account.this.shared_access_key_enabled &&
      azurerm_storage_account.this.https_traffic_only_enabled &&
      azurerm_storage_account.this.min_tls_version == "TLS1_2" &&
      !azurerm_storage_account.this.allow_nested_items_to_be_public &&
      azurerm_storage_account.this.infrastructure_encryption_enabled &&
    azurerm_storage_container.deployment.container_access_type == "private")
    error_message = "the storage account must refuse shared keys, plain HTTP, old TLS and public blobs"
  }

  # The customer-managed key covers the table and the queues, through the SSF's identity.
  assert {
    condition = (azurerm_storage_account.this.customer_managed_key[0].key_vault_key_id == "https://tftest-vault.vault.azure.net/keys/ssfkit" &&
      azurerm_storage_account.this.customer_managed_key[0].user_assigned_identity_id == var.environment.identities.counter.id &&
      azurerm_storage_account.this.table_encryption_key_type == "Account" &&
    azurerm_storage_account.this.queue_encryption_key_type == "Account")
    error_message = "the customer-managed key must encrypt the table and the queues with the SSF's identity"
  }

  # The SSF's identity reaches its own table, its own queues and its own account, nothing else.
  assert {
    condition = (azurerm_role_assignment.own["table"].scope == output.table_id &&
      azurerm_role_assignment.own["table"].role_definition_name == "Storage Table Data Contributor" &&
      azurerm_role_assignment.own["starts"].scope == azurerm_storage_queue.this["starts"].id &&
      azurerm_role_assignment.own["poison"].scope == azurerm_storage_queue.this["poison"].id &&
      azurerm_role_assignment.own["starts"].role_definition_name == "Storage Queue Data Contributor" &&
      azurerm_role_assignment.own["host"].scope == azurerm_storage_account.this.id &&
    azurerm_role_assignment.own["host"].role_definition_name == "Storage Blob Data Owner")
    error_message = "the identity's roles must be scoped to this SSF's table, queues and account"
  }

  assert {
    condition = alltrue([for a in azurerm_role_assignment.own :
      startswith(a.scope, azurerm_storage_account.this.id) && a.principal_id == var.environment.identities.counter.principal_id
    ])
    error_message = "every role of the SSF's identity must be inside its own storage account"
  }

  # The deployer may write the deployment container only.
  assert {
    condition     = azurerm_role_assignment.deployer.scope == azurerm_storage_container.deployment.id && azurerm_role_assignment.deployer.principal_id == "99999999-9999-4999-8999-999999999999"
    error_message = "the deployer's access must be limited to the deployment container"
  }

  # The peer, and only the peer, may read this app's keys.
  assert {
    condition = (keys(azurerm_role_assignment.peer_invoker) == ["caller"] &&
      azurerm_role_assignment.peer_invoker["caller"].scope == output.function_id &&
      azurerm_role_assignment.peer_invoker["caller"].role_definition_id == var.environment.peer_invoker_role_definition_id &&
    azurerm_role_assignment.peer_invoker["caller"].principal_id == var.environment.identities.caller.principal_id)
    error_message = "only the caller's identity may get the invoker role, on this SSF's app"
  }

  # The SSF reads its own app's keys, to check its callers' keys itself: listkeys on its app only.
  assert {
    condition = (azurerm_role_assignment.own_keys.scope == output.function_id &&
      azurerm_role_assignment.own_keys.role_definition_id == var.environment.peer_invoker_role_definition_id &&
    azurerm_role_assignment.own_keys.principal_id == var.environment.identities.counter.principal_id)
    error_message = "the SSF's identity must be able to list its own app's keys, and no other's"
  }

  assert {
    condition = !contains(concat([for a in azurerm_role_assignment.peer_invoker : a.principal_id], [for a in azurerm_role_assignment.own : a.principal_id], [azurerm_role_assignment.own_keys.principal_id]),
    var.environment.identities.other.principal_id)
    error_message = "an SSF that is not a peer must get nothing"
  }

  # The function app: Flex Consumption, a custom handler, the SSF's identity, HTTPS only.
  assert {
    condition     = azurerm_service_plan.this.sku_name == "FC1" && azurerm_service_plan.this.os_type == "Linux"
    error_message = "the plan must be Flex Consumption"
  }

  assert {
    condition = (jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.functionAppConfig.runtime == { name = "custom", version = "1.0" } &&
      jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.functionAppConfig.scaleAndConcurrency.instanceMemoryMB == 4096 &&
      jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.functionAppConfig.deployment.storage.value == "https://tftestcounter58511336.blob.core.windows.net/deployment" &&
      jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.functionAppConfig.deployment.storage.authentication.userAssignedIdentityResourceId == var.environment.identities.counter.id &&
      keys(jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].identity.userAssignedIdentities) == [var.environment.identities.counter.id] &&
      jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.httpsOnly &&
    jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.minTlsVersion == "1.2")
    error_message = "the function app must be a custom handler with 4096 MB instances running as the SSF's identity over HTTPS: ${azurerm_resource_group_template_deployment.app.template_content}"
  }

  assert {
    condition     = azurerm_storage_blob.package.name == "released-package.zip" && azurerm_storage_blob.package.storage_container_id == azurerm_storage_container.deployment.id && azurerm_storage_blob.package.content_md5 == filemd5("tests/testdata/artifact.zip")
    error_message = "the artifact must be the deployment container's released-package.zip"
  }

  # The settings: the runtime's, the triggers', the host's.
  assert {
    condition = alltrue([
      for k, v in {
        SSFKIT_SSF                                                   = "counter"
        SSFKIT_ENVIRONMENT                                           = "tftest"
        SSFKIT_STORE                                                 = output.store_url
        SSFKIT_QUEUE                                                 = output.queue_url
        SSFKIT_LIFETIME_SECONDS                                      = "89"
        SSFKIT_GC_BOUND_SECONDS                                      = "900"
        SSFKIT_QUEUE_MESSAGE_TTL_SECONDS                             = "840"
        AzureFunctionsJobHost__extensions__queues__visibilityTimeout = "00:00:30"
        SSFKIT_RELAUNCH_DELAY_SECONDS                                = "120"
        SSFKIT_AZURE_SITES                                           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.Web/sites"
        SSFKIT_AZURE_SITE                                            = output.function_id
        AZURE_CLIENT_ID                                              = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
        SSFKIT_QUEUE_NAME                                            = "starts"
        SSFKIT_QUEUE_CONNECTION__queueServiceUri                     = "https://tftestcounter58511336.queue.core.windows.net"
        SSFKIT_QUEUE_CONNECTION__credential                          = "managedidentity"
        SSFKIT_QUEUE_CONNECTION__clientId                            = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
        SSFKIT_INTENT_COLLECTOR_SCHEDULE                             = "0 */2 * * * *"
        SSFKIT_GARBAGE_COLLECTOR_SCHEDULE                            = "0 0 */2 * * *"
        SSFKIT_ARTIFACT_SHA256                                       = filesha256("tests/testdata/artifact.zip")
        AzureWebJobsStorage__accountName                             = "tftestcounter58511336"
        AzureWebJobsStorage__credential                              = "managedidentity"
        AzureWebJobsStorage__clientId                                = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
        AzureFunctionsJobHost__functionTimeout                       = "00:01:30"
        AzureFunctionsJobHost__extensions__queues__maxDequeueCount   = "7"
        GREETING                                                     = "hello"
      } : lookup({ for s in jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.appSettings : s.name => s.value }, k, null) == v
    ])
    error_message = "the app settings are wrong: ${azurerm_resource_group_template_deployment.app.template_content}"
  }

  assert {
    condition     = !contains([for s in jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.appSettings : s.name], "AzureWebJobsStorage")
    error_message = "the host storage must use the identity, not a connection string"
  }

  assert {
    condition     = keys(jsondecode({ for s in jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.appSettings : s.name => s.value }["SSFKIT_PEERS"])) == ["caller"] && can(regex("^https://tftest-caller-1bd08d\\.azurewebsites\\.net$", jsondecode({ for s in jsondecode(azurerm_resource_group_template_deployment.app.template_content).resources[0].properties.siteConfig.appSettings : s.name => s.value }["SSFKIT_PEERS"]).caller))
    error_message = "SSFKIT_PEERS must name the caller's function app"
  }

  assert {
    condition     = length(azurerm_management_lock.state) == 0 && !terraform_data.deletion_guard.output.protected && !azurerm_storage_account.this.blob_properties[0].versioning_enabled && length(azurerm_storage_account.this.blob_properties[0].restore_policy) == 0
    error_message = "deletion_protection = false and point_in_time_recovery = false must drop the lock, the guard and the blob restore"
  }

  assert {
    condition     = azurerm_storage_account.this.tags == tomap({ "ssfkit-environment" = "tftest", "ssfkit-ssf" = "counter", team = "payments" }) && azurerm_service_plan.this.tags == azurerm_storage_account.this.tags
    error_message = "every resource must carry the environment's tags and the SSF's"
  }
}

run "rejects_relaunch_delay_below_function_timeout" {
  command = plan

  variables {
    relaunch_delay_seconds = 30
  }

  expect_failures = [var.relaunch_delay_seconds]
}

run "rejects_key_retention_within_gc_bound" {
  command = plan

  variables {
    key_retention_seconds = 900
  }

  expect_failures = [var.key_retention_seconds]
}

run "rejects_max_attempts_below_one" {
  command = plan

  variables {
    max_attempts = 0
  }

  expect_failures = [var.max_attempts]
}

run "rejects_provenance_without_retention_or_sink" {
  command = plan

  variables {
    provenance = "metadata"
  }

  expect_failures = [var.provenance]
}

# Provenance in the SSF's own account: a private container whose objects the account deletes
# after the environment's retention, and the settings that point the runtime at it.
run "keeps_provenance_in_its_own_account" {
  command = plan

  variables {
    provenance  = "metadata"
    environment = merge(var.environment, { provenance_retention_days = 14 })
  }

  assert {
    condition     = azurerm_storage_container.provenance[0].name == "provenance" && azurerm_storage_container.provenance[0].container_access_type == "private"
    error_message = "the provenance container must be private"
  }

  assert {
    condition = (azurerm_storage_management_policy.provenance[0].rule[0].actions[0].base_blob[0].delete_after_days_since_modification_greater_than == 14 &&
    azurerm_storage_management_policy.provenance[0].rule[0].filters[0].prefix_match == toset(["provenance/provenance/"]))
    error_message = "the provenance container's objects must be deleted after the environment's retention"
  }

  assert {
    condition     = local.app_settings.SSFKIT_PROVENANCE == "metadata" && local.app_settings.SSFKIT_PROVENANCE_SINK == "azblob://provenance?storage_account=${local.account_name}&prefix=provenance"
    error_message = "the app settings are ${jsonencode(local.app_settings)}"
  }
}
