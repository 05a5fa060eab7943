output "ssfkit_config" {
  description = "The application's ssfkit config: the runtime settings of each SSF."
  value = {
    environment = module.environment.name
    region      = module.environment.region
    ssfs        = { for name, m in module.ssf : name => m.ssfkit_config }
  }
}
