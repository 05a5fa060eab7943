# The bank example (examples/bank) on Azure: an environment and its three SSFs. teller calls
# accounts and audit; audit calls accounts; each callee reports back to its caller.
#
#   ssfkit build --cloud azure --app bank --out bank.zip
#   terraform init && terraform apply -var artifact=bank.zip -var subscription_id=...

provider "azurerm" {
  features {}
  subscription_id                 = var.subscription_id
  resource_provider_registrations = "none"
  # The SSFs' storage accounts take no shared keys: Terraform reaches their data (the uploaded
  # package) with Entra ID.
  storage_use_azuread = true
}

locals {
  ssfs = {
    teller   = ["accounts", "audit"]
    accounts = ["teller", "audit"]
    audit    = ["teller", "accounts"]
  }
}

module "environment" {
  source   = "../../environment"
  name     = var.name
  location = var.location
  ssfs     = keys(local.ssfs)
  # The SSFs' provenance (docs/provenance.md), each in its own account, queried with Synapse.
  provenance_retention_days = var.provenance == "off" ? 0 : 30
}

module "ssf" {
  source   = "../../ssf"
  for_each = local.ssfs

  name                   = each.key
  environment            = module.environment.context
  peers                  = each.value
  artifact               = var.artifact
  encryption_key         = module.environment.context.encryption_key
  deletion_protection    = !var.throwaway
  point_in_time_recovery = !var.throwaway
  provenance             = var.provenance
}
