output "ssfkit_config" {
  description = "The application's ssfkit config: the runtime settings of each SSF."
  value = {
    environment = module.environment.name
    region      = module.environment.region
    ssfs        = { for name, m in module.ssf : name => m.ssfkit_config }
  }
}

output "services" {
  description = "Each SSF's Cloud Run service: its name, the URL `ssfkit invoke` and its peers call, its service account, and its peers' URLs (its SSFKIT_PEERS)."
  value = {
    for name, m in module.ssf : name => {
      function = m.function_name
      url      = module.environment.services[name].url
      identity = m.identity
      peers    = { for p in local.ssfs[name] : p => module.environment.services[p].url }
    }
  }
}
