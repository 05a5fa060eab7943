# terraform test for the ssf module, against a mocked Google provider (no credentials, no
# network): an environment from the environment module, validations, a plan whose values are
# all known (names, URLs, settings, bindings), and applies that check the wiring between the
# resources. go test ./tests/terraform runs it.

mock_provider "google" {
  # The service's postcondition checks that Cloud Run serves it at the URL its peers use.
  mock_resource "google_cloud_run_v2_service" {
    defaults = {
      urls = ["https://tftest-counter-123456789012.europe-west1.run.app", "https://tftest-counter-abcdefghij-ew.a.run.app"]
    }
  }
}

variables {
  name     = "counter"
  artifact = "europe-west1-docker.pkg.dev/tftest-project/ssfkit/counter:v1"
}

# The environment: three SSFs, counter (tested), caller (its peer) and other (neither).
run "environment" {
  module {
    source = "../environment"
  }

  variables {
    name           = "tftest"
    project        = "tftest-project"
    region         = "europe-west1"
    ssfs           = ["counter", "caller", "other"]
    project_number = "123456789012"
  }
}

run "environment_with_key" {
  module {
    source = "../environment"
  }

  variables {
    name           = "tftest"
    project        = "tftest-project"
    region         = "europe-west1"
    ssfs           = ["counter", "caller", "other"]
    project_number = "123456789012"
    encryption_key = "projects/tftest-project/locations/europe-west1/keyRings/ssfkit/cryptoKeys/tftest"
  }
}

run "environment_with_bigtable" {
  module {
    source = "../environment"
  }

  variables {
    name           = "tftest"
    project        = "tftest-project"
    region         = "europe-west1"
    ssfs           = ["counter", "caller", "other"]
    project_number = "123456789012"
    bigtable       = { zone = "europe-west1-b" }
  }
}

run "rejects_bigtable_without_an_instance" {
  command = plan

  variables {
    environment = run.environment.context
    state_store = "bigtable"
  }

  expect_failures = [var.state_store]
}

run "rejects_gc_bound_within_function_timeout" {
  command = plan

  variables {
    environment              = run.environment.context
    function_timeout_seconds = 120
    gc_bound_seconds         = 120
  }

  expect_failures = [var.gc_bound_seconds]
}

# The delivery window (Pub/Sub retention + the push's hold, max_receive_count pushes with the
# longest backoff between them) must stay below T: 660 s at the defaults.
run "accepts_gc_bound_just_above_the_delivery_window" {
  command = plan

  variables {
    environment      = run.environment.context
    gc_bound_seconds = 661
  }

  assert {
    condition     = output.delivery_window_seconds == 660
    error_message = "the default delivery window is ${output.delivery_window_seconds} s, want 660 (retention 600 s + a 60 s push)"
  }
}

run "rejects_gc_bound_at_the_delivery_window" {
  command = plan

  variables {
    environment      = run.environment.context
    gc_bound_seconds = 660
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_receive_counts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    environment       = run.environment.context
    max_receive_count = 20 # 20 pushes of 60 s, 19 backoffs of 60 s
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_timeouts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    environment              = run.environment.context
    function_timeout_seconds = 300 # 5 pushes of 300 s, 4 backoffs of 60 s
    relaunch_delay_seconds   = 300
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_names_the_runtime_refuses" {
  command = plan

  variables {
    environment = run.environment.context
    name        = "my-ssf"
  }

  expect_failures = [var.name]
}

run "rejects_ssfs_the_environment_does_not_have" {
  command = plan

  variables {
    environment = run.environment.context
    name        = "stranger"
  }

  expect_failures = [var.name]
}

run "rejects_peers_outside_the_environment" {
  command = plan

  variables {
    environment = run.environment.context
    peers       = ["caller", "stranger"]
  }

  expect_failures = [var.peers]
}

run "rejects_reserved_environment_variables" {
  command = plan

  variables {
    environment           = run.environment.context
    environment_variables = { SSFKIT_STORE = "mem://" }
  }

  expect_failures = [var.environment_variables]
}

run "rejects_cloud_run_environment_variables" {
  command = plan

  variables {
    environment           = run.environment.context
    environment_variables = { PORT = "9000" }
  }

  expect_failures = [var.environment_variables]
}

run "rejects_too_few_deliveries_for_pubsub" {
  command = plan

  variables {
    environment       = run.environment.context
    max_receive_count = 4
  }

  expect_failures = [var.max_receive_count]
}

run "rejects_too_many_deliveries_for_pubsub" {
  command = plan

  variables {
    environment       = run.environment.context
    max_receive_count = 101
  }

  expect_failures = [var.max_receive_count]
}

run "rejects_artifacts_that_are_not_images" {
  command = plan

  variables {
    environment = run.environment.context
    artifact    = "bank.zip"
  }

  expect_failures = [var.artifact]
}

run "rejects_timeouts_beyond_cloud_run" {
  command = plan

  variables {
    environment              = run.environment.context
    function_timeout_seconds = 3601
    relaunch_delay_seconds   = 3601
    gc_bound_seconds         = 86400 # above the delivery window such a timeout would need
    key_retention_seconds    = 86401
  }

  expect_failures = [var.function_timeout_seconds]
}

run "rejects_collector_periods_cron_cannot_step" {
  command = plan

  variables {
    environment                     = run.environment.context
    garbage_collector_every_minutes = 90
  }

  expect_failures = [var.garbage_collector_every_minutes]
}

run "rejects_invalid_labels" {
  command = plan

  variables {
    environment = run.environment.context
    tags        = { Team = "Payments" }
  }

  expect_failures = [var.tags]
}

# Everything the module decides is known at plan time.
run "plans" {
  command = plan

  variables {
    environment           = run.environment.context
    peers                 = ["caller"]
    environment_variables = { GREETING = "hello" }
    tags                  = { team = "payments" }
  }

  assert {
    condition     = output.store_url == "firestore://tftest-project/state?database=tftest-counter"
    error_message = "store_url is ${output.store_url}"
  }

  assert {
    condition     = output.queue_url == "pubsub://tftest-project/tftest-counter?subscription=tftest-counter"
    error_message = "queue_url is ${output.queue_url}"
  }

  assert {
    condition     = output.dead_letter_queue_url == "pubsub://tftest-project/tftest-counter-dead-letter?subscription=tftest-counter-dead-letter"
    error_message = "dead_letter_queue_url is ${output.dead_letter_queue_url}"
  }

  assert {
    # function_id is the service's ID, known once it exists.
    condition = { for k, v in output.ssfkit_config : k => v if k != "function_id" } == {
      name                   = "counter"
      store                  = "firestore://tftest-project/state?database=tftest-counter"
      queue                  = "pubsub://tftest-project/tftest-counter?subscription=tftest-counter"
      dead_letter_queue      = "pubsub://tftest-project/tftest-counter-dead-letter?subscription=tftest-counter-dead-letter"
      lifetime_seconds       = 59
      gc_bound_seconds       = 900
      relaunch_delay_seconds = 120
    }
    error_message = "ssfkit_config is ${jsonencode(output.ssfkit_config)}"
  }

  assert {
    condition     = output.identity == "tftest-counter@tftest-project.iam.gserviceaccount.com" && google_cloud_run_v2_service.this.template[0].service_account == output.identity
    error_message = "the service must run as the SSF's service account from the environment"
  }

  # The settings the runtime reads, with the application's, on the one service.
  assert {
    condition = { for e in google_cloud_run_v2_service.this.template[0].containers[0].env : e.name => e.value } == {
      GREETING                      = "hello"
      SSFKIT_SSF                    = "counter"
      SSFKIT_ENVIRONMENT            = "tftest"
      SSFKIT_STORE                  = "firestore://tftest-project/state?database=tftest-counter"
      SSFKIT_QUEUE                  = "pubsub://tftest-project/tftest-counter?subscription=tftest-counter"
      SSFKIT_LIFETIME_SECONDS       = "59"
      SSFKIT_GC_BOUND_SECONDS       = "900"
      SSFKIT_RELAUNCH_DELAY_SECONDS = "120"
      SSFKIT_KEY_RETENTION_SECONDS  = "86400"
      SSFKIT_MAX_ATTEMPTS           = "10"
      SSFKIT_MAX_RECEIVE_COUNT      = "5"
      SSFKIT_DEAD_LETTER_QUEUE      = "pubsub://tftest-project/tftest-counter-dead-letter"
      SSFKIT_PEERS                  = jsonencode({ caller = "https://tftest-caller-123456789012.europe-west1.run.app" })
      SSFKIT_AUDIENCE               = "https://tftest-counter-123456789012.europe-west1.run.app"
      SSFKIT_CALLERS                = "tftest-caller@tftest-project.iam.gserviceaccount.com,tftest-counter@tftest-project.iam.gserviceaccount.com"
      SSFKIT_PUSH_CALLER            = "tftest-counter@tftest-project.iam.gserviceaccount.com"
      SSFKIT_SCHEDULER_CALLER       = run.environment.context.scheduler.email
    }
    error_message = "the service's environment is ${jsonencode(google_cloud_run_v2_service.this.template[0].containers[0].env)}"
  }

  assert {
    condition     = google_cloud_run_v2_service.this.name == "tftest-counter" && google_cloud_run_v2_service.this.template[0].containers[0].image == var.artifact && google_cloud_run_v2_service.this.template[0].timeout == "60s"
    error_message = "the service must run the artifact with the function timeout"
  }

  assert {
    condition     = google_cloud_run_v2_service.this.template[0].containers[0].resources[0].limits == tomap({ cpu = "1", memory = "256Mi" })
    error_message = "the service's limits are ${jsonencode(google_cloud_run_v2_service.this.template[0].containers[0].resources[0].limits)}"
  }

  assert {
    condition     = google_cloud_run_v2_service.this.labels == tomap({ "ssfkit-environment" = "tftest", "ssfkit-ssf" = "counter", team = "payments" }) && google_pubsub_topic.this.labels == google_cloud_run_v2_service.this.labels
    error_message = "the environment's labels, the SSF's and the tags must label the resources"
  }

  # Backups and protection by default.
  assert {
    condition     = google_firestore_database.this[0].point_in_time_recovery_enablement == "POINT_IN_TIME_RECOVERY_ENABLED" && google_firestore_database.this[0].type == "FIRESTORE_NATIVE" && google_firestore_database.this[0].location_id == "europe-west1"
    error_message = "the database must be a native Firestore database in the region with point-in-time recovery"
  }

  assert {
    condition     = google_firestore_database.this[0].delete_protection_state == "DELETE_PROTECTION_ENABLED" && google_firestore_database.this[0].deletion_policy == "PREVENT" && google_cloud_run_v2_service.this.deletion_protection
    error_message = "the state and the service must be protected from deletion by default"
  }

  assert {
    condition     = length(google_firestore_database.this[0].cmek_config) == 0 && google_pubsub_topic.this.kms_key_name == null && length(google_kms_crypto_key_iam_member.own_key) == 0
    error_message = "without a key, Google-managed encryption and no key grants"
  }

  # The queue pushes to the service's /queue route with the SSF's token, and dead-letters.
  assert {
    condition     = google_pubsub_subscription.this.push_config[0].push_endpoint == "https://tftest-counter-123456789012.europe-west1.run.app/queue" && google_pubsub_subscription.this.push_config[0].oidc_token[0].service_account_email == output.identity && google_pubsub_subscription.this.push_config[0].oidc_token[0].audience == "https://tftest-counter-123456789012.europe-west1.run.app"
    error_message = "the subscription must push to /queue with an ID token of the SSF for its service"
  }

  assert {
    condition     = google_pubsub_subscription.this.dead_letter_policy[0].max_delivery_attempts == 5 && google_pubsub_subscription.this.ack_deadline_seconds == 60
    error_message = "the subscription must dead-letter after max_receive_count deliveries, with the function's timeout as ack deadline"
  }

  # No start is pushed later than T: the subscription keeps it 10 minutes (Pub/Sub's least),
  # retries within a minute, and the topic keeps nothing to replay.
  assert {
    condition = (google_pubsub_subscription.this.message_retention_duration == "600s" &&
      google_pubsub_subscription.this.retry_policy[0].minimum_backoff == "10s" &&
      google_pubsub_subscription.this.retry_policy[0].maximum_backoff == "60s" &&
      google_pubsub_topic.this.message_retention_duration == null &&
    output.delivery_window_seconds == 660 && output.delivery_window_seconds < output.ssfkit_config.gc_bound_seconds)
    error_message = "the subscription keeps starts ${google_pubsub_subscription.this.message_retention_duration}, retries ${jsonencode(google_pubsub_subscription.this.retry_policy)}, window ${output.delivery_window_seconds} s"
  }

  assert {
    condition     = google_pubsub_subscription.this.expiration_policy[0].ttl == "" && google_pubsub_subscription.dead_letter.expiration_policy[0].ttl == "" && google_pubsub_subscription.dead_letter.message_retention_duration == "604800s" && length(google_pubsub_subscription.dead_letter.push_config) == 0
    error_message = "dead letters must be kept 7 days on a pull subscription, and neither subscription may expire"
  }

  # The collectors: POSTs to their routes every N minutes, with the scheduler's token, no retries.
  assert {
    condition     = google_cloud_scheduler_job.collector["intent_collector"].schedule == "*/1 * * * *" && google_cloud_scheduler_job.collector["intent_collector"].http_target[0].uri == "https://tftest-counter-123456789012.europe-west1.run.app/intent-collector"
    error_message = "the intent collector must run every minute on its route"
  }

  assert {
    condition     = google_cloud_scheduler_job.collector["garbage_collector"].schedule == "*/5 * * * *" && google_cloud_scheduler_job.collector["garbage_collector"].http_target[0].uri == "https://tftest-counter-123456789012.europe-west1.run.app/garbage-collector"
    error_message = "the garbage collector must run every 5 minutes on its route"
  }

  assert {
    condition = alltrue([for j in google_cloud_scheduler_job.collector :
      j.http_target[0].http_method == "POST" && j.http_target[0].oidc_token[0].service_account_email == run.environment.context.scheduler.email && j.http_target[0].oidc_token[0].audience == "https://tftest-counter-123456789012.europe-west1.run.app" && j.retry_config[0].retry_count == 0 && j.attempt_deadline == "60s" && j.region == "europe-west1"
    ])
    error_message = "the scheduler must POST with the scheduler's token for the service, no retries, the function's timeout as deadline"
  }

  assert {
    condition     = output.collector_function_names == { intent_collector = "tftest-counter-intent-collector", garbage_collector = "tftest-counter-garbage-collector" }
    error_message = "collector_function_names is ${jsonencode(output.collector_function_names)}"
  }

  # The identity reaches its own database, topic, subscription and service, and nothing else.
  assert {
    condition     = google_project_iam_member.state[0].role == "roles/datastore.user" && google_project_iam_member.state[0].member == "serviceAccount:tftest-counter@tftest-project.iam.gserviceaccount.com"
    error_message = "the SSF's identity must be a Firestore user"
  }

  assert {
    condition     = google_project_iam_member.state[0].condition[0].expression == "resource.name == \"projects/tftest-project/databases/tftest-counter\" || resource.name.startsWith(\"projects/tftest-project/databases/tftest-counter/\")"
    error_message = "the Firestore grant must be conditioned on the SSF's own database: ${google_project_iam_member.state[0].condition[0].expression}"
  }

  assert {
    condition     = google_pubsub_topic_iam_member.publisher.topic == google_pubsub_topic.this.name && google_pubsub_topic_iam_member.publisher.member == google_project_iam_member.state[0].member && google_pubsub_subscription_iam_member.subscriber.subscription == google_pubsub_subscription.this.name && google_pubsub_subscription_iam_member.subscriber.member == google_project_iam_member.state[0].member
    error_message = "the identity must publish to and consume its own queue"
  }

  assert {
    condition     = keys(google_cloud_run_v2_service_iam_member.invoker) == ["(scheduler)", "caller", "counter"] && alltrue([for k, b in google_cloud_run_v2_service_iam_member.invoker : b.name == "tftest-counter" && b.role == "roles/run.invoker" && b.member == (k == "(scheduler)" ? run.environment.context.scheduler.member : run.environment.identities[k].member)])
    error_message = "only the SSF, its peer and the scheduler may invoke its service"
  }

  assert {
    condition = alltrue([for m in concat(
      [google_project_iam_member.state[0].member, google_pubsub_topic_iam_member.publisher.member, google_pubsub_subscription_iam_member.subscriber.member],
      [for b in google_cloud_run_v2_service_iam_member.invoker : b.member],
    ) : m != run.environment.identities.other.member])
    error_message = "an SSF that is not a peer must be granted nothing"
  }

  assert {
    condition     = google_pubsub_topic_iam_member.dead_letter_agent.topic == google_pubsub_topic.dead_letter.name && google_pubsub_subscription_iam_member.dead_letter_agent.subscription == google_pubsub_subscription.this.name && google_service_account_iam_member.push_token.service_account_id == run.environment.identities.counter.id && alltrue([for m in [google_pubsub_topic_iam_member.dead_letter_agent.member, google_pubsub_subscription_iam_member.dead_letter_agent.member, google_service_account_iam_member.push_token.member] : m == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"])
    error_message = "Pub/Sub's service agent must be able to dead-letter and sign the pushes, on the SSF's resources only"
  }

  assert {
    condition = alltrue([for m in concat(
      [google_project_iam_member.state[0].member, google_pubsub_topic_iam_member.publisher.member, google_pubsub_subscription_iam_member.subscriber.member, google_pubsub_topic_iam_member.dead_letter_agent.member, google_pubsub_subscription_iam_member.dead_letter_agent.member, google_service_account_iam_member.push_token.member],
      [for b in google_cloud_run_v2_service_iam_member.invoker : b.member],
    ) : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "nothing may be granted to allUsers or allAuthenticatedUsers"
  }

  assert {
    condition     = google_cloud_run_v2_service.this.ingress == "INGRESS_TRAFFIC_ALL" && google_cloud_run_v2_service.this.invoker_iam_disabled == false
    error_message = "the service must check that its callers may invoke it"
  }
}

# Against the mocked provider: the wiring between resources, by their (mocked) IDs.
run "applies" {
  variables {
    environment = run.environment.context
    peers       = ["caller"]
  }

  assert {
    condition     = google_pubsub_subscription.this.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter.id && google_pubsub_subscription.this.dead_letter_policy[0].max_delivery_attempts == var.max_receive_count
    error_message = "the queue must dead-letter into its dead-letter topic after max_receive_count deliveries"
  }

  assert {
    condition     = google_pubsub_subscription.this.topic == google_pubsub_topic.this.id && google_pubsub_subscription.dead_letter.topic == google_pubsub_topic.dead_letter.id
    error_message = "the subscriptions must read their own topics"
  }

  assert {
    condition     = output.table_id == google_firestore_database.this[0].id && output.queue_id == google_pubsub_topic.this.id && output.function_id == google_cloud_run_v2_service.this.id && output.function_name == "tftest-counter"
    error_message = "the IDs must be the database's, topic's and service's"
  }

  assert {
    condition     = output.ssfkit_config.gc_bound_seconds > output.ssfkit_config.lifetime_seconds
    error_message = "the GC bound must exceed the lifetime"
  }

  assert {
    condition     = google_firestore_database.this[0].delete_protection_state == "DELETE_PROTECTION_ENABLED" && google_firestore_database.this[0].point_in_time_recovery_enablement == "POINT_IN_TIME_RECOVERY_ENABLED"
    error_message = "the applied database must be protected and backed up"
  }

  assert {
    condition     = keys(google_cloud_run_v2_service_iam_member.invoker) == ["(scheduler)", "caller", "counter"] && alltrue([for b in google_cloud_run_v2_service_iam_member.invoker : b.name == google_cloud_run_v2_service.this.name])
    error_message = "the invokers must be bound on the SSF's own service"
  }
}

# A throwaway SSF, with long executions, a large memory, hourly collection and its own key.
run "throwaway_with_own_key" {
  variables {
    environment                     = run.environment.context
    deletion_protection             = false
    point_in_time_recovery          = false
    function_timeout_seconds        = 3600
    relaunch_delay_seconds          = 3600
    gc_bound_seconds                = 369541 # the delivery window below, and a second
    key_retention_seconds           = 369542
    memory_mb                       = 8192
    garbage_collector_every_minutes = 60
    max_receive_count               = 100
    encryption_key                  = "projects/tftest-project/locations/europe-west1/keyRings/ssfkit/cryptoKeys/counter"
  }

  assert {
    condition     = google_firestore_database.this[0].delete_protection_state == "DELETE_PROTECTION_DISABLED" && google_firestore_database.this[0].deletion_policy == "DELETE" && !google_cloud_run_v2_service.this.deletion_protection
    error_message = "deletion_protection = false must let Terraform delete the database and the service"
  }

  assert {
    condition     = google_firestore_database.this[0].point_in_time_recovery_enablement == "POINT_IN_TIME_RECOVERY_DISABLED"
    error_message = "point_in_time_recovery = false must turn it off"
  }

  assert {
    condition     = google_pubsub_subscription.this.ack_deadline_seconds == 600 && google_pubsub_subscription.this.dead_letter_policy[0].max_delivery_attempts == 100
    error_message = "the ack deadline is at most Pub/Sub's 600 s"
  }

  # 100 pushes held up to the 3600 s request timeout, 60 s apart: kept that long, plus one hold.
  assert {
    condition     = google_pubsub_subscription.this.message_retention_duration == "365940s" && output.delivery_window_seconds == 369540
    error_message = "retention ${google_pubsub_subscription.this.message_retention_duration}, window ${output.delivery_window_seconds} s"
  }

  assert {
    condition     = alltrue([for j in google_cloud_scheduler_job.collector : j.attempt_deadline == "1800s"]) && google_cloud_scheduler_job.collector["garbage_collector"].schedule == "0 * * * *"
    error_message = "the scheduler's deadline is at most 1800 s, and 60 minutes is hourly"
  }

  assert {
    condition     = google_cloud_run_v2_service.this.template[0].timeout == "3600s" && google_cloud_run_v2_service.this.template[0].containers[0].resources[0].limits == tomap({ cpu = "2", memory = "8192Mi" }) && output.ssfkit_config.lifetime_seconds == 3599
    error_message = "the service must take the timeout, and the CPUs its memory needs"
  }

  assert {
    condition     = google_firestore_database.this[0].cmek_config[0].kms_key_name == var.encryption_key && google_pubsub_topic.this.kms_key_name == var.encryption_key && google_pubsub_topic.dead_letter.kms_key_name == var.encryption_key
    error_message = "the database and both topics must be encrypted with the SSF's key"
  }

  assert {
    condition = { for k, b in google_kms_crypto_key_iam_member.own_key : k => [b.crypto_key_id, b.role, b.member] } == {
      firestore = [var.encryption_key, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "serviceAccount:service-123456789012@gcp-sa-firestore.iam.gserviceaccount.com"]
      pubsub    = [var.encryption_key, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"]
    }
    error_message = "the Firestore and Pub/Sub service agents must be able to use the SSF's own key"
  }
}

# The environment's key: the SSF encrypts with it, and the environment (not the SSF) grants it.
run "environment_key" {
  variables {
    environment         = run.environment_with_key.context
    deletion_protection = false
  }

  assert {
    condition     = google_firestore_database.this[0].cmek_config[0].kms_key_name == run.environment_with_key.context.encryption_key && google_pubsub_topic.this.kms_key_name == run.environment_with_key.context.encryption_key
    error_message = "without a key of its own, the SSF must use the environment's"
  }

  assert {
    condition     = length(google_kms_crypto_key_iam_member.own_key) == 0
    error_message = "the environment grants its key; the SSF must not grant it again"
  }
}

# On Bigtable: a table, an app profile and a table-level grant of the SSF's own, no Firestore.
run "plans_on_bigtable" {
  command = plan

  variables {
    environment = run.environment_with_bigtable.context
    state_store = "bigtable"
  }

  assert {
    condition     = output.store_url == "bigtable://tftest-project/tftest-state/tftest-counter?app_profile=tftest-counter&check_routing=false" && output.ssfkit_config.store == output.store_url
    error_message = "store_url is ${output.store_url}"
  }

  assert {
    condition     = length(google_firestore_database.this) == 0 && length(google_project_iam_member.state) == 0
    error_message = "an SSF on Bigtable must have no Firestore database and no project-level grant"
  }

  assert {
    condition = (google_bigtable_table.state[0].instance_name == "tftest-state" && google_bigtable_table.state[0].name == "tftest-counter" &&
      google_bigtable_table.state[0].deletion_protection == "PROTECTED" &&
      [for f in google_bigtable_table.state[0].column_family : f.family] == ["d"] &&
    [for b in google_bigtable_table.state[0].automated_backup_policy : [b.retention_period, b.frequency]] == [["168h", "24h"]])
    error_message = "the table must be the SSF's own, protected, backed up daily, with the driver's column family d"
  }

  assert {
    condition = (google_bigtable_app_profile.state[0].app_profile_id == "tftest-counter" &&
      google_bigtable_app_profile.state[0].single_cluster_routing[0].cluster_id == "tftest-state-c1" &&
      google_bigtable_app_profile.state[0].single_cluster_routing[0].allow_transactional_writes &&
    google_bigtable_app_profile.state[0].multi_cluster_routing_use_any != true)
    error_message = "the app profile must route to the one cluster and allow single-row transactions"
  }

  assert {
    condition     = google_bigtable_table_iam_member.state[0].table == "tftest-counter" && google_bigtable_table_iam_member.state[0].role == "roles/bigtable.user" && google_bigtable_table_iam_member.state[0].member == "serviceAccount:tftest-counter@tftest-project.iam.gserviceaccount.com"
    error_message = "the SSF's identity must be granted its own table, at the table"
  }
}

run "rejects_relaunch_delay_below_function_timeout" {
  command = plan

  variables {
    environment            = run.environment.context
    relaunch_delay_seconds = 30
  }

  expect_failures = [var.relaunch_delay_seconds]
}

run "rejects_key_retention_within_gc_bound" {
  command = plan

  variables {
    environment           = run.environment.context
    key_retention_seconds = 900
  }

  expect_failures = [var.key_retention_seconds]
}

run "rejects_max_attempts_below_one" {
  command = plan

  variables {
    environment  = run.environment.context
    max_attempts = 0
  }

  expect_failures = [var.max_attempts]
}

run "environment_with_provenance" {
  module {
    source = "../environment"
  }

  variables {
    name                      = "tftest"
    project                   = "tftest-project"
    region                    = "europe-west1"
    ssfs                      = ["counter", "caller", "other"]
    project_number            = "123456789012"
    provenance_retention_days = 30
  }

  assert {
    condition     = output.provenance_sink == "gs://tftest-provenance-123456789012?prefix=provenance"
    error_message = "the provenance sink is ${output.provenance_sink}"
  }

  assert {
    condition     = one([for r in google_storage_bucket.provenance[0].lifecycle_rule : one(r.condition).age]) == 30 && google_storage_bucket.provenance[0].public_access_prevention == "enforced" && google_storage_bucket.provenance[0].uniform_bucket_level_access
    error_message = "the provenance bucket must be private and keep objects 30 days"
  }
}

run "rejects_provenance_without_a_sink" {
  command = plan

  variables {
    environment = run.environment.context
    provenance  = "metadata"
  }

  expect_failures = [var.provenance]
}

# Provenance: the settings reach the service, and the identity's grant on the bucket is confined
# to this SSF's three partitions by its condition.
run "grants_its_own_provenance_partitions" {
  command = plan

  variables {
    environment     = run.environment_with_provenance.context
    provenance      = "full"
    provenance_sink = run.environment_with_provenance.provenance_sink
  }

  assert {
    condition = length(setintersection([for e in google_cloud_run_v2_service.this.template[0].containers[0].env : "${e.name}=${e.value}"],
    ["SSFKIT_PROVENANCE=full", "SSFKIT_PROVENANCE_SINK=gs://tftest-provenance-123456789012?prefix=provenance"])) == 2
    error_message = "the service must get SSFKIT_PROVENANCE and SSFKIT_PROVENANCE_SINK"
  }

  assert {
    condition = (google_storage_bucket_iam_member.provenance[0].bucket == "tftest-provenance-123456789012" &&
      google_storage_bucket_iam_member.provenance[0].role == "roles/storage.objectUser" &&
      google_storage_bucket_iam_member.provenance[0].member == "serviceAccount:tftest-counter@tftest-project.iam.gserviceaccount.com" &&
    google_storage_bucket_iam_member.provenance[0].condition[0].expression == "resource.name.startsWith(\"projects/_/buckets/tftest-provenance-123456789012/objects/provenance/invocations/ssf=counter/\") || resource.name.startsWith(\"projects/_/buckets/tftest-provenance-123456789012/objects/provenance/data_events/ssf=counter/\") || resource.name.startsWith(\"projects/_/buckets/tftest-provenance-123456789012/objects/provenance/calls/ssf=counter/\")")
    error_message = "the provenance grant is ${jsonencode(google_storage_bucket_iam_member.provenance)}"
  }
}
