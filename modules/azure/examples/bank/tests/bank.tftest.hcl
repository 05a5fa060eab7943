# terraform test for the bank example, against a mocked azurerm provider: the environment and its
# three SSFs planned as a real deployment would be (deletion protection on), then applied as a
# throwaway one, with assertions on the config `ssfkit up` writes, the identities and the apps.
# The mocks and overrides give ARM-shaped IDs and each SSF's own storage endpoints.

mock_provider "azurerm" {
  mock_resource "azurerm_resource_group" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank"
    }
  }

  mock_resource "azurerm_role_definition" {
    defaults = {
      role_definition_resource_id = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/44444444-4444-4444-8444-444444444444"
    }
  }

  mock_resource "azurerm_service_plan" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Web/serverFarms/bank"
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

# teller: the storage account and queues Azure would give it.
override_resource {
  target = module.ssf["teller"].azurerm_storage_account.this
  values = {
    id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/banktellerf32a3b05"
    primary_blob_endpoint  = "https://banktellerf32a3b05.blob.core.windows.net/"
    primary_queue_endpoint = "https://banktellerf32a3b05.queue.core.windows.net/"
    primary_table_endpoint = "https://banktellerf32a3b05.table.core.windows.net/"
  }
}

override_resource {
  target = module.ssf["teller"].azurerm_storage_queue.this["starts"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/banktellerf32a3b05/queueServices/default/queues/starts" }
}

override_resource {
  target = module.ssf["teller"].azurerm_storage_queue.this["poison"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/banktellerf32a3b05/queueServices/default/queues/starts-poison" }
}

override_resource {
  target = module.ssf["teller"].azurerm_storage_container.deployment
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/banktellerf32a3b05/blobServices/default/containers/deployment" }
}

override_resource {
  target = module.environment.azurerm_user_assigned_identity.ssf["teller"]
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.ManagedIdentity/userAssignedIdentities/bank-teller"
    principal_id = "11111111-1111-4111-8111-111111111111"
    client_id    = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
  }
}

# accounts: the storage account and queues Azure would give it.
override_resource {
  target = module.ssf["accounts"].azurerm_storage_account.this
  values = {
    id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaccounts4c9fed49"
    primary_blob_endpoint  = "https://bankaccounts4c9fed49.blob.core.windows.net/"
    primary_queue_endpoint = "https://bankaccounts4c9fed49.queue.core.windows.net/"
    primary_table_endpoint = "https://bankaccounts4c9fed49.table.core.windows.net/"
  }
}

override_resource {
  target = module.ssf["accounts"].azurerm_storage_queue.this["starts"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaccounts4c9fed49/queueServices/default/queues/starts" }
}

override_resource {
  target = module.ssf["accounts"].azurerm_storage_queue.this["poison"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaccounts4c9fed49/queueServices/default/queues/starts-poison" }
}

override_resource {
  target = module.ssf["accounts"].azurerm_storage_container.deployment
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaccounts4c9fed49/blobServices/default/containers/deployment" }
}

override_resource {
  target = module.environment.azurerm_user_assigned_identity.ssf["accounts"]
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.ManagedIdentity/userAssignedIdentities/bank-accounts"
    principal_id = "22222222-2222-4222-8222-222222222222"
    client_id    = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
  }
}

# audit: the storage account and queues Azure would give it.
override_resource {
  target = module.ssf["audit"].azurerm_storage_account.this
  values = {
    id                     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaudite9c9f1bf"
    primary_blob_endpoint  = "https://bankaudite9c9f1bf.blob.core.windows.net/"
    primary_queue_endpoint = "https://bankaudite9c9f1bf.queue.core.windows.net/"
    primary_table_endpoint = "https://bankaudite9c9f1bf.table.core.windows.net/"
  }
}

override_resource {
  target = module.ssf["audit"].azurerm_storage_queue.this["starts"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaudite9c9f1bf/queueServices/default/queues/starts" }
}

override_resource {
  target = module.ssf["audit"].azurerm_storage_queue.this["poison"]
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaudite9c9f1bf/queueServices/default/queues/starts-poison" }
}

override_resource {
  target = module.ssf["audit"].azurerm_storage_container.deployment
  values = { id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bankaudite9c9f1bf/blobServices/default/containers/deployment" }
}

override_resource {
  target = module.environment.azurerm_user_assigned_identity.ssf["audit"]
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.ManagedIdentity/userAssignedIdentities/bank-audit"
    principal_id = "33333333-3333-4333-8333-333333333333"
    client_id    = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
  }
}

variables {
  artifact        = "../../ssf/tests/testdata/artifact.zip"
  subscription_id = "00000000-0000-0000-0000-000000000000"
}

run "plans_the_bank" {
  command = plan

  # The resource group's ID, which names the apps, as Azure gives it.
  override_resource {
    target          = module.environment.azurerm_resource_group.this[0]
    override_during = plan
    values = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank"
    }
  }

  assert {
    condition     = output.ssfkit_config.environment == "bank" && output.ssfkit_config.region == "westeurope" && keys(output.ssfkit_config.ssfs) == ["accounts", "audit", "teller"]
    error_message = "the config must name the environment, its region and its three SSFs"
  }

  assert {
    condition     = { for n, m in module.ssf : n => m.function_name } == { accounts = "bank-accounts-4c9fed", audit = "bank-audit-e9c9f1", teller = "bank-teller-f32a3b" }
    error_message = "the function apps are ${jsonencode({ for n, m in module.ssf : n => m.function_name })}"
  }

  assert {
    condition = alltrue([for n, c in output.ssfkit_config.ssfs :
      c.name == n && c.lifetime_seconds == 59 && c.gc_bound_seconds == 900 && c.relaunch_delay_seconds == 120
    ])
    error_message = "every SSF must run with the contract's defaults"
  }

  assert {
    condition     = keys(module.environment.identities) == ["accounts", "audit", "teller"] && module.environment.context.resource_group_name == "ssfkit-bank"
    error_message = "the environment must create an identity per SSF in ssfkit-bank"
  }
}

run "applies_a_throwaway_bank" {
  command = apply

  variables {
    throwaway = true
  }

  assert {
    condition = output.ssfkit_config == {
      environment = "bank"
      region      = "westeurope"
      ssfs = {
        for n, account in { accounts = "bankaccounts4c9fed49", audit = "bankaudite9c9f1bf", teller = "banktellerf32a3b05" } : n => {
          name                       = n
          store                      = "aztables://state?endpoint=https://${account}.table.core.windows.net"
          queue                      = "azqueue://starts?endpoint=https://${account}.queue.core.windows.net"
          dead_letter_queue          = "azqueue://starts-poison?endpoint=https://${account}.queue.core.windows.net"
          lifetime_seconds           = 59
          gc_bound_seconds           = 900
          relaunch_delay_seconds     = 120
          function_id                = module.ssf[n].function_id
        }
      }
    }
    error_message = "ssfkit_config is ${jsonencode(output.ssfkit_config)}"
  }

  # Each SSF has its own table, queue and identity: nothing is shared.
  assert {
    condition = (length(distinct([for m in module.ssf : m.table_id])) == 3 &&
      length(distinct([for m in module.ssf : m.queue_id])) == 3 &&
    length(distinct([for m in module.ssf : m.identity])) == 3)
    error_message = "the SSFs must not share tables, queues or identities"
  }

  assert {
    condition = alltrue([for n, m in module.ssf :
      m.identity == module.environment.identities[n].id &&
      startswith(m.table_id, "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Storage/storageAccounts/bank") &&
      endswith(m.table_id, "/tableServices/default/tables/state") &&
      m.function_id == "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ssfkit-bank/providers/Microsoft.Web/sites/${m.function_name}" &&
      m.collector_function_names == { intent_collector = "${m.function_name}/intent-collector", garbage_collector = "${m.function_name}/garbage-collector" }
    ])
    error_message = "each SSF must run as its own identity, in its own account, as its own app"
  }

  assert {
    condition     = can(regex("^/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$", module.environment.context.peer_invoker_role_definition_id)) && module.environment.context.encryption_key == null
    error_message = "the environment must hand its peer invoker role to the SSFs"
  }

  assert {
    condition     = module.environment.context.tags == tomap({ "ssfkit-environment" = "bank" }) && module.environment.context.identities.teller.client_id == "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
    error_message = "the environment's context is ${jsonencode(module.environment.context)}"
  }
}
