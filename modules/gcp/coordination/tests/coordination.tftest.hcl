# terraform test for the coordination module, against a mocked Google provider (no credentials,
# no network): an environment from the environment module, validations, a plan whose names,
# URLs, settings and grants are all known, and an apply that checks the wiring between the
# resources. go test ./tests/terraform runs it.

mock_provider "google" {}

variables {
  name     = "zk"
  artifact = "europe-west1-docker.pkg.dev/tftest-project/ssfkit/coord:v1"
}

run "environment" {
  module {
    source = "../environment"
  }

  variables {
    name           = "tftest"
    project        = "tftest-project"
    region         = "europe-west1"
    ssfs           = ["counter"]
    project_number = "123456789012"
  }
}

run "rejects_names_with_underscores" {
  command = plan

  variables {
    environment = run.environment.context
    name        = "my_zk"
  }

  expect_failures = [var.name]
}

run "rejects_fewer_deliveries_than_pubsub_allows" {
  command = plan

  variables {
    environment       = run.environment.context
    max_receive_count = 4
  }

  expect_failures = [var.max_receive_count]
}

run "rejects_heartbeats_that_cron_cannot_space" {
  command = plan

  variables {
    environment             = run.environment.context
    heartbeat_every_minutes = 90
  }

  expect_failures = [var.heartbeat_every_minutes]
}

run "plans_known_names_settings_and_grants" {
  command = plan

  variables {
    environment         = run.environment.context
    deletion_protection = false
  }

  assert {
    condition     = output.queue_url == "pubsub://tftest-project/tftest-zk-coord?subscription=tftest-zk-coord" && output.dead_letter_queue_url == "pubsub://tftest-project/tftest-zk-coord-dead-letter?subscription=tftest-zk-coord-dead-letter"
    error_message = "queue ${output.queue_url}, dead letters ${output.dead_letter_queue_url}"
  }

  assert {
    condition     = output.store_url == "firestore://tftest-project/coord?database=tftest-zk-coord" && startswith(output.blobs_url, "gs://tftest-zk-coord-")
    error_message = "store ${output.store_url}, blobs ${output.blobs_url}"
  }

  assert {
    condition     = keys(output.coord_config) == ["blobs", "dead_letter_queue", "environment", "function_ids", "queue", "store"] && output.coord_config.environment == "tftest" && length(output.coord_config.function_ids) == 2
    error_message = "coord_config is ${jsonencode(output.coord_config)}"
  }

  # Each service has its role and the service's settings, and admits its platform caller.
  assert {
    condition = alltrue([for k, s in google_cloud_run_v2_service.this : (
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_COORD_ROLE=${k}") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_AUDIENCE=https://tftest-zk-coord-${k}-123456789012.europe-west1.run.app") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_COORD_STORE=${output.store_url}") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_COORD_QUEUE=${output.queue_url}") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_COORD_BLOBS=${output.blobs_url}") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_COORD_SNAPSHOT_EVERY=10000") &&
      contains([for e in s.template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_ENVIRONMENT=tftest")
    )])
    error_message = "the services' settings are wrong"
  }

  assert {
    condition = (contains([for e in google_cloud_run_v2_service.this["writer"].template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_PUSH_CALLER=${output.identity}") &&
    contains([for e in google_cloud_run_v2_service.this["heartbeat"].template[0].containers[0].env : "${e.name}=${e.value}"], "SSFKIT_SCHEDULER_CALLER=${run.environment.context.scheduler.email}"))
    error_message = "the writer must admit its push, the heartbeat the environment's scheduler"
  }

  assert {
    condition     = google_pubsub_subscription.this.push_config[0].push_endpoint == "https://tftest-zk-coord-writer-123456789012.europe-west1.run.app/queue" && google_pubsub_subscription.this.push_config[0].oidc_token[0].service_account_email == output.identity
    error_message = "the subscription must push to the writer's /queue with the writer's token"
  }

  assert {
    condition     = google_cloud_scheduler_job.heartbeat.http_target[0].uri == "https://tftest-zk-coord-heartbeat-123456789012.europe-west1.run.app/heartbeat" && google_cloud_scheduler_job.heartbeat.schedule == "*/1 * * * *"
    error_message = "the heartbeat must be posted every minute"
  }

  assert {
    condition     = google_cloud_run_v2_service_iam_member.invoker["writer"].member == "serviceAccount:${output.identity}" && google_cloud_run_v2_service_iam_member.invoker["heartbeat"].member == run.environment.context.scheduler.member && length(google_cloud_run_v2_service_iam_member.invoker) == 2
    error_message = "only the push may invoke the writer, only the scheduler the heartbeat"
  }

  # Least privilege: the bucket is read by the client, read and written by the functions; the
  # client publishes requests, the writer consumes them; every identity reaches its database only.
  assert {
    condition = (google_storage_bucket_iam_member.this["client"].role == "roles/storage.objectViewer" &&
      google_storage_bucket_iam_member.this["writer"].role == "roles/storage.objectUser" &&
      google_storage_bucket_iam_member.this["heartbeat"].role == "roles/storage.objectUser" &&
      google_pubsub_topic_iam_member.client.member == "serviceAccount:${output.client_identity}" &&
      google_storage_bucket_iam_member.this["client"].member == "serviceAccount:${output.client_identity}" &&
    google_pubsub_subscription_iam_member.writer.member == "serviceAccount:${output.identity}")
    error_message = "the grants are not the least each identity needs"
  }

  assert {
    condition     = alltrue([for k, m in google_project_iam_member.store : m.role == "roles/datastore.user" && strcontains(m.condition[0].expression, "projects/tftest-project/databases/tftest-zk-coord\"")])
    error_message = "every identity must reach its own database only"
  }

  assert {
    condition     = google_storage_bucket.this.public_access_prevention == "enforced" && google_storage_bucket.this.uniform_bucket_level_access && google_storage_bucket.this.force_destroy
    error_message = "the bucket must be private (and, unprotected, emptied by a destroy)"
  }

  assert {
    condition     = google_pubsub_subscription.this.dead_letter_policy[0].max_delivery_attempts == 5
    error_message = "failing requests must be dead-lettered after max_receive_count pushes"
  }
}

run "protected_by_default" {
  command = plan

  variables {
    environment = run.environment.context
  }

  assert {
    condition     = google_firestore_database.this.delete_protection_state == "DELETE_PROTECTION_ENABLED" && google_firestore_database.this.deletion_policy == "PREVENT" && !google_storage_bucket.this.force_destroy && google_firestore_database.this.point_in_time_recovery_enablement == "POINT_IN_TIME_RECOVERY_ENABLED"
    error_message = "the database must be protected and backed up, and the bucket not emptied by a destroy"
  }
}

run "with_a_key_of_its_own" {
  command = plan

  variables {
    environment    = run.environment.context
    encryption_key = "projects/tftest-project/locations/europe-west1/keyRings/ssfkit/cryptoKeys/coord"
  }

  assert {
    condition     = keys(google_kms_crypto_key_iam_member.key) == ["firestore", "pubsub", "storage"] && google_storage_bucket.this.encryption[0].default_kms_key_name == var.encryption_key && google_pubsub_topic.this.kms_key_name == var.encryption_key
    error_message = "the bucket, topics and database must be encrypted with the key, which their service agents may use"
  }
}

run "applies" {
  variables {
    environment         = run.environment.context
    deletion_protection = false
  }

  assert {
    condition     = output.identity == "${google_service_account.this["writer"].account_id}@tftest-project.iam.gserviceaccount.com" && output.client_identity == "${google_service_account.this["client"].account_id}@tftest-project.iam.gserviceaccount.com" && output.writer_function_name == "tftest-zk-coord-writer" && output.heartbeat_function_name == "tftest-zk-coord-heartbeat"
    error_message = "the outputs must name the writer's and the client's service accounts and both services"
  }

  assert {
    condition     = google_pubsub_subscription.this.topic == google_pubsub_topic.this.id && output.queue_id == google_pubsub_topic.this.id && output.table_id == google_firestore_database.this.id
    error_message = "the subscription must read the request topic"
  }

  assert {
    condition     = google_pubsub_subscription.this.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter.id
    error_message = "failing requests must go to the dead-letter topic"
  }

  assert {
    condition     = alltrue([for k, s in google_cloud_run_v2_service.this : s.template[0].service_account == "${google_service_account.this[k].account_id}@tftest-project.iam.gserviceaccount.com"])
    error_message = "each service must run as its own service account"
  }
}
