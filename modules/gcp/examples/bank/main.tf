# The bank example (examples/bank) on Google Cloud: an environment and its three SSFs. teller
# calls accounts and audit; audit calls accounts; each callee reports back to its caller.
#
#   ssfkit build --cloud gcp --app bank --image europe-west1-docker.pkg.dev/P/ssfkit/bank:v1 --push
#   terraform init && terraform apply -var project=P -var image=europe-west1-docker.pkg.dev/P/ssfkit/bank:v1

provider "google" {
  project      = var.project
  region       = var.region
  access_token = var.access_token
}

locals {
  ssfs = {
    teller   = ["accounts", "audit"]
    accounts = ["teller", "audit"]
    audit    = ["teller", "accounts"]
  }
}

module "environment" {
  source         = "../../environment"
  name           = var.name
  project        = var.project
  region         = var.region
  ssfs           = keys(local.ssfs)
  project_number = var.project_number
  bigtable       = var.bigtable_zone == null ? null : { zone = var.bigtable_zone }
  # A throwaway environment can be destroyed with its instance and its provenance.
  deletion_protection = !var.throwaway
  # The SSFs' provenance (docs/provenance.md), queried with BigQuery or `ssfkit trace`.
  provenance_retention_days = var.provenance == "off" ? 0 : 30
}

module "ssf" {
  source   = "../../ssf"
  for_each = local.ssfs

  name                = each.key
  environment         = module.environment.context
  peers               = each.value
  artifact            = var.image
  state_store         = var.bigtable_zone == null ? "firestore" : "bigtable"
  deletion_protection = !var.throwaway
  provenance          = var.provenance
  provenance_sink     = module.environment.provenance_sink
}
