# One stateful serverless function on Azure: a storage account of its own holding its table
# (single-table design: the runtime keeps the linked DAALs, shadows, intents, read and invoke logs
# and the collectors' indexes in one table keyed PartitionKey/RowKey, see docs/protocol.md), its
# queue of asynchronous starts with the poison queue the Functions runtime dead-letters into,
# and the function app's host storage; the function app (Flex Consumption, a custom handler)
# serving the SSF and both collectors; and the role assignments that let the SSF's identity
# reach these and nothing of another SSF.

data "azurerm_client_config" "current" {}

locals {
  identity = var.environment.identities[var.name]
  tags     = merge(var.environment.tags, var.tags, tomap({ "ssfkit-ssf" = var.name }))

  # The one naming rule of the SSFs' function apps, applied to this SSF and to its peers so that
  # SSFKIT_PEERS names their real apps: <environment>-<ssf>-<hash>, at most 32 characters (site
  # names are global, letters, digits and hyphens; the hash of the resource group's ID and the
  # SSF's name keeps them unique across subscriptions and SSF names that differ in case or in
  # underscores).
  app_names = {
    for n in distinct(concat([var.name], var.peers)) : n => format("%s-%s",
      trim(substr(format("%s-%s", var.environment.name, trim(replace(lower(n), "/[^a-z0-9]+/", "-"), "-")), 0, 25), "-"),
    substr(sha1("${lower(var.environment.resource_group_id)}/${n}"), 0, 6))
  }
  app_name = local.app_names[var.name]
  # The ARM ID prefix of the environment's function apps (SSFKIT_AZURE_SITES): a caller reads a
  # peer's function key at <sites>/<app>/host/default/listkeys.
  sites       = "${var.environment.resource_group_id}/providers/Microsoft.Web/sites"
  function_id = "${local.sites}/${local.app_name}"
  peer_urls   = { for p in var.peers : p => "https://${local.app_names[p]}.azurewebsites.net" }

  # Storage account names are global, 3-24 lower-case letters and digits.
  account_name = format("%s%s",
    substr(replace(lower("${var.environment.name}${var.name}"), "/[^a-z0-9]/", ""), 0, 16),
  substr(sha1("${lower(var.environment.resource_group_id)}/${var.name}"), 0, 8))

  table_name   = "state"
  queue_name   = "starts"
  poison_queue = "${local.queue_name}-poison" # where the queue trigger moves a message after maxDequeueCount deliveries
  # Resource IDs built from names the plan knows, not read from the resources: the plan then
  # shows every role assignment's scope before anything exists, and the plan policies, which
  # deny a grant they cannot see (docs/security.md), check it on the first deployment too.
  account_id      = "/subscriptions/${data.azurerm_client_config.current.subscription_id}/resourceGroups/${var.environment.resource_group_name}/providers/Microsoft.Storage/storageAccounts/${local.account_name}"
  table_id        = "${local.account_id}/tableServices/default/tables/${local.table_name}"
  queue_ids       = { for k, q in { starts = local.queue_name, poison = local.poison_queue } : k => "${local.account_id}/queueServices/default/queues/${q}" }
  table_endpoint  = trimsuffix(azurerm_storage_account.this.primary_table_endpoint, "/")
  queue_endpoint  = trimsuffix(azurerm_storage_account.this.primary_queue_endpoint, "/")
  store_url       = "aztables://${local.table_name}?endpoint=${local.table_endpoint}"
  queue_url       = "azqueue://${local.queue_name}?endpoint=${local.queue_endpoint}"
  dead_letter_url = "azqueue://${local.poison_queue}?endpoint=${local.queue_endpoint}"

  # Flex Consumption sizes instances at 512, 2048 or 4096 MB: the smallest that holds memory_mb.
  instance_memory_mb = [for size in [512, 2048, 4096] : size if size >= var.memory_mb][0]

  # NCRONTAB (seconds first) schedules of the collectors' timers.
  schedules = {
    for k, every in {
      intent_collector  = var.intent_collector_every_minutes
      garbage_collector = var.garbage_collector_every_minutes
      } : k => (every < 60 ? "0 */${every} * * * *" :
    every == 1440 ? "0 0 0 * * *" : "0 0 */${floor(every / 60)} * * *")
  }

  # Delivery windows (docs/protocol.md, "Delivery windows"): the queue trigger must never hand
  # a start to the SSF later than T (gc_bound_seconds) after it was sent, so every setting that
  # lets a start wait or come back is derived here, and gc_bound_seconds' validation refuses T
  # at or below the longest window.
  #
  # A failed start is visible again 30 s after its execution ended (the host's visibilityTimeout;
  # its default, 0, retries at once), and is moved to the poison queue after max_receive_count
  # deliveries (maxDequeueCount).
  queue_retry_delay_seconds = 30
  redelivery_span_seconds   = var.max_receive_count * (local.timeout + local.queue_retry_delay_seconds)
  # A Storage queue keeps a message until its time-to-live, which its sender sets (Azure's
  # default is 7 days): the runtime must send every start with SSFKIT_QUEUE_MESSAGE_TTL_SECONDS
  # (below) as its time-to-live. Long enough for the deliveries of a failing start, so that it is moved to the poison
  # queue rather than dropped; at least a minute. A start dropped unrun is not lost: its intent
  # stays pending and the intent collector launches it again. (A host that crashes holds its
  # messages for its 10-minute lease; the time-to-live still ends them.)
  message_ttl_seconds = max(60, local.redelivery_span_seconds)
  delivery_windows = {
    # No expired message is delivered, and the host hands a received one to the function at once.
    queue        = local.message_ttl_seconds
    redeliveries = local.redelivery_span_seconds
  }
  delivery_window_seconds = max(values(local.delivery_windows)...)

  # The function app's settings. The SSFKIT_* settings configure the runtime (docs/modules.md);
  # the others bind the artifact's functions and the host to this SSF's storage with its identity.
  timeout = var.function_timeout_seconds
  runtime_settings = {
    SSFKIT_SSF                    = var.name
    SSFKIT_ENVIRONMENT            = var.environment.name
    SSFKIT_STORE                  = local.store_url
    SSFKIT_QUEUE                  = local.queue_url
    SSFKIT_LIFETIME_SECONDS       = tostring(local.timeout - 1)
    SSFKIT_GC_BOUND_SECONDS       = tostring(var.gc_bound_seconds)
    SSFKIT_RELAUNCH_DELAY_SECONDS = tostring(var.relaunch_delay_seconds)
    SSFKIT_KEY_RETENTION_SECONDS  = tostring(var.key_retention_seconds)
    SSFKIT_MAX_ATTEMPTS           = tostring(var.max_attempts)
    SSFKIT_MAX_RECEIVE_COUNT      = tostring(var.max_receive_count)
    SSFKIT_DEAD_LETTER_QUEUE      = local.dead_letter_url
    SSFKIT_PEERS                  = jsonencode(local.peer_urls)
    SSFKIT_AZURE_SITES            = local.sites
    SSFKIT_AZURE_SITE             = local.function_id # the host checks its callers' keys against this app's own (own_keys below)
    AZURE_CLIENT_ID               = local.identity.client_id
    # The time-to-live the runtime gives every message it sends to SSFKIT_QUEUE (spawns,
    # relaunches), in seconds: Storage queues have no queue-wide retention.
    SSFKIT_QUEUE_MESSAGE_TTL_SECONDS = tostring(local.message_ttl_seconds)

    # The queue trigger (function "queue") and the collectors' timers.
    SSFKIT_QUEUE_NAME                        = local.queue_name
    SSFKIT_QUEUE_CONNECTION__queueServiceUri = local.queue_endpoint
    SSFKIT_QUEUE_CONNECTION__credential      = "managedidentity"
    SSFKIT_QUEUE_CONNECTION__clientId        = local.identity.client_id
    SSFKIT_INTENT_COLLECTOR_SCHEDULE         = local.schedules.intent_collector
    SSFKIT_GARBAGE_COLLECTOR_SCHEDULE        = local.schedules.garbage_collector

    # A new artifact changes the settings, which restarts the app on the new package.
    SSFKIT_ARTIFACT_SHA256 = filesha256(var.artifact)

    # Host storage (keys, timers' schedule monitor, the deployed package) with the SSF's identity.
    AzureWebJobsStorage__accountName = azurerm_storage_account.this.name
    AzureWebJobsStorage__credential  = "managedidentity"
    AzureWebJobsStorage__clientId    = local.identity.client_id

    # host.json overrides: the execution bound, the deliveries before dead-lettering, and the
    # delay before a failed start is delivered again.
    AzureFunctionsJobHost__functionTimeout                       = format("%02d:%02d:%02d", floor(local.timeout / 3600), floor(local.timeout % 3600 / 60), local.timeout % 60)
    AzureFunctionsJobHost__extensions__queues__maxDequeueCount   = tostring(var.max_receive_count)
    AzureFunctionsJobHost__extensions__queues__visibilityTimeout = format("00:00:%02d", local.queue_retry_delay_seconds)
  }
  app_settings = merge(var.environment_variables, local.runtime_settings, local.provenance ? {
    SSFKIT_PROVENANCE      = var.provenance
    SSFKIT_PROVENANCE_SINK = local.provenance_sink
  } : {})

  # Provenance: by default in a container of the SSF's own storage account (its identity already
  # owns the account's blobs, and no other SSF reaches them), kept as long as the environment
  # says (provenance_retention_days); a sink of the user's own otherwise.
  provenance      = var.provenance != "off"
  provenance_own  = local.provenance && var.provenance_sink == null
  provenance_sink = local.provenance_own ? "azblob://${azurerm_storage_container.provenance[0].name}?storage_account=${local.account_name}&prefix=provenance" : var.provenance_sink
}

# The SSF's storage: its table, its queues and its function app's host storage, reachable with
# Entra ID only (no shared keys, so no connection string or SAS exists), over TLS 1.2.
resource "azurerm_storage_account" "this" {
  name                              = local.account_name
  resource_group_name               = var.environment.resource_group_name
  location                          = var.environment.location
  account_kind                      = "StorageV2"
  account_tier                      = "Standard"
  account_replication_type          = var.storage_replication
  https_traffic_only_enabled        = true
  min_tls_version                   = "TLS1_2"
  allow_nested_items_to_be_public   = false
  shared_access_key_enabled         = false
  default_to_oauth_authentication   = true
  cross_tenant_replication_enabled  = false
  allowed_copy_scope                = "AAD"
  local_user_enabled                = false
  infrastructure_encryption_enabled = true
  # Account-scoped keys, so that a customer-managed key covers the table and the queues too.
  queue_encryption_key_type = "Account"
  table_encryption_key_type = "Account"

  dynamic "identity" {
    for_each = var.encryption_key == null ? [] : [1]
    content {
      type         = "UserAssigned"
      identity_ids = [local.identity.id]
    }
  }

  dynamic "customer_managed_key" {
    for_each = var.encryption_key == null ? [] : [1]
    content {
      key_vault_key_id          = var.encryption_key
      user_assigned_identity_id = local.identity.id
    }
  }

  blob_properties {
    versioning_enabled  = var.point_in_time_recovery
    change_feed_enabled = var.point_in_time_recovery

    delete_retention_policy {
      days = 14
    }

    container_delete_retention_policy {
      days = 14
    }

    dynamic "restore_policy" {
      for_each = var.point_in_time_recovery ? [1] : []
      content {
        days = 7
      }
    }
  }

  tags = local.tags
}

# The table is created through Resource Manager: azurerm_storage_table reads the table's ACLs
# with a shared key, which this account refuses.
resource "azurerm_resource_group_template_deployment" "table" {
  name                = "ssfkit-${local.account_name}-table"
  resource_group_name = var.environment.resource_group_name
  deployment_mode     = "Incremental"
  template_content = jsonencode({
    "$schema"      = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
    contentVersion = "1.0.0.0"
    resources = [{
      type       = "Microsoft.Storage/storageAccounts/tableServices/tables"
      apiVersion = "2023-05-01"
      name       = "${azurerm_storage_account.this.name}/default/${local.table_name}"
      properties = {}
    }]
  })
  tags = local.tags
}

resource "azurerm_storage_queue" "this" {
  for_each           = { starts = local.queue_name, poison = local.poison_queue }
  name               = each.value
  storage_account_id = azurerm_storage_account.this.id
}

# The function app's deployment container: Flex Consumption runs released-package.zip from it.
resource "azurerm_storage_container" "deployment" {
  name                  = "deployment"
  storage_account_id    = azurerm_storage_account.this.id
  container_access_type = "private"
}

# Provenance, when the SSF keeps its own: the garbage collector's Parquet objects (query them
# with Synapse serverless SQL), deleted provenance_retention_days after they were written.
resource "azurerm_storage_container" "provenance" {
  count                 = local.provenance_own ? 1 : 0
  name                  = "provenance"
  storage_account_id    = azurerm_storage_account.this.id
  container_access_type = "private"

  lifecycle {
    precondition {
      condition     = var.environment.provenance_retention_days > 0
      error_message = "provenance = ${var.provenance} keeps records in the SSF's own account for the environment's provenance_retention_days: set it on the environment module (or give provenance_sink)."
    }
  }
}

resource "azurerm_storage_management_policy" "provenance" {
  count              = local.provenance_own ? 1 : 0
  storage_account_id = azurerm_storage_account.this.id

  rule {
    name    = "provenance-retention"
    enabled = true

    filters {
      blob_types   = ["blockBlob"]
      prefix_match = ["${azurerm_storage_container.provenance[0].name}/provenance/"]
    }

    actions {
      base_blob {
        delete_after_days_since_modification_greater_than = var.environment.provenance_retention_days
      }
    }
  }
}

# Deletion protection: the lock refuses the deletion of the account and of everything in it
# (table, queues, containers) through Resource Manager, whoever asks; the guard makes
# `terraform destroy`, which would remove the lock first, fail until deletion_protection is
# turned off and applied.
resource "azurerm_management_lock" "state" {
  count      = var.deletion_protection ? 1 : 0
  name       = "ssfkit-state"
  scope      = azurerm_storage_account.this.id
  lock_level = "CanNotDelete"
  notes      = "The state of SSF ${var.name} (ssfkit environment ${var.environment.name}): set deletion_protection = false and apply before deleting it."
}

resource "terraform_data" "deletion_guard" {
  input = {
    protected = var.deletion_protection
    ssf       = "${var.environment.name}/${var.name}"
  }

  provisioner "local-exec" {
    when = destroy
    # Runs under sh and cmd alike.
    command = self.output.protected ? "echo ssfkit: deletion_protection keeps the state of SSF ${self.output.ssf}, set it to false and apply before destroying 1>&2 && exit 1" : "exit 0"
  }

  depends_on = [azurerm_management_lock.state, azurerm_storage_account.this]
}

# The SSF's identity (Beldi's data sovereignty): its own table, its own queues, its own host
# storage, and nothing of another SSF.
resource "azurerm_role_assignment" "own" {
  for_each = {
    table  = { scope = local.table_id, role = "Storage Table Data Contributor" }
    starts = { scope = local.queue_ids.starts, role = "Storage Queue Data Contributor" }
    poison = { scope = local.queue_ids.poison, role = "Storage Queue Data Contributor" }
    host   = { scope = local.account_id, role = "Storage Blob Data Owner" }
  }
  scope                = each.value.scope
  role_definition_name = each.value.role
  principal_id         = local.identity.principal_id
  principal_type       = "ServicePrincipal"
  description          = "ssfkit SSF ${var.name}: its own ${each.key == "host" ? "host storage" : each.key == "table" ? "table" : "queue"}"

  depends_on = [azurerm_resource_group_template_deployment.table, azurerm_storage_queue.this]
}

# Terraform uploads the package with Entra ID (the account has no keys): the principal running
# Terraform may write the deployment container, and nothing else of the account's data.
resource "azurerm_role_assignment" "deployer" {
  scope                = azurerm_storage_container.deployment.id
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = data.azurerm_client_config.current.object_id
  description          = "ssfkit SSF ${var.name}: Terraform uploads the function app's package"
}

resource "azurerm_storage_blob" "package" {
  name                 = "released-package.zip" # the name Flex Consumption runs
  storage_container_id = azurerm_storage_container.deployment.id
  type                 = "Block"
  content_type         = "application/zip"
  source               = var.artifact
  content_md5          = filemd5(var.artifact) # a new artifact replaces the blob

  # A new role assignment takes a while to reach data operations: waiting for the table and the
  # identity's assignments gives the deployer's that time.
  depends_on = [azurerm_role_assignment.deployer, azurerm_role_assignment.own]
}

resource "azurerm_service_plan" "this" {
  name                = local.app_name
  resource_group_name = var.environment.resource_group_name
  location            = var.environment.location
  os_type             = "Linux"
  sku_name            = "FC1" # Flex Consumption: one app per plan
  tags                = local.tags
}

# The function app, through Resource Manager rather than azurerm_function_app_flex_consumption:
# that resource writes a key-based AzureWebJobsStorage connection string (with an empty key)
# even when the host storage uses an identity, which breaks the host (hashicorp/
# terraform-provider-azurerm#29693), and its zip deployment calls /api/zipdeploy, which Flex
# Consumption does not serve (#29630). Here the host storage, the deployment package and the
# queue trigger all use the SSF's identity, and the package is the blob above.
locals {
  app_template = {
    "$schema"      = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
    contentVersion = "1.0.0.0"
    resources = [
      {
        type       = "Microsoft.Web/sites"
        apiVersion = "2024-04-01"
        name       = local.app_name
        location   = var.environment.location
        kind       = "functionapp,linux"
        tags       = local.tags
        identity = {
          type                   = "UserAssigned"
          userAssignedIdentities = { (local.identity.id) = {} }
        }
        properties = {
          serverFarmId              = azurerm_service_plan.this.id
          httpsOnly                 = true
          clientAffinityEnabled     = false
          publicNetworkAccess       = "Enabled"
          keyVaultReferenceIdentity = local.identity.id
          siteConfig = {
            minTlsVersion    = "1.2"
            scmMinTlsVersion = "1.2"
            ftpsState        = "Disabled"
            http20Enabled    = true
            appSettings      = [for k in sort(keys(local.app_settings)) : { name = k, value = local.app_settings[k] }]
          }
          functionAppConfig = {
            deployment = {
              storage = {
                type  = "blobContainer"
                value = "${azurerm_storage_account.this.primary_blob_endpoint}${azurerm_storage_container.deployment.name}"
                authentication = {
                  type                           = "UserAssignedIdentity"
                  userAssignedIdentityResourceId = local.identity.id
                }
              }
            }
            scaleAndConcurrency = {
              maximumInstanceCount = 100
              instanceMemoryMB     = local.instance_memory_mb
            }
            runtime = { name = "custom", version = "1.0" }
          }
        }
      },
      # No publishing with basic credentials: the package comes from the deployment container.
      {
        type       = "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
        apiVersion = "2024-04-01"
        name       = "${local.app_name}/scm"
        dependsOn  = ["[resourceId('Microsoft.Web/sites', '${local.app_name}')]"]
        properties = { allow = false }
      },
      {
        type       = "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
        apiVersion = "2024-04-01"
        name       = "${local.app_name}/ftp"
        dependsOn  = ["[resourceId('Microsoft.Web/sites', '${local.app_name}')]"]
        properties = { allow = false }
      },
    ]
  }
}

resource "azurerm_resource_group_template_deployment" "app" {
  name                = "ssfkit-${local.app_name}"
  resource_group_name = var.environment.resource_group_name
  deployment_mode     = "Incremental"
  template_content    = jsonencode(local.app_template)
  tags                = local.tags

  # The host reads its package and keys with the identity from the start.
  depends_on = [azurerm_role_assignment.own, azurerm_storage_blob.package]
}

# The SSF's own identity reads its own app's keys (the environment's peer invoker role: listkeys
# and nothing else, on this app only), to check the keys its callers present
# (adapters/host/httphost, AzureKeyVerifier) rather than trust the front end alone.
resource "azurerm_role_assignment" "own_keys" {
  scope              = local.function_id
  role_definition_id = var.environment.peer_invoker_role_definition_id
  principal_id       = local.identity.principal_id
  principal_type     = "ServicePrincipal"
  description        = "ssfkit SSF ${var.name} checks its callers' keys against its own"

  depends_on = [azurerm_resource_group_template_deployment.app]
}

# Only the peers' identities may read this app's function keys, so only they can invoke it.
resource "azurerm_role_assignment" "peer_invoker" {
  for_each           = toset(var.peers)
  scope              = local.function_id
  role_definition_id = var.environment.peer_invoker_role_definition_id
  principal_id       = var.environment.identities[each.key].principal_id
  principal_type     = "ServicePrincipal"
  description        = "ssfkit SSF ${each.key} may invoke SSF ${var.name}"

  depends_on = [azurerm_resource_group_template_deployment.app]
}
