# A coordination service (modules/aws/coordination) in an environment of its own, the way an
# application that runs `ssfkit coord proxy` beside its SSFs deploys it.
#
#   terraform init && terraform apply -var artifact=coord.zip

module "environment" {
  source                   = "../../environment"
  name                     = var.name
  customer_managed_key     = var.customer_managed_key
  key_deletion_window_days = var.throwaway ? 7 : 30
}

module "coordination" {
  source                  = "../../coordination"
  name                    = "zk"
  environment             = module.environment.name
  artifact                = var.artifact
  heartbeat_every_minutes = 1
  encryption_key          = module.environment.encryption_key
  encryption_key_alias    = module.environment.encryption_key_alias
  tags                    = module.environment.tags
  deletion_protection     = !var.throwaway
}
