output "context" {
  description = "What the SSF modules need to know of the environment: pass it to each SSF module as `environment`."
  value = {
    name                = var.name
    location            = var.location
    resource_group_name = local.resource_group.name
    resource_group_id   = local.resource_group.id
    encryption_key      = var.encryption_key
    tags                = local.tags
    identities = {
      for name, identity in azurerm_user_assigned_identity.ssf : name => {
        id           = identity.id
        principal_id = identity.principal_id
        client_id    = identity.client_id
      }
    }
    # Built from the role's GUID, which the plan knows (the resource's own attribute is known
    # only after apply), so the peers' role assignments can be checked before apply.
    peer_invoker_role_definition_id = "/subscriptions/${data.azurerm_client_config.current.subscription_id}/providers/Microsoft.Authorization/roleDefinitions/${azurerm_role_definition.peer_invoker.role_definition_id}"
    # Each SSF keeps its provenance in its own storage account, this long.
    provenance_retention_days = var.provenance_retention_days
  }

  # An SSF's storage account checks at creation that its identity may use the key.
  depends_on = [azurerm_role_assignment.key]
}

output "name" {
  description = "The environment's name."
  value       = var.name
}

output "location" {
  description = "The Azure region the environment lives in."
  value       = var.location
}

output "identities" {
  description = "The SSFs' user-assigned identities by SSF name: id, principal_id (object ID, for role assignments), client_id (AZURE_CLIENT_ID)."
  value = {
    for name, identity in azurerm_user_assigned_identity.ssf : name => {
      id           = identity.id
      principal_id = identity.principal_id
      client_id    = identity.client_id
    }
  }
}
