# The bank example (examples/bank) on AWS: an environment and its three SSFs. teller calls
# accounts and audit; audit calls accounts; each callee reports back to its caller.
#
#   ssfkit build --cloud aws --app bank --out bank.zip
#   terraform init && terraform apply -var artifact=bank.zip

locals {
  ssfs = {
    teller   = ["accounts", "audit"]
    accounts = ["teller", "audit"]
    audit    = ["teller", "accounts"]
  }
}

module "environment" {
  source                   = "../../environment"
  name                     = var.name
  key_deletion_window_days = var.throwaway ? 7 : 30
  # The SSFs' provenance (docs/provenance.md), queried with Athena or `ssfkit trace`.
  provenance_retention_days = var.provenance == "off" ? 0 : 30
  deletion_protection       = !var.throwaway
}

module "ssf" {
  source   = "../../ssf"
  for_each = local.ssfs

  name                 = each.key
  environment          = module.environment.name
  peers                = each.value
  artifact             = var.artifact
  encryption_key       = module.environment.encryption_key
  encryption_key_alias = module.environment.encryption_key_alias
  tags                 = module.environment.tags
  deletion_protection  = !var.throwaway
  provenance           = var.provenance
  provenance_sink      = module.environment.provenance_sink
}

