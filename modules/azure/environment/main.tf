# What an application's SSFs share on Azure: a resource group, one user-assigned identity per SSF
# (created here, not in the SSF modules, so that each SSF can grant its peers' identities the
# right to invoke it without a dependency cycle), the custom role those grants use, and the key
# that encrypts the SSFs' state.

data "azurerm_client_config" "current" {}

locals {
  tags = merge(var.tags, tomap({ "ssfkit-environment" = var.name }))

  create_resource_group = var.resource_group_name == null
  # The created group's ID is built from its name, so that the plan knows it (and the names,
  # scopes and role IDs derived from it) before anything exists.
  resource_group = local.create_resource_group ? {
    name = azurerm_resource_group.this[0].name
    id   = "/subscriptions/${data.azurerm_client_config.current.subscription_id}/resourceGroups/${azurerm_resource_group.this[0].name}"
    } : {
    name = data.azurerm_resource_group.existing[0].name
    id   = data.azurerm_resource_group.existing[0].id
  }

  # The vault and key of encryption_key (https://VAULT.vault.azure.net/keys/KEY[/VERSION]).
  key = var.encryption_key == null ? null : regex("^https://(?P<vault>[^.]+)\\.vault\\.[^/]+/keys/(?P<name>[^/]+)", var.encryption_key)
}

resource "azurerm_resource_group" "this" {
  count    = local.create_resource_group ? 1 : 0
  name     = "ssfkit-${var.name}"
  location = var.location
  tags     = local.tags
}

data "azurerm_resource_group" "existing" {
  count = local.create_resource_group ? 0 : 1
  name  = var.resource_group_name
}

# One identity per SSF. Its SSF module grants it the SSF's own table, queues and host storage;
# the modules of the SSF's peers grant it the peer invoker role on their function apps.
resource "azurerm_user_assigned_identity" "ssf" {
  for_each            = toset(var.ssfs)
  name                = "${var.name}-${each.key}"
  resource_group_name = local.resource_group.name
  location            = var.location
  tags                = local.tags
}

# The right to read a function app's host keys through Resource Manager (POST
# .../sites/APP/host/default/listkeys), which is how an SSF authenticates its calls to a peer
# (adapters/host/httphost): nothing else. Each SSF module assigns it on its own function app to
# its peers' identities only. Custom role names are unique per tenant, hence the suffix from the
# resource group's ID.
resource "azurerm_role_definition" "peer_invoker" {
  role_definition_id = uuidv5("url", "${lower(local.resource_group.id)}/ssfkit-peer-invoker")
  name               = "ssfkit peer invoker ${var.name} ${substr(sha1(lower(local.resource_group.id)), 0, 8)}"
  scope              = local.resource_group.id
  description        = "ssfkit environment ${var.name}: read the host keys of an SSF's function app, to invoke it. Assigned by each SSF on its own function app to its peers' identities."

  permissions {
    actions = ["Microsoft.Web/sites/host/listkeys/action"]
  }

  assignable_scopes = [local.resource_group.id]
}

# With a customer-managed key, each SSF's storage account unwraps it with the SSF's identity
# (Key Vault Crypto Service Encryption User, on the key alone). The vault is found by name in
# the provider's subscription.
data "azurerm_resources" "key_vault" {
  count = var.encryption_key == null ? 0 : 1
  type  = "Microsoft.KeyVault/vaults"
  name  = local.key.vault
}

resource "azurerm_role_assignment" "key" {
  for_each             = var.encryption_key == null ? toset([]) : toset(var.ssfs)
  scope                = "${try(data.azurerm_resources.key_vault[0].resources[0].id, "/vault-not-found")}/keys/${local.key.name}"
  role_definition_name = "Key Vault Crypto Service Encryption User"
  principal_id         = azurerm_user_assigned_identity.ssf[each.key].principal_id
  principal_type       = "ServicePrincipal"

  lifecycle {
    precondition {
      condition     = length(data.azurerm_resources.key_vault[0].resources) == 1
      error_message = "encryption_key names the Key Vault ${local.key.vault}, which is not in the provider's subscription: use a vault there (with Azure RBAC authorization)."
    }
  }
}
