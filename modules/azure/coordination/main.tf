# The serverless ZooKeeper-compatible coordination service of an environment on Azure
# (docs/coordination.md): a storage account of its own holding the table, the request queue (with
# the poison queue the queue trigger dead-letters into), a private container for large entries
# and snapshots, and the function apps' host storage; two function apps (Flex Consumption, a
# custom handler), the writer on the queue trigger and the heartbeat on its timer; and three
# user-assigned identities with role assignments on exactly what each needs: the writer's, the
# heartbeat's, and the clients' (`ssfkit coord proxy`).

data "azurerm_client_config" "current" {}

locals {
  env  = var.environment
  tags = merge(local.env.tags, var.tags, tomap({ "ssfkit-coordination" = var.name }))
  hash = sha1("${lower(local.env.resource_group_id)}/coordination/${var.name}")

  kinds = toset(["writer", "heartbeat"])
  # Site names are global, letters, digits and hyphens, at most 32 characters.
  app_names = {
    for k in local.kinds : k => format("%s-%s", trim(substr("${local.env.name}-${var.name}-c${substr(k, 0, 1)}", 0, 25), "-"), substr(sha1("${local.hash}/${k}"), 0, 6))
  }
  sites        = "${local.env.resource_group_id}/providers/Microsoft.Web/sites"
  function_ids = { for k, n in local.app_names : k => "${local.sites}/${n}" }

  # Storage account names are global, 3-24 lower-case letters and digits.
  account_name = format("%s%s", substr(replace(lower("${local.env.name}${var.name}coord"), "/[^a-z0-9]/", ""), 0, 16), substr(local.hash, 0, 8))
  table_name   = "coord"
  queue_name   = "requests"
  poison_queue = "${local.queue_name}-poison" # where the queue trigger moves a request after maxDequeueCount deliveries
  container    = "blobs"

  # Resource IDs built from names the plan knows, so that every role assignment's scope is known
  # before anything exists (the plan policies deny a grant they cannot see).
  account_id   = "/subscriptions/${data.azurerm_client_config.current.subscription_id}/resourceGroups/${local.env.resource_group_name}/providers/Microsoft.Storage/storageAccounts/${local.account_name}"
  table_id     = "${local.account_id}/tableServices/default/tables/${local.table_name}"
  queue_ids    = { for k, q in { requests = local.queue_name, poison = local.poison_queue } : k => "${local.account_id}/queueServices/default/queues/${q}" }
  container_id = "${local.account_id}/blobServices/default/containers/${local.container}"

  table_endpoint  = trimsuffix(azurerm_storage_account.this.primary_table_endpoint, "/")
  queue_endpoint  = trimsuffix(azurerm_storage_account.this.primary_queue_endpoint, "/")
  store_url       = "aztables://${local.table_name}?endpoint=${local.table_endpoint}"
  queue_url       = "azqueue://${local.queue_name}?endpoint=${local.queue_endpoint}"
  dead_letter_url = "azqueue://${local.poison_queue}?endpoint=${local.queue_endpoint}"
  # The account in the URL too, so that the clients' config (coord_config) is whole.
  blobs_url = "azblob://${local.container}?storage_account=${azurerm_storage_account.this.name}"

  instance_memory_mb = [for size in [512, 2048, 4096] : size if size >= var.memory_mb][0]
  heartbeat_schedule = (var.heartbeat_every_minutes < 60 ? "0 */${var.heartbeat_every_minutes} * * * *" :
  var.heartbeat_every_minutes == 1440 ? "0 0 0 * * *" : "0 0 */${floor(var.heartbeat_every_minutes / 60)} * * *")
  timeout                   = var.function_timeout_seconds
  queue_retry_delay_seconds = 30

  # The same artifact in both apps: each runs its role (SSFKIT_COORD_ROLE), and the other role's
  # function is disabled, so that its trigger does not fire there. Every binding's settings are
  # set in both apps (a disabled function's bindings are still resolved).
  settings = {
    for k in local.kinds : k => {
      SSFKIT_COORD_ROLE           = k
      SSFKIT_ENVIRONMENT          = local.env.name
      SSFKIT_COORD_STORE          = local.store_url
      SSFKIT_COORD_QUEUE          = local.queue_url
      SSFKIT_COORD_BLOBS          = local.blobs_url
      SSFKIT_COORD_SNAPSHOT_EVERY = tostring(var.snapshot_every)
      AZURE_STORAGE_ACCOUNT       = azurerm_storage_account.this.name # the blobs' account (gocloud.dev's azblob)
      AZURE_CLIENT_ID             = azurerm_user_assigned_identity.this[k].client_id
      SSFKIT_AZURE_SITE           = local.function_ids[k] # the host checks the platform's calls against its own app's keys

      "AzureWebJobs.${k == "writer" ? "heartbeat" : "queue"}.Disabled" = "true"

      # The writer's queue trigger (function "queue") and the heartbeat's timer.
      SSFKIT_QUEUE_NAME                        = local.queue_name
      SSFKIT_QUEUE_CONNECTION__queueServiceUri = local.queue_endpoint
      SSFKIT_QUEUE_CONNECTION__credential      = "managedidentity"
      SSFKIT_QUEUE_CONNECTION__clientId        = azurerm_user_assigned_identity.this[k].client_id
      SSFKIT_HEARTBEAT_SCHEDULE                = local.heartbeat_schedule

      SSFKIT_ARTIFACT_SHA256 = filesha256(var.artifact)

      AzureWebJobsStorage__accountName = azurerm_storage_account.this.name
      AzureWebJobsStorage__credential  = "managedidentity"
      AzureWebJobsStorage__clientId    = azurerm_user_assigned_identity.this[k].client_id

      AzureFunctionsJobHost__functionTimeout                       = format("%02d:%02d:%02d", floor(local.timeout / 3600), floor(local.timeout % 3600 / 60), local.timeout % 60)
      AzureFunctionsJobHost__extensions__queues__maxDequeueCount   = tostring(var.max_receive_count)
      AzureFunctionsJobHost__extensions__queues__visibilityTimeout = format("00:00:%02d", local.queue_retry_delay_seconds)
    }
  }

  # The vault and key of encryption_key (https://VAULT.vault.azure.net/keys/KEY[/VERSION]).
  key = var.encryption_key == null ? null : regex("^https://(?P<vault>[^.]+)\\.vault\\.[^/]+/keys/(?P<name>[^/]+)", var.encryption_key)
}

# --- Identities --------------------------------------------------------------------------------

resource "azurerm_user_assigned_identity" "this" {
  for_each            = toset(["writer", "heartbeat", "client"])
  name                = "${local.env.name}-${var.name}-coord-${each.key}"
  resource_group_name = local.env.resource_group_name
  location            = local.env.location
  tags                = local.tags
}

# --- Storage -----------------------------------------------------------------------------------

# Entra ID only (no shared keys, so no connection string or SAS exists), TLS 1.2, no public blobs.
resource "azurerm_storage_account" "this" {
  name                              = local.account_name
  resource_group_name               = local.env.resource_group_name
  location                          = local.env.location
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
  queue_encryption_key_type         = "Account"
  table_encryption_key_type         = "Account"

  dynamic "identity" {
    for_each = var.encryption_key == null ? [] : [1]
    content {
      type         = "UserAssigned"
      identity_ids = [azurerm_user_assigned_identity.this["writer"].id]
    }
  }

  dynamic "customer_managed_key" {
    for_each = var.encryption_key == null ? [] : [1]
    content {
      key_vault_key_id          = var.encryption_key
      user_assigned_identity_id = azurerm_user_assigned_identity.this["writer"].id
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

  tags       = local.tags
  depends_on = [azurerm_role_assignment.key]
}

# The table is created through Resource Manager: azurerm_storage_table reads the table's ACLs
# with a shared key, which this account refuses.
resource "azurerm_resource_group_template_deployment" "table" {
  name                = "ssfkit-${local.account_name}-table"
  resource_group_name = local.env.resource_group_name
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
  for_each           = { requests = local.queue_name, poison = local.poison_queue }
  name               = each.value
  storage_account_id = azurerm_storage_account.this.id
}

# Large entries and snapshots.
resource "azurerm_storage_container" "blobs" {
  name                  = local.container
  storage_account_id    = azurerm_storage_account.this.id
  container_access_type = "private"
}

# Each app's deployment container: Flex Consumption runs released-package.zip from it.
resource "azurerm_storage_container" "deployment" {
  for_each              = local.kinds
  name                  = "deployment-${each.key}"
  storage_account_id    = azurerm_storage_account.this.id
  container_access_type = "private"
}

# Deletion protection, as the ssf module's: a lock on the account, and a guard that fails a
# destroy until deletion_protection is turned off and applied.
resource "azurerm_management_lock" "state" {
  count      = var.deletion_protection ? 1 : 0
  name       = "ssfkit-state"
  scope      = azurerm_storage_account.this.id
  lock_level = "CanNotDelete"
  notes      = "The state of coordination service ${var.name} (ssfkit environment ${local.env.name}): set deletion_protection = false and apply before deleting it."
}

resource "terraform_data" "deletion_guard" {
  input = {
    protected    = var.deletion_protection
    coordination = "${local.env.name}/${var.name}"
  }

  provisioner "local-exec" {
    when    = destroy
    command = self.output.protected ? "echo ssfkit: deletion_protection keeps the state of coordination service ${self.output.coordination}, set it to false and apply before destroying 1>&2 && exit 1" : "exit 0"
  }

  depends_on = [azurerm_management_lock.state, azurerm_storage_account.this]
}

# --- Role assignments --------------------------------------------------------------------------

# What each identity may reach: the writer its table, its queue (consume) and poison queue, the
# blobs; the heartbeat its table and the blobs; both their apps' host storage (the account's
# blobs, as the Functions host needs). The clients read and write the table (Azure Storage
# cannot confine them to their sessions' and requests' partitions), send requests, and read the
# blobs. No identity reaches anything else.
locals {
  grants = {
    writer_table    = { identity = "writer", scope = local.table_id, role = "Storage Table Data Contributor" }
    writer_requests = { identity = "writer", scope = local.queue_ids.requests, role = "Storage Queue Data Contributor" }
    writer_poison   = { identity = "writer", scope = local.queue_ids.poison, role = "Storage Queue Data Contributor" }
    writer_host     = { identity = "writer", scope = local.account_id, role = "Storage Blob Data Owner" }
    heartbeat_table = { identity = "heartbeat", scope = local.table_id, role = "Storage Table Data Contributor" }
    heartbeat_host  = { identity = "heartbeat", scope = local.account_id, role = "Storage Blob Data Owner" }
    client_table    = { identity = "client", scope = local.table_id, role = "Storage Table Data Contributor" }
    client_requests = { identity = "client", scope = local.queue_ids.requests, role = "Storage Queue Data Message Sender" }
    client_blobs    = { identity = "client", scope = local.container_id, role = "Storage Blob Data Reader" }
  }
}

resource "azurerm_role_assignment" "own" {
  for_each             = local.grants
  scope                = each.value.scope
  role_definition_name = each.value.role
  principal_id         = azurerm_user_assigned_identity.this[each.value.identity].principal_id
  principal_type       = "ServicePrincipal"
  description          = "ssfkit coordination ${local.env.name}/${var.name}: the ${each.value.identity}'s ${each.key}"

  depends_on = [azurerm_resource_group_template_deployment.table, azurerm_storage_queue.this, azurerm_storage_container.blobs]
}

# Terraform uploads the packages with Entra ID (the account has no keys).
resource "azurerm_role_assignment" "deployer" {
  for_each             = local.kinds
  scope                = "${local.account_id}/blobServices/default/containers/deployment-${each.key}"
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = data.azurerm_client_config.current.object_id
  description          = "ssfkit coordination ${local.env.name}/${var.name}: Terraform uploads the ${each.key}'s package"
  depends_on           = [azurerm_storage_container.deployment]
}

# With a customer-managed key, the account unwraps it with the writer's identity (Key Vault
# Crypto Service Encryption User, on the key alone). The vault is found by name in the
# provider's subscription.
data "azurerm_resources" "key_vault" {
  count = var.encryption_key == null ? 0 : 1
  type  = "Microsoft.KeyVault/vaults"
  name  = local.key.vault
}

resource "azurerm_role_assignment" "key" {
  count                = var.encryption_key == null ? 0 : 1
  scope                = "${try(data.azurerm_resources.key_vault[0].resources[0].id, "/vault-not-found")}/keys/${local.key.name}"
  role_definition_name = "Key Vault Crypto Service Encryption User"
  principal_id         = azurerm_user_assigned_identity.this["writer"].principal_id
  principal_type       = "ServicePrincipal"

  lifecycle {
    precondition {
      condition     = length(data.azurerm_resources.key_vault[0].resources) == 1
      error_message = "encryption_key names the Key Vault ${local.key.vault}, which is not in the provider's subscription: use a vault there (with Azure RBAC authorization)."
    }
  }
}

# --- Function apps -----------------------------------------------------------------------------

resource "azurerm_storage_blob" "package" {
  for_each             = local.kinds
  name                 = "released-package.zip"
  storage_container_id = azurerm_storage_container.deployment[each.key].id
  type                 = "Block"
  content_type         = "application/zip"
  source               = var.artifact
  content_md5          = filemd5(var.artifact)

  depends_on = [azurerm_role_assignment.deployer, azurerm_role_assignment.own]
}

resource "azurerm_service_plan" "this" {
  for_each            = local.kinds
  name                = local.app_names[each.key]
  resource_group_name = local.env.resource_group_name
  location            = local.env.location
  os_type             = "Linux"
  sku_name            = "FC1" # Flex Consumption: one app per plan
  tags                = local.tags
}

# The apps, through Resource Manager as the ssf module deploys its own (see there): the host
# storage, the package and the queue trigger all use the app's identity.
resource "azurerm_resource_group_template_deployment" "app" {
  for_each            = local.kinds
  name                = "ssfkit-${local.app_names[each.key]}"
  resource_group_name = local.env.resource_group_name
  deployment_mode     = "Incremental"
  tags                = local.tags
  template_content = jsonencode({
    "$schema"      = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
    contentVersion = "1.0.0.0"
    resources = [
      {
        type       = "Microsoft.Web/sites"
        apiVersion = "2024-04-01"
        name       = local.app_names[each.key]
        location   = local.env.location
        kind       = "functionapp,linux"
        tags       = local.tags
        identity = {
          type                   = "UserAssigned"
          userAssignedIdentities = { (azurerm_user_assigned_identity.this[each.key].id) = {} }
        }
        properties = {
          serverFarmId              = azurerm_service_plan.this[each.key].id
          httpsOnly                 = true
          clientAffinityEnabled     = false
          publicNetworkAccess       = "Enabled"
          keyVaultReferenceIdentity = azurerm_user_assigned_identity.this[each.key].id
          siteConfig = {
            minTlsVersion    = "1.2"
            scmMinTlsVersion = "1.2"
            ftpsState        = "Disabled"
            http20Enabled    = true
            appSettings      = [for k in sort(keys(local.settings[each.key])) : { name = k, value = local.settings[each.key][k] }]
          }
          functionAppConfig = {
            deployment = {
              storage = {
                type  = "blobContainer"
                value = "${azurerm_storage_account.this.primary_blob_endpoint}${azurerm_storage_container.deployment[each.key].name}"
                authentication = {
                  type                           = "UserAssignedIdentity"
                  userAssignedIdentityResourceId = azurerm_user_assigned_identity.this[each.key].id
                }
              }
            }
            scaleAndConcurrency = {
              maximumInstanceCount = 40
              instanceMemoryMB     = local.instance_memory_mb
            }
            runtime = { name = "custom", version = "1.0" }
          }
        }
      },
      {
        type       = "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
        apiVersion = "2024-04-01"
        name       = "${local.app_names[each.key]}/scm"
        dependsOn  = ["[resourceId('Microsoft.Web/sites', '${local.app_names[each.key]}')]"]
        properties = { allow = false }
      },
      {
        type       = "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
        apiVersion = "2024-04-01"
        name       = "${local.app_names[each.key]}/ftp"
        dependsOn  = ["[resourceId('Microsoft.Web/sites', '${local.app_names[each.key]}')]"]
        properties = { allow = false }
      },
    ]
  })

  depends_on = [azurerm_role_assignment.own, azurerm_storage_blob.package]
}

# Each app's identity reads its own app's keys (the environment's peer invoker role: listkeys and
# nothing else, on this app only), to check the platform's calls (adapters/host/httphost).
resource "azurerm_role_assignment" "own_keys" {
  for_each           = local.kinds
  scope              = local.function_ids[each.key]
  role_definition_id = local.env.peer_invoker_role_definition_id
  principal_id       = azurerm_user_assigned_identity.this[each.key].principal_id
  principal_type     = "ServicePrincipal"
  description        = "ssfkit coordination ${local.env.name}/${var.name}: the ${each.key} checks the platform's keys against its own"

  depends_on = [azurerm_resource_group_template_deployment.app]
}
