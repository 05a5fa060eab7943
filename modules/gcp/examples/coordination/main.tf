# A coordination service (modules/gcp/coordination) in an environment of its own, the way an
# application that runs `ssfkit coord proxy` beside its SSFs deploys it.
#
#   ssfkit build --cloud gcp --coordination --image europe-west1-docker.pkg.dev/P/ssfkit/coord:v1 --push
#   terraform init && terraform apply -var project=P -var image=europe-west1-docker.pkg.dev/P/ssfkit/coord:v1

provider "google" {
  project      = var.project
  region       = var.region
  access_token = var.access_token
}

module "environment" {
  source              = "../../environment"
  name                = var.name
  project             = var.project
  region              = var.region
  ssfs                = []
  project_number      = var.project_number
  deletion_protection = !var.throwaway
}

module "coordination" {
  source              = "../../coordination"
  name                = "zk"
  environment         = module.environment.context
  artifact            = var.image
  deletion_protection = !var.throwaway
}
