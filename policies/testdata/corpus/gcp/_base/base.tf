# The base every GCP case of the corpus adds its violation to: one SSF (a) of the ssf module,
# as a real deployment has it. The corpus test plans each case offline (a fake token; the project
# number given so no API is read).
terraform {
  required_providers {
    google = {
      source = "hashicorp/google"
    }
  }
}

provider "google" {
  project      = "ssfkit-corpus"
  region       = "europe-west1"
  access_token = "offline"
}

module "environment" {
  source              = "../../../../../modules/gcp/environment"
  name                = "corpus"
  project             = "ssfkit-corpus"
  region              = "europe-west1"
  ssfs                = ["a"]
  project_number      = "123456789012"
  deletion_protection = false
  # The environment's provenance bucket, and the SSF's grant of its own partitions in it.
  provenance_retention_days = 30
}

module "ssf" {
  source              = "../../../../../modules/gcp/ssf"
  name                = "a"
  environment         = module.environment.context
  peers               = []
  artifact            = "europe-west1-docker.pkg.dev/ssfkit-corpus/ssfkit/a@sha256:0000000000000000000000000000000000000000000000000000000000000000"
  deletion_protection = false
  provenance          = "metadata"
  provenance_sink     = module.environment.provenance_sink
}
