# One stateful serverless function on Google Cloud: its Firestore database or Bigtable table
# (single-table design: the runtime keeps the linked DAALs, shadows, intents, read and invoke
# logs in one table keyed by partition and sort key, see docs/protocol.md), its Pub/Sub topic with a dead-letter topic,
# the Cloud Run service that serves the SSF and both collectors, the collectors' schedules, and
# the bindings that let its identity (the environment's service account for it) reach these and
# nothing of another SSF.

locals {
  env     = var.environment
  project = local.env.project
  region  = local.env.region

  # Names and URLs come from the environment, which names every SSF's service the same way
  # (so that peers know each other's URLs); the SSF's own resources are named after its service.
  identity = local.env.identities[var.name]
  prefix   = local.env.services[var.name].name
  url      = local.env.services[var.name].url

  encryption_key = var.encryption_key != null ? var.encryption_key : local.env.encryption_key
  # A key of the SSF's own (not the environment's, which the environment grants) is granted here.
  own_key = var.encryption_key != null && var.encryption_key != local.env.encryption_key

  labels = merge(local.env.tags, var.tags, { "ssfkit-ssf" = lower(var.name) })

  pubsub_agent = "serviceAccount:service-${local.env.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  # The service agent that encrypts the state with the key.
  state_agent = "serviceAccount:service-${local.env.project_number}@gcp-sa-${var.state_store}.iam.gserviceaccount.com"

  on_bigtable = var.state_store == "bigtable"
  # The driver need not read the app profile to check its routing (check_routing=false, which
  # would need an instance-level grant): this module makes it single-cluster, and the
  # consistency policy checks plans for it.
  store_url = (local.on_bigtable ?
    "bigtable://${local.project}/${local.env.bigtable.instance}/${google_bigtable_table.state[0].name}?app_profile=${google_bigtable_app_profile.state[0].app_profile_id}&check_routing=false" :
  "firestore://${local.project}/state?database=${google_firestore_database.this[0].name}")

  # The push subscription is made after the service it pushes to, so the service's settings name
  # it rather than refer to it.
  subscription          = local.prefix
  queue_url             = "pubsub://${local.project}/${google_pubsub_topic.this.name}?subscription=${local.subscription}"
  dead_letter_queue_url = "pubsub://${local.project}/${google_pubsub_topic.dead_letter.name}?subscription=${google_pubsub_subscription.dead_letter.name}"

  # The runtime's configuration, the same for the SSF and its collectors (one service). The
  # lifetime leaves the function a second to report before Cloud Run ends the request.
  runtime_environment = {
    SSFKIT_SSF                    = var.name
    SSFKIT_ENVIRONMENT            = local.env.name
    SSFKIT_STORE                  = local.store_url
    SSFKIT_QUEUE                  = local.queue_url
    SSFKIT_LIFETIME_SECONDS       = tostring(var.function_timeout_seconds - 1)
    SSFKIT_GC_BOUND_SECONDS       = tostring(var.gc_bound_seconds)
    SSFKIT_RELAUNCH_DELAY_SECONDS = tostring(var.relaunch_delay_seconds)
    SSFKIT_KEY_RETENTION_SECONDS  = tostring(var.key_retention_seconds)
    SSFKIT_MAX_ATTEMPTS           = tostring(var.max_attempts)
    SSFKIT_MAX_RECEIVE_COUNT      = tostring(var.max_receive_count)
    SSFKIT_DEAD_LETTER_QUEUE      = "pubsub://${local.project}/${google_pubsub_topic.dead_letter.name}" # send only
    SSFKIT_PEERS                  = jsonencode({ for p in var.peers : p => local.env.services[p].url })
    # Who the host admits (adapters/host/httphost, GoogleIDTokenVerifier): ID tokens for its
    # own URL, of itself and its peers on /ssf and /spawn, of the push subscription's service
    # account on /queue, of the scheduler's on the collector routes.
    SSFKIT_AUDIENCE         = local.url
    SSFKIT_CALLERS          = join(",", [for s in keys(local.invokers) : local.env.identities[s].email])
    SSFKIT_PUSH_CALLER      = local.identity.email
    SSFKIT_SCHEDULER_CALLER = local.env.scheduler.email
  }

  # Provenance: the garbage collector puts one object per table and batch under
  # PREFIX/TABLE/ssf=NAME/ (adapters/provenance/blobsink); the identity's grant on the bucket is
  # confined to those three partitions by a condition on object names.
  provenance        = var.provenance != "off"
  provenance_bucket = local.provenance ? regex("^gs://([^?]+)", var.provenance_sink)[0] : null
  provenance_prefix = local.provenance ? trim(try(regex("[?&]prefix=([^&]*)", var.provenance_sink)[0], ""), "/") : ""
  provenance_condition = local.provenance ? join(" || ", [for table in ["invocations", "data_events", "calls"] :
    "resource.name.startsWith(\"projects/_/buckets/${local.provenance_bucket}/objects/${local.provenance_prefix == "" ? "" : "${local.provenance_prefix}/"}${table}/ssf=${var.name}/\")"
  ]) : null

  # Cloud Run's CPU follows memory: 1 CPU allows up to 4 GiB, 2 up to 8, 4 up to 16, 8 up to 32.
  cpu = var.memory_mb <= 4096 ? "1" : var.memory_mb <= 8192 ? "2" : var.memory_mb <= 16384 ? "4" : "8"

  # Who may invoke the service: the SSF itself (the Pub/Sub push presents its tokens), its peers,
  # and the environment's scheduler (the host admits it on the collector routes only).
  invokers         = { for s in distinct(concat([var.name], var.peers)) : s => local.env.identities[s].member }
  invoker_bindings = merge(local.invokers, { "(scheduler)" = local.env.scheduler.member })

  collectors = {
    intent_collector  = { route = "/intent-collector", every = var.intent_collector_every_minutes }
    garbage_collector = { route = "/garbage-collector", every = var.garbage_collector_every_minutes }
  }

  # Delivery windows (docs/protocol.md, "Delivery windows"): Pub/Sub must never push a start to
  # the SSF later than T (gc_bound_seconds) after it was published, so every setting that lets
  # a start wait or come back is derived here, and gc_bound_seconds' validation refuses T at or
  # below the longest window.
  #
  # The ack deadline is the push request's timeout: the function's, within Pub/Sub's 10..600 s
  # (a longer execution may be delivered again while it runs, which the runtime makes harmless,
  # but which duplicates work). A push holds a start for the longer of it and Cloud Run's
  # request timeout.
  ack_deadline_seconds = max(10, min(600, var.function_timeout_seconds))
  push_hold_seconds    = max(local.ack_deadline_seconds, var.function_timeout_seconds)
  # A failed push is retried after 10 s, doubling up to 60 s (Pub/Sub allows 0..600 s, and
  # backs off up to 600 s by default, which would space max_receive_count deliveries of one
  # start over 40 minutes).
  minimum_backoff_seconds = 10
  maximum_backoff_seconds = 60
  # max_receive_count pushes of a failing start, with the longest backoff between them.
  redelivery_span_seconds = var.max_receive_count * local.push_hold_seconds + (var.max_receive_count - 1) * local.maximum_backoff_seconds
  # How long the subscription keeps an unacknowledged start: long enough for those deliveries,
  # so that a failing start is dead-lettered rather than dropped, and at least Pub/Sub's 10
  # minutes (at most 31 days). A start dropped unrun is not lost: its intent stays pending and
  # the intent collector launches it again. The topic keeps no messages of its own (no topic
  # retention), so nothing can be replayed into the subscription later.
  message_retention_seconds = min(2678400, max(600, local.redelivery_span_seconds))
  delivery_windows = {
    # The last push starts before the retention ends, and reaches the service within its hold.
    queue        = local.message_retention_seconds + local.push_hold_seconds
    redeliveries = local.redelivery_span_seconds
  }
  delivery_window_seconds = max(values(local.delivery_windows)...)
}

# --- State -------------------------------------------------------------------------------------

resource "google_firestore_database" "this" {
  count                             = local.on_bigtable ? 0 : 1
  project                           = local.project
  name                              = local.prefix
  location_id                       = local.region
  type                              = "FIRESTORE_NATIVE"
  point_in_time_recovery_enablement = var.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"

  # Protected, the database refuses deletion (Firestore) and Terraform refuses to delete it
  # (PREVENT): a destroy or a replacement fails, as DynamoDB's deletion protection does on AWS,
  # rather than forgetting the database (ABANDON) and leaving it behind unmanaged.
  delete_protection_state = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = var.deletion_protection ? "PREVENT" : "DELETE"

  dynamic "cmek_config" {
    for_each = local.encryption_key == null ? [] : [local.encryption_key]
    content {
      kms_key_name = cmek_config.value
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.own_key]
}

moved {
  from = google_firestore_database.this
  to   = google_firestore_database.this[0]
}

# On Bigtable: the SSF's own table in the environment's instance (column family "d", which the
# driver writes), its own app profile routed to the instance's one cluster with single-row
# transactions (the driver's conditional writes), and daily backups kept a week.
resource "google_bigtable_table" "state" {
  count               = local.on_bigtable ? 1 : 0
  project             = local.project
  instance_name       = local.env.bigtable.instance
  name                = local.prefix
  deletion_protection = var.deletion_protection ? "PROTECTED" : "UNPROTECTED"

  column_family {
    family = "d"
  }

  automated_backup_policy {
    retention_period = var.point_in_time_recovery ? "168h" : "0"
    frequency        = var.point_in_time_recovery ? "24h" : "0"
  }
}

resource "google_bigtable_app_profile" "state" {
  count           = local.on_bigtable ? 1 : 0
  project         = local.project
  instance        = local.env.bigtable.instance
  app_profile_id  = local.prefix
  description     = "SSF ${var.name} of ssfkit environment ${local.env.name}: single-cluster routing, single-row transactions."
  ignore_warnings = true

  single_cluster_routing {
    cluster_id                 = local.env.bigtable.cluster
    allow_transactional_writes = true
  }
}

# --- Queue -------------------------------------------------------------------------------------

resource "google_pubsub_topic" "dead_letter" {
  project      = local.project
  name         = "${local.prefix}-dead-letter"
  kms_key_name = local.encryption_key
  labels       = local.labels
  depends_on   = [google_kms_crypto_key_iam_member.own_key]
}

# Dead letters are kept (a topic without a subscription drops them) for 7 days, to inspect and
# republish; the subscription never expires for inactivity.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = local.project
  name                       = google_pubsub_topic.dead_letter.name
  topic                      = google_pubsub_topic.dead_letter.id
  message_retention_duration = "604800s"
  ack_deadline_seconds       = 60
  labels                     = local.labels

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic" "this" {
  project      = local.project
  name         = local.prefix
  kms_key_name = local.encryption_key
  labels       = local.labels
  depends_on   = [google_kms_crypto_key_iam_member.own_key]
}

# Asynchronous starts (spawns, AsyncInvoke, the intent collector's relaunches) are pushed to the
# service's /queue route with an ID token of the SSF's service account. A failed start answers
# 500 and is delivered again after a backoff; after max_receive_count deliveries it goes to the
# dead-letter topic. Retention, ack deadline and backoff keep every delivery within the delivery
# window (see the locals).
resource "google_pubsub_subscription" "this" {
  project                    = local.project
  name                       = local.subscription
  topic                      = google_pubsub_topic.this.id
  ack_deadline_seconds       = local.ack_deadline_seconds
  message_retention_duration = "${local.message_retention_seconds}s"
  labels                     = local.labels

  push_config {
    push_endpoint = "${local.url}/queue"

    oidc_token {
      service_account_email = local.identity.email
      audience              = local.url
    }
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_receive_count
  }

  retry_policy {
    minimum_backoff = "${local.minimum_backoff_seconds}s"
    maximum_backoff = "${local.maximum_backoff_seconds}s"
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.push_token,
    google_pubsub_topic_iam_member.dead_letter_agent,
  ]
}

# --- Function ----------------------------------------------------------------------------------

# One service serves the SSF (/ssf, /spawn), its queue (/queue) and both collectors. Ingress is
# open because Pub/Sub and Cloud Scheduler call from outside any VPC, but every request must
# carry an ID token of an identity with roles/run.invoker on this service, which only the SSF,
# its peers and the scheduler have; and the host checks the token again itself, with the caller
# each route admits (SSFKIT_AUDIENCE, SSFKIT_*CALLER*).
resource "google_cloud_run_v2_service" "this" {
  project              = local.project
  name                 = local.prefix
  location             = local.region
  ingress              = "INGRESS_TRAFFIC_ALL"
  invoker_iam_disabled = false
  deletion_protection  = var.deletion_protection
  labels               = local.labels

  template {
    service_account = local.identity.email
    timeout         = "${var.function_timeout_seconds}s"

    containers {
      image = var.artifact

      resources {
        limits = {
          cpu    = local.cpu
          memory = "${var.memory_mb}Mi"
        }
        cpu_idle = true # CPU only while serving a request, as a function
      }

      # URLs and settings, no secrets.
      dynamic "env" {
        for_each = merge(var.environment_variables, local.runtime_environment, local.provenance ? { SSFKIT_PROVENANCE = var.provenance, SSFKIT_PROVENANCE_SINK = var.provenance_sink } : {})
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  lifecycle {
    # Peers, Pub/Sub and Cloud Scheduler call the service at its deterministic URL.
    postcondition {
      condition     = try(contains(self.urls, local.url), false)
      error_message = "Cloud Run does not serve ${self.name} at ${local.url}, the URL its peers, queue and schedules use: is the environment's project_number right, and the default URL enabled?"
    }
  }

  # Its first requests find their grants.
  depends_on = [google_project_iam_member.state, google_pubsub_topic_iam_member.publisher]
}

# --- Collectors --------------------------------------------------------------------------------

# Cloud Scheduler posts to the collector routes with an ID token of the environment's scheduler
# service account, which the host admits there and nowhere else. No retries: the next run is
# the retry. Cloud Scheduler bounds an HTTP attempt to 15 s..30 min.
resource "google_cloud_scheduler_job" "collector" {
  for_each         = local.collectors
  project          = local.project
  region           = local.region
  name             = "${local.prefix}-${replace(each.key, "_", "-")}"
  description      = "ssfkit ${local.env.name}/${var.name}: ${replace(each.key, "_", " ")}, every ${each.value.every} min"
  schedule         = each.value.every == 60 ? "0 * * * *" : "*/${each.value.every} * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "${min(1800, max(15, var.function_timeout_seconds))}s"

  retry_config {
    retry_count = 0
  }

  http_target {
    uri         = "${local.url}${each.value.route}"
    http_method = "POST"

    oidc_token {
      service_account_email = local.env.scheduler.email
      audience              = local.url
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}

# --- Identity ----------------------------------------------------------------------------------

# The SSF's own database, and no other: roles/datastore.user is granted on the project (Firestore
# has no database-level policies) with a condition naming this database. The database name or
# a path under it, not a prefix: bank-teller must not reach bank-teller2.
resource "google_project_iam_member" "state" {
  count   = local.on_bigtable ? 0 : 1
  project = local.project
  role    = "roles/datastore.user"
  member  = local.identity.member

  condition {
    title       = "ssfkit ${local.prefix}: own database"
    description = "SSF ${var.name} of ssfkit environment ${local.env.name} reaches its own Firestore database only."
    expression  = "resource.name == \"projects/${local.project}/databases/${google_firestore_database.this[0].name}\" || resource.name.startsWith(\"projects/${local.project}/databases/${google_firestore_database.this[0].name}/\")"
  }
}

moved {
  from = google_project_iam_member.state
  to   = google_project_iam_member.state[0]
}

# On Bigtable, its own table: Bigtable has table-level policies.
resource "google_bigtable_table_iam_member" "state" {
  count         = local.on_bigtable ? 1 : 0
  project       = local.project
  instance_name = local.env.bigtable.instance
  table         = google_bigtable_table.state[0].name
  role          = "roles/bigtable.user"
  member        = local.identity.member
}

# Its provenance: objects in its own partitions of the environment's bucket (create, and replace
# for a batch exported again), nothing else there: no listing, no other SSF's objects.
resource "google_storage_bucket_iam_member" "provenance" {
  count  = local.provenance ? 1 : 0
  bucket = local.provenance_bucket
  role   = "roles/storage.objectUser"
  member = local.identity.member

  condition {
    title       = "ssfkit-provenance-${lower(replace(var.name, "_", "-"))}"
    description = "SSF ${var.name} writes its own provenance partitions only."
    expression  = local.provenance_condition
  }
}

# Its own queue: publish (spawns, relaunches) and consume.
resource "google_pubsub_topic_iam_member" "publisher" {
  project = local.project
  topic   = google_pubsub_topic.this.name
  role    = "roles/pubsub.publisher"
  member  = local.identity.member
}

# Its dead-letter topic: the runtime records instances it gave up on there.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = local.project
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.identity.member
}

resource "google_pubsub_subscription_iam_member" "subscriber" {
  project      = local.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = local.identity.member
}

# Its own service, for itself, its peers and the scheduler.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.invoker_bindings
  project  = local.project
  location = local.region
  name     = google_cloud_run_v2_service.this.name
  role     = "roles/run.invoker"
  member   = each.value
}

# Pub/Sub's service agent dead-letters: it acknowledges on the subscription and publishes to the
# dead-letter topic. It also signs the push requests' ID tokens as the SSF's service account
# (projects created before April 2021 do not grant it that on their own).
resource "google_pubsub_topic_iam_member" "dead_letter_agent" {
  project = local.project
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_agent" {
  project      = local.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

resource "google_service_account_iam_member" "push_token" {
  service_account_id = local.identity.id
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

# A key of the SSF's own: the Firestore and Pub/Sub service agents encrypt with it. (The
# environment's key is granted by the environment.)
resource "google_kms_crypto_key_iam_member" "own_key" {
  for_each      = local.own_key ? { (var.state_store) = local.state_agent, pubsub = local.pubsub_agent } : {}
  crypto_key_id = var.encryption_key
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value
}
