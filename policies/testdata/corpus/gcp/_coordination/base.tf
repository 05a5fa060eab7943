# The base the GCP coordination cases of the corpus add their violation to: an environment with
# one coordination service (a) of the coordination module, as a real deployment has it. The
# corpus test plans each case offline (a fake token; the project number given).
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
  ssfs                = []
  project_number      = "123456789012"
  deletion_protection = false
}

module "coordination" {
  source              = "../../../../../modules/gcp/coordination"
  name                = "a"
  environment         = module.environment.context
  artifact            = "europe-west1-docker.pkg.dev/ssfkit-corpus/ssfkit/coord@sha256:0000000000000000000000000000000000000000000000000000000000000000"
  deletion_protection = false
}

locals {
  # The coordination service's bucket and client service account (named after a hash of the
  # project, environment and service).
  bucket = "corpus-a-coord-31542cd0"
  client = "serviceAccount:corpus-a-cc-31542c@ssfkit-corpus.iam.gserviceaccount.com"
}
