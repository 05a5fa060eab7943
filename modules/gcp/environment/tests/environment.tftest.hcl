# terraform test for the environment module, against a mocked Google provider: the names it
# gives each SSF's service account and service (Google's limits, no collisions), the URLs, the
# project number read or given, and the key's grants.

mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "987654321098"
    }
  }
}

variables {
  name    = "tftest"
  project = "tftest-project"
  region  = "europe-west1"
  ssfs    = ["teller", "accounts"]
}

run "rejects_names_aws_would_refuse" {
  command = plan

  variables {
    name = "Bank_Prod"
  }

  expect_failures = [var.name]
}

run "rejects_names_pubsub_reserves" {
  command = plan

  variables {
    name = "google-bank"
  }

  expect_failures = [var.name]
}

run "rejects_ssfs_the_runtime_refuses" {
  command = plan

  variables {
    ssfs = ["teller", "my-ssf"]
  }

  expect_failures = [var.ssfs]
}

run "rejects_an_ssf_twice" {
  command = plan

  variables {
    ssfs = ["teller", "teller"]
  }

  expect_failures = [var.ssfs]
}

run "rejects_keys_that_are_not_cloud_kms_keys" {
  command = plan

  variables {
    encryption_key = "arn:aws:kms:us-east-1:123456789012:key/abc"
  }

  expect_failures = [var.encryption_key]
}

# Without project_number, the project's number is read.
run "reads_the_project_number" {
  assert {
    condition     = output.context.project_number == "987654321098" && length(data.google_project.this) == 1
    error_message = "the project number must come from the google_project data source"
  }

  assert {
    condition = output.services == {
      teller   = { name = "tftest-teller", url = "https://tftest-teller-987654321098.europe-west1.run.app" }
      accounts = { name = "tftest-accounts", url = "https://tftest-accounts-987654321098.europe-west1.run.app" }
    }
    error_message = "services are ${jsonencode(output.services)}"
  }
}

run "names_each_ssf" {
  command = plan

  variables {
    project_number = "123456789012"
    # teller fits as it is; Teller lower-cases to the same and reservation_manager has
    # underscores (hashed); tftest-a is short but long enough; the last is 63 characters.
    ssfs = [
      "teller",
      "Teller",
      "reservation_manager",
      "a",
      "aVeryLongNameForAnSsfThatGoesOnAndOnBeyondEveryLimitOfGoogleClo",
    ]
    tags = { team = "payments" }
  }

  assert {
    condition     = length(data.google_project.this) == 0 && output.context.project_number == "123456789012"
    error_message = "a given project number must not be read"
  }

  assert {
    condition     = google_service_account.ssf["teller"].account_id == "tftest-teller" && output.services.teller.name == "tftest-teller" && output.services.teller.url == "https://tftest-teller-123456789012.europe-west1.run.app"
    error_message = "a lower-case SSF name that fits must be kept as it is"
  }

  assert {
    condition     = output.identities.teller == { email = "tftest-teller@tftest-project.iam.gserviceaccount.com", member = "serviceAccount:tftest-teller@tftest-project.iam.gserviceaccount.com", id = "projects/tftest-project/serviceAccounts/tftest-teller@tftest-project.iam.gserviceaccount.com" }
    error_message = "teller's identity is ${jsonencode(output.identities.teller)}"
  }

  assert {
    condition     = alltrue([for s, a in google_service_account.ssf : can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", a.account_id)) && output.identities[s].email == "${a.account_id}@tftest-project.iam.gserviceaccount.com"])
    error_message = "service account IDs must be 6 to 30 lower-case letters, digits or hyphens: ${jsonencode([for a in google_service_account.ssf : a.account_id])}"
  }

  assert {
    condition     = alltrue([for s in values(output.services) : can(regex("^[a-z]([-a-z0-9]{2,47}[a-z0-9])$", s.name)) && s.url == "https://${s.name}-123456789012.europe-west1.run.app"])
    error_message = "service names must be 4 to 49 lower-case letters, digits or hyphens: ${jsonencode(output.services)}"
  }

  assert {
    condition     = length(distinct([for a in google_service_account.ssf : a.account_id])) == 5 && length(distinct([for s in values(output.services) : s.name])) == 5
    error_message = "no two SSFs may share a service account or a service"
  }

  assert {
    condition     = can(regex("^tftest-teller-[0-9a-f]{6}$", output.services.Teller.name)) && can(regex("^tftest-reservation-manager-[0-9a-f]{6}$", output.services.reservation_manager.name)) && google_service_account.ssf["a"].account_id == "tftest-a" && output.services.a.name == "tftest-a"
    error_message = "names Google does not take as they are must be lower-cased, with - for _, and hashed"
  }

  assert {
    condition     = length(output.services.aVeryLongNameForAnSsfThatGoesOnAndOnBeyondEveryLimitOfGoogleClo.name) == 49 && length(google_service_account.ssf["aVeryLongNameForAnSsfThatGoesOnAndOnBeyondEveryLimitOfGoogleClo"].account_id) == 30
    error_message = "long names must be cut to the limits"
  }

  assert {
    condition     = output.context.tags == tomap({ team = "payments", "ssfkit-environment" = "tftest" }) && output.context.encryption_key == null && length(google_kms_crypto_key_iam_member.service_agents) == 0
    error_message = "the context must carry the labels, and no key"
  }
}

# e-a is shorter than a service account ID (6) or a Firestore database ID (4) may be.
run "lengthens_short_names" {
  command = plan

  variables {
    name           = "e"
    ssfs           = ["a"]
    project_number = "123456789012"
  }

  assert {
    condition     = can(regex("^e-a-[0-9a-f]{6}$", google_service_account.ssf["a"].account_id)) && output.services.a.name == google_service_account.ssf["a"].account_id
    error_message = "short names must get the hash: ${google_service_account.ssf["a"].account_id}, ${output.services.a.name}"
  }
}

run "grants_its_key_to_the_service_agents" {
  variables {
    project_number = "123456789012"
    encryption_key = "projects/tftest-project/locations/europe-west1/keyRings/ssfkit/cryptoKeys/tftest"
  }

  assert {
    condition = { for k, b in google_kms_crypto_key_iam_member.service_agents : k => [b.crypto_key_id, b.role, b.member] } == {
      firestore = [var.encryption_key, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "serviceAccount:service-123456789012@gcp-sa-firestore.iam.gserviceaccount.com"]
      pubsub    = [var.encryption_key, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"]
    }
    error_message = "the Firestore and Pub/Sub service agents must be able to use the environment's key"
  }

  assert {
    condition     = output.context.encryption_key == var.encryption_key
    error_message = "the context must pass the key to the SSFs"
  }
}

run "rejects_a_bigtable_zone_outside_the_region" {
  command = plan

  variables {
    project_number = "123456789012"
    bigtable       = { zone = "us-central1-a" }
  }

  expect_failures = [google_bigtable_instance.state]
}

run "rejects_bigtable_nodes_out_of_order" {
  command = plan

  variables {
    project_number = "123456789012"
    bigtable       = { zone = "europe-west1-b", min_nodes = 3, max_nodes = 2 }
  }

  expect_failures = [var.bigtable]
}

# A Bigtable instance with one autoscaled cluster, encrypted with the key, whose service agent
# may use it; the context names it for the SSF modules.
run "makes_a_bigtable_instance" {
  variables {
    project_number = "123456789012"
    encryption_key = "projects/tftest-project/locations/europe-west1/keyRings/ssfkit/cryptoKeys/tftest"
    bigtable       = { zone = "europe-west1-b" }
  }

  assert {
    condition = (google_bigtable_instance.state[0].name == "tftest-state" && google_bigtable_instance.state[0].deletion_protection &&
      length(google_bigtable_instance.state[0].cluster) == 1 &&
      google_bigtable_instance.state[0].cluster[0].cluster_id == "tftest-state-c1" &&
      google_bigtable_instance.state[0].cluster[0].zone == "europe-west1-b" &&
      google_bigtable_instance.state[0].cluster[0].kms_key_name == var.encryption_key &&
    google_bigtable_instance.state[0].cluster[0].autoscaling_config[0].max_nodes == 3)
    error_message = "the instance must have one encrypted, autoscaled cluster in the zone"
  }

  assert {
    condition     = google_kms_crypto_key_iam_member.service_agents["bigtable"].member == "serviceAccount:service-123456789012@gcp-sa-bigtable.iam.gserviceaccount.com"
    error_message = "the Bigtable service agent must be able to use the environment's key"
  }

  assert {
    condition     = output.context.bigtable == { instance = "tftest-state", cluster = "tftest-state-c1" }
    error_message = "the context must name the instance and its cluster: ${jsonencode(output.context.bigtable)}"
  }
}

# Cloud Scheduler's identity: one service account for the environment's collector jobs, named
# apart from every SSF's, even an SSF named sched.
run "names_the_scheduler" {
  variables {
    project_number = "123456789012"
    ssfs           = ["teller", "sched", "Sched_2"]
  }

  assert {
    condition = (can(regex("^tftest-sched-[0-9a-f]{6}$", google_service_account.scheduler.account_id)) &&
      output.scheduler.email == "${google_service_account.scheduler.account_id}@tftest-project.iam.gserviceaccount.com" &&
      output.scheduler.member == "serviceAccount:${output.scheduler.email}" &&
      output.scheduler.id == "projects/tftest-project/serviceAccounts/${output.scheduler.email}" &&
      output.context.scheduler == output.scheduler &&
    !contains([for a in google_service_account.ssf : a.account_id], google_service_account.scheduler.account_id))
    error_message = "the scheduler's service account is ${google_service_account.scheduler.account_id} (${jsonencode(output.scheduler)})"
  }
}

run "names_the_scheduler_of_a_long_environment" {
  variables {
    name           = "a-long-environment-name1"
    project_number = "123456789012"
  }

  assert {
    condition     = can(regex("^a-long-environmen-sched-[0-9a-f]{6}$", google_service_account.scheduler.account_id)) && length(google_service_account.scheduler.account_id) <= 30
    error_message = "the scheduler's service account ID is ${google_service_account.scheduler.account_id}"
  }
}
