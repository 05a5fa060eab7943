# terraform test for the bank example, against a mocked Google provider: the plan of a fresh
# environment (every name, URL and grant known without any Google API), and an apply that reads
# the project's number.

mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }

  # Cloud Run serves each service at its deterministic URL (the services' postcondition).
  mock_resource "google_cloud_run_v2_service" {
    defaults = {
      urls = [
        "https://bank-teller-123456789012.europe-west1.run.app",
        "https://bank-accounts-123456789012.europe-west1.run.app",
        "https://bank-audit-123456789012.europe-west1.run.app",
      ]
    }
  }
}

variables {
  project   = "ssfkit-bank"
  image     = "europe-west1-docker.pkg.dev/ssfkit-bank/ssfkit/bank:v1"
  throwaway = true
}

run "plans_offline" {
  command = plan

  variables {
    project_number = "123456789012"
  }

  assert {
    condition     = keys(output.ssfkit_config.ssfs) == ["accounts", "audit", "teller"] && output.ssfkit_config.environment == "bank" && output.ssfkit_config.region == "europe-west1"
    error_message = "ssfkit_config is ${jsonencode(output.ssfkit_config)}"
  }

  assert {
    condition     = output.ssfkit_config.ssfs.teller.store == "firestore://ssfkit-bank/state?database=bank-teller" && output.ssfkit_config.ssfs.audit.queue == "pubsub://ssfkit-bank/bank-audit?subscription=bank-audit" && output.ssfkit_config.ssfs.accounts.dead_letter_queue == "pubsub://ssfkit-bank/bank-accounts-dead-letter?subscription=bank-accounts-dead-letter"
    error_message = "each SSF must have its own database and queues"
  }

  assert {
    condition     = length(distinct([for s in values(output.ssfkit_config.ssfs) : s.store])) == 3 && length(distinct([for s in values(output.ssfkit_config.ssfs) : s.queue])) == 3
    error_message = "no two SSFs may share state or a queue"
  }

  assert {
    condition     = { for n, s in output.services : n => s.function } == { accounts = "bank-accounts", audit = "bank-audit", teller = "bank-teller" }
    error_message = "three services: ${jsonencode(output.services)}"
  }

  assert {
    condition     = alltrue([for n, s in output.services : s.identity == "bank-${n}@ssfkit-bank.iam.gserviceaccount.com"])
    error_message = "each SSF must run as its own service account"
  }

  assert {
    condition = output.services.teller.peers == {
      accounts = "https://bank-accounts-123456789012.europe-west1.run.app"
      audit    = "https://bank-audit-123456789012.europe-west1.run.app"
    }
    error_message = "teller's peers are ${jsonencode(output.services.teller.peers)}"
  }

  assert {
    condition     = alltrue([for n, s in output.services : toset(keys(s.peers)) == toset([for o in keys(output.services) : o if o != n]) && alltrue([for p, u in s.peers : u == output.services[p].url])])
    error_message = "each SSF's peers must be the two others, at their services' URLs"
  }
}

run "applies" {
  assert {
    condition     = module.environment.context.project_number == "123456789012"
    error_message = "without project_number, the example must read the project's number"
  }

  assert {
    condition     = length(module.ssf) == 3 && alltrue([for n, m in module.ssf : m.function_name == "bank-${n}" && m.collector_function_names.intent_collector == "bank-${n}-intent-collector" && m.collector_function_names.garbage_collector == "bank-${n}-garbage-collector"])
    error_message = "three services, each with its two collectors' schedules"
  }

  assert {
    condition     = alltrue([for n, s in output.services : s.url == "https://bank-${n}-123456789012.europe-west1.run.app" && length(s.peers) == 2 && !contains(keys(s.peers), n)])
    error_message = "each SSF must know the two others' URLs: ${jsonencode(output.services)}"
  }

  assert {
    condition     = alltrue([for n, c in output.ssfkit_config.ssfs : c.name == n && c.lifetime_seconds == 59 && c.gc_bound_seconds == 900 && c.relaunch_delay_seconds == 120])
    error_message = "ssfkit_config is ${jsonencode(output.ssfkit_config)}"
  }

  assert {
    condition     = alltrue([for n, m in module.ssf : m.identity == module.environment.identities[n].email]) && length(distinct([for m in module.ssf : m.identity])) == 3
    error_message = "each SSF must run as its own service account from the environment"
  }
}
