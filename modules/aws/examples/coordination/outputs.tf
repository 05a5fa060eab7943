output "ssfkit_config" {
  description = "The environment's ssfkit config: no SSF, one coordination service (its coord_config, what `ssfkit coord proxy` reads)."
  value = {
    environment  = module.environment.name
    region       = module.environment.region
    ssfs         = {}
    coordination = { (module.coordination.name) = module.coordination.coord_config }
  }
}

output "coordination" {
  description = "Every output of the coordination module."
  value       = module.coordination
}
