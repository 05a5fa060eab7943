# terraform test for the environment module, against a mocked azurerm provider: the validations,
# a new and an existing resource group, the peer invoker role, and the grants of a
# customer-managed key to the SSFs' identities.

mock_provider "azurerm" {
  mock_resource "azurerm_resource_group" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest"
    }
  }

  mock_data "azurerm_resource_group" {
    defaults = {
      id       = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/shared"
      location = "northeurope"
    }
  }

  mock_resource "azurerm_role_definition" {
    defaults = {
      role_definition_resource_id = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/44444444-4444-4444-8444-444444444444"
    }
  }

  mock_data "azurerm_client_config" {
    defaults = {
      subscription_id = "00000000-0000-0000-0000-000000000000"
    }
  }

  mock_data "azurerm_resources" {
    defaults = {
      resources = [{
        id                  = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/keys/providers/Microsoft.KeyVault/vaults/tftest-vault"
        name                = "tftest-vault"
        type                = "Microsoft.KeyVault/vaults"
        resource_group_name = "keys"
        location            = "westeurope"
        tags                = {}
      }]
    }
  }
}

override_resource {
  target = azurerm_user_assigned_identity.ssf["counter"]
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-counter"
    principal_id = "11111111-1111-4111-8111-111111111111"
    client_id    = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
  }
}

override_resource {
  target = azurerm_user_assigned_identity.ssf["caller"]
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-caller"
    principal_id = "22222222-2222-4222-8222-222222222222"
    client_id    = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
  }
}

variables {
  name     = "tftest"
  location = "westeurope"
  ssfs     = ["counter", "caller"]
  tags     = { team = "payments" }
}

run "rejects_names_that_do_not_fit_azure" {
  command = plan

  variables {
    name = "Travel_Prod"
  }

  expect_failures = [var.name]
}

run "rejects_ssf_names_the_runtime_refuses" {
  command = plan

  variables {
    ssfs = ["counter", "my-ssf"]
  }

  expect_failures = [var.ssfs]
}

run "rejects_an_ssf_named_twice" {
  command = plan

  variables {
    ssfs = ["counter", "counter"]
  }

  expect_failures = [var.ssfs]
}

run "rejects_keys_that_are_not_key_vault_keys" {
  command = plan

  variables {
    encryption_key = "https://tftest-vault.vault.azure.net/secrets/ssfkit"
  }

  expect_failures = [var.encryption_key]
}

run "creates_its_resource_group" {
  command = apply

  assert {
    condition     = azurerm_resource_group.this[0].name == "ssfkit-tftest" && output.context.resource_group_name == "ssfkit-tftest" && output.context.resource_group_id == azurerm_resource_group.this[0].id
    error_message = "the environment must create and use ssfkit-tftest"
  }

  assert {
    condition = output.identities == {
      caller = {
        id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-caller"
        principal_id = "22222222-2222-4222-8222-222222222222"
        client_id    = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
      }
      counter = {
        id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-tftest/providers/Microsoft.ManagedIdentity/userAssignedIdentities/tftest-counter"
        principal_id = "11111111-1111-4111-8111-111111111111"
        client_id    = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
      }
    } && output.context.identities == output.identities
    error_message = "identities are ${jsonencode(output.identities)}"
  }

  assert {
    condition     = azurerm_user_assigned_identity.ssf["counter"].name == "tftest-counter" && azurerm_user_assigned_identity.ssf["counter"].resource_group_name == "ssfkit-tftest"
    error_message = "each SSF's identity must be <environment>-<ssf> in the environment's resource group"
  }

  # The peer invoker role reads function keys and does nothing else, in this resource group only.
  assert {
    condition = (azurerm_role_definition.peer_invoker.permissions[0].actions == tolist(["Microsoft.Web/sites/host/listkeys/action"]) &&
      try(length(azurerm_role_definition.peer_invoker.permissions[0].data_actions), 0) == 0 &&
      azurerm_role_definition.peer_invoker.assignable_scopes == tolist([azurerm_resource_group.this[0].id]) &&
      azurerm_role_definition.peer_invoker.scope == azurerm_resource_group.this[0].id &&
    startswith(azurerm_role_definition.peer_invoker.name, "ssfkit peer invoker tftest "))
    error_message = "the peer invoker role must allow listkeys on the environment's sites only"
  }

  assert {
    condition     = output.context.peer_invoker_role_definition_id == "/subscriptions/${data.azurerm_client_config.current.subscription_id}/providers/Microsoft.Authorization/roleDefinitions/${azurerm_role_definition.peer_invoker.role_definition_id}"
    error_message = "the context must hand the peer invoker role to the SSF modules"
  }

  assert {
    condition     = output.context.tags == tomap({ team = "payments", "ssfkit-environment" = "tftest" }) && azurerm_resource_group.this[0].tags == output.context.tags
    error_message = "the environment's tags must carry ssfkit-environment"
  }

  assert {
    condition     = output.context.encryption_key == null && length(azurerm_role_assignment.key) == 0
    error_message = "without a key there is nothing to grant"
  }

  assert {
    condition     = output.name == "tftest" && output.location == "westeurope" && output.context.location == "westeurope"
    error_message = "name or location is wrong"
  }
}

run "uses_an_existing_resource_group_and_grants_the_key" {
  command = apply

  variables {
    resource_group_name = "shared"
    encryption_key      = "https://tftest-vault.vault.azure.net/keys/ssfkit"
  }

  assert {
    condition     = length(azurerm_resource_group.this) == 0 && output.context.resource_group_name == "shared" && output.context.resource_group_id == "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/shared"
    error_message = "the environment must use the existing resource group"
  }

  assert {
    condition     = azurerm_user_assigned_identity.ssf["caller"].resource_group_name == "shared" && azurerm_role_definition.peer_invoker.assignable_scopes == tolist(["/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/shared"])
    error_message = "the identities and the role must live in the existing resource group"
  }

  # Each identity may use the key, and only that key of the vault.
  assert {
    condition = (keys(azurerm_role_assignment.key) == ["caller", "counter"] && alltrue([for n, a in azurerm_role_assignment.key :
      a.scope == "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/keys/providers/Microsoft.KeyVault/vaults/tftest-vault/keys/ssfkit" &&
      a.role_definition_name == "Key Vault Crypto Service Encryption User" &&
      a.principal_id == output.identities[n].principal_id
    ]))
    error_message = "each SSF's identity must get Key Vault Crypto Service Encryption User on the key"
  }

  assert {
    condition     = output.context.encryption_key == "https://tftest-vault.vault.azure.net/keys/ssfkit"
    error_message = "the context must hand the key to the SSF modules"
  }
}

run "refuses_a_vault_it_cannot_find" {
  command = plan

  variables {
    encryption_key = "https://elsewhere-vault.vault.azure.net/keys/ssfkit"
  }

  override_data {
    target = data.azurerm_resources.key_vault[0]
    values = {
      resources = []
    }
  }

  expect_failures = [azurerm_role_assignment.key]
}
