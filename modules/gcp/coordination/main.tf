# The serverless ZooKeeper-compatible coordination service of an environment on Google Cloud
# (docs/coordination.md): a Firestore database of its own, the request topic pushed to the
# writer's Cloud Run service (with a dead-letter topic), a bucket for large entries and
# snapshots, the heartbeat's service run by Cloud Scheduler, and three service accounts: the
# writer's, the heartbeat's and the clients' (`ssfkit coord proxy`).

locals {
  env     = var.environment
  project = local.env.project
  region  = local.env.region
  prefix  = "${local.env.name}-${var.name}-coord"
  hash    = substr(sha1("${local.project}/${local.env.name}/${var.name}"), 0, 8)

  encryption_key = var.encryption_key != null ? var.encryption_key : local.env.encryption_key
  # A key of its own (not the environment's, whose service agents the environment grants).
  own_key = var.encryption_key != null && var.encryption_key != local.env.encryption_key
  labels  = merge(local.env.tags, var.tags, { "ssfkit-coordination" = var.name })

  pubsub_agent    = "serviceAccount:service-${local.env.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  firestore_agent = "serviceAccount:service-${local.env.project_number}@gcp-sa-firestore.iam.gserviceaccount.com"
  storage_agent   = "serviceAccount:service-${local.env.project_number}@gs-project-accounts.iam.gserviceaccount.com"

  # Service account IDs (6 to 30 characters) and Cloud Run service names (at most 49, so that
  # the deterministic URL fits a DNS label): readable where they fit, cut and hashed otherwise.
  account_base = trim(substr("${local.env.name}-${var.name}", 0, 14), "-")
  identities = {
    for kind, letter in { writer = "w", heartbeat = "h", client = "c" } : kind => {
      email                      = "${local.account_base}-c${letter}-${substr(local.hash, 0, 6)}@${local.project}.iam.gserviceaccount.com"
      member                     = "serviceAccount:${local.account_base}-c${letter}-${substr(local.hash, 0, 6)}@${local.project}.iam.gserviceaccount.com"
      id                         = "projects/${local.project}/serviceAccounts/${local.account_base}-c${letter}-${substr(local.hash, 0, 6)}@${local.project}.iam.gserviceaccount.com"
      name                       = "${local.account_base}-c${letter}-${substr(local.hash, 0, 6)}"
    }
  }
  services = {
    for kind in ["writer", "heartbeat"] : kind => length("${local.prefix}-${kind}") <= 49 ? "${local.prefix}-${kind}" : "${trim(substr("${local.prefix}-${kind}", 0, 40), "-")}-${local.hash}"
  }
  urls   = { for kind, name in local.services : kind => "https://${name}-${local.env.project_number}.${local.region}.run.app" }
  bucket = "${local.prefix}-${local.hash}"

  subscription    = local.prefix
  store_url       = "firestore://${local.project}/coord?database=${google_firestore_database.this.name}"
  queue_url       = "pubsub://${local.project}/${google_pubsub_topic.this.name}?subscription=${local.subscription}"
  dead_letter_url = "pubsub://${local.project}/${google_pubsub_topic.dead_letter.name}?subscription=${google_pubsub_subscription.dead_letter.name}"
  blobs_url       = "gs://${google_storage_bucket.this.name}"

  settings = {
    SSFKIT_ENVIRONMENT          = local.env.name
    SSFKIT_COORD_STORE          = local.store_url
    SSFKIT_COORD_QUEUE          = local.queue_url
    SSFKIT_COORD_BLOBS          = local.blobs_url
    SSFKIT_COORD_SNAPSHOT_EVERY = tostring(var.snapshot_every)
  }
  # Who each service admits (adapters/host/httphost's Google ID token verifier): the push
  # subscription's token (the writer's own service account) on /queue, the environment's
  # scheduler on /heartbeat.
  callers = {
    writer    = { SSFKIT_PUSH_CALLER = local.identities.writer.email }
    heartbeat = { SSFKIT_SCHEDULER_CALLER = local.env.scheduler.email }
  }
  invokers = {
    writer    = local.identities.writer.member
    heartbeat = local.env.scheduler.member
  }

  cpu                     = var.memory_mb <= 4096 ? "1" : var.memory_mb <= 8192 ? "2" : var.memory_mb <= 16384 ? "4" : "8"
  ack_deadline_seconds    = max(10, min(600, var.function_timeout_seconds))
  maximum_backoff_seconds = 60
  # Long enough for max_receive_count pushes of a failing request, so that it is dead-lettered
  # rather than dropped; at least Pub/Sub's 10 minutes.
  message_retention_seconds = min(2678400, max(600, var.max_receive_count * max(local.ack_deadline_seconds, var.function_timeout_seconds) + (var.max_receive_count - 1) * local.maximum_backoff_seconds))
}

# --- Identities --------------------------------------------------------------------------------

resource "google_service_account" "this" {
  for_each     = local.identities
  project      = local.project
  account_id   = each.value.name
  display_name = "ssfkit ${local.env.name}/${var.name} coordination ${each.key}"
  description  = "The ${each.key} identity of coordination service ${var.name} of ssfkit environment ${local.env.name}."

  lifecycle {
    precondition {
      condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", each.value.name))
      error_message = "the service account ID ${each.value.name} is not 6 to 30 lower-case letters, digits or hyphens."
    }
  }
}

# --- Store -------------------------------------------------------------------------------------

resource "google_firestore_database" "this" {
  project                           = local.project
  name                              = local.prefix
  location_id                       = local.region
  type                              = "FIRESTORE_NATIVE"
  point_in_time_recovery_enablement = var.point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"
  delete_protection_state           = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy                   = var.deletion_protection ? "PREVENT" : "DELETE"

  dynamic "cmek_config" {
    for_each = local.encryption_key == null ? [] : [local.encryption_key]
    content {
      kms_key_name = cmek_config.value
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.key]
}

# Firestore has no database-level policies: roles/datastore.user on the project, confined by a
# condition to this database. Every identity reads and writes it; the clients' cannot be
# confined to their sessions' and requests' partitions (documents of one collection) on
# Firestore, so the proxy's writes are limited by what it is, not by IAM.
resource "google_project_iam_member" "store" {
  for_each = local.identities
  project  = local.project
  role     = "roles/datastore.user"
  member   = each.value.member

  condition {
    title       = "ssfkit ${local.prefix}: own database"
    description = "The ${each.key} of coordination service ${var.name} (ssfkit environment ${local.env.name}) reaches its own Firestore database only."
    expression  = "resource.name == \"projects/${local.project}/databases/${google_firestore_database.this.name}\" || resource.name.startsWith(\"projects/${local.project}/databases/${google_firestore_database.this.name}/\")"
  }

  depends_on = [google_service_account.this]
}

# --- Request queue -----------------------------------------------------------------------------

resource "google_pubsub_topic" "dead_letter" {
  project      = local.project
  name         = "${local.prefix}-dead-letter"
  kms_key_name = local.encryption_key
  labels       = local.labels
  depends_on   = [google_kms_crypto_key_iam_member.key]
}

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
  depends_on   = [google_kms_crypto_key_iam_member.key]
}

# Requests are pushed to the writer's /queue with an ID token of its service account; a failure
# answers 500 and is pushed again after a backoff, and after max_receive_count pushes goes to
# the dead-letter topic.
resource "google_pubsub_subscription" "this" {
  project                    = local.project
  name                       = local.subscription
  topic                      = google_pubsub_topic.this.id
  ack_deadline_seconds       = local.ack_deadline_seconds
  message_retention_duration = "${local.message_retention_seconds}s"
  labels                     = local.labels

  push_config {
    push_endpoint = "${local.urls.writer}/queue"

    oidc_token {
      service_account_email = local.identities.writer.email
      audience              = local.urls.writer
    }
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_receive_count
  }

  retry_policy {
    minimum_backoff = "10s"
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

# The clients send requests; the writer consumes them (through the push).
resource "google_pubsub_topic_iam_member" "client" {
  project    = local.project
  topic      = google_pubsub_topic.this.name
  role       = "roles/pubsub.publisher"
  member     = local.identities.client.member
  depends_on = [google_service_account.this]
}

resource "google_pubsub_subscription_iam_member" "writer" {
  project      = local.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = local.identities.writer.member
  depends_on   = [google_service_account.this]
}

# Pub/Sub's service agent dead-letters (acknowledges and republishes) and signs the pushes' ID
# tokens as the writer's service account.
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
  service_account_id = local.identities.writer.id
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
  depends_on         = [google_service_account.this]
}

# --- Bucket ------------------------------------------------------------------------------------

# Large entries and snapshots: uniform access (no object ACLs), public access prevented,
# encrypted (with the key when there is one). Entries are written once: no versioning.
resource "google_storage_bucket" "this" {
  project                     = local.project
  name                        = local.bucket
  location                    = local.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = !var.deletion_protection
  labels                      = local.labels

  dynamic "encryption" {
    for_each = local.encryption_key == null ? [] : [local.encryption_key]
    content {
      default_kms_key_name = encryption.value
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.key]
}

# The functions read, write, list and delete objects; the clients read them.
resource "google_storage_bucket_iam_member" "this" {
  for_each = {
    writer    = "roles/storage.objectUser"
    heartbeat = "roles/storage.objectUser"
    client    = "roles/storage.objectViewer"
  }
  bucket     = google_storage_bucket.this.name
  role       = each.value
  member     = local.identities[each.key].member
  depends_on = [google_service_account.this]
}

# The service agents encrypt with the key: Cloud Storage's always (the environment grants only
# Firestore's and Pub/Sub's), those two for a key of the service's own.
resource "google_kms_crypto_key_iam_member" "key" {
  for_each = local.encryption_key == null ? {} : merge(
    { storage = local.storage_agent },
    local.own_key ? { firestore = local.firestore_agent, pubsub = local.pubsub_agent } : {},
  )
  crypto_key_id = local.encryption_key
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value
}

# --- Functions ---------------------------------------------------------------------------------

resource "google_cloud_run_v2_service" "this" {
  for_each             = local.services
  project              = local.project
  name                 = each.value
  location             = local.region
  ingress              = "INGRESS_TRAFFIC_ALL"
  invoker_iam_disabled = false
  deletion_protection  = var.deletion_protection
  labels               = local.labels

  template {
    service_account = local.identities[each.key].email
    timeout         = "${var.function_timeout_seconds}s"

    containers {
      image = var.artifact

      resources {
        limits = {
          cpu    = local.cpu
          memory = "${var.memory_mb}Mi"
        }
        cpu_idle = true
      }

      dynamic "env" {
        for_each = merge(local.settings, local.callers[each.key], { SSFKIT_COORD_ROLE = each.key, SSFKIT_AUDIENCE = local.urls[each.key] })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [google_project_iam_member.store, google_storage_bucket_iam_member.this, google_service_account.this]
}

# The writer's service admits the push's service account (its own), the heartbeat's the
# environment's scheduler; nobody else may invoke them.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.invokers
  project  = local.project
  location = local.region
  name     = google_cloud_run_v2_service.this[each.key].name
  role     = "roles/run.invoker"
  member   = each.value
}

# --- Heartbeat schedule ------------------------------------------------------------------------

resource "google_cloud_scheduler_job" "heartbeat" {
  project          = local.project
  region           = local.region
  name             = "${local.prefix}-heartbeat"
  description      = "ssfkit ${local.env.name}/${var.name}: the coordination service's heartbeat, every ${var.heartbeat_every_minutes} min"
  schedule         = var.heartbeat_every_minutes < 60 ? "*/${var.heartbeat_every_minutes} * * * *" : var.heartbeat_every_minutes == 1440 ? "0 0 * * *" : "0 */${floor(var.heartbeat_every_minutes / 60)} * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "${min(1800, max(15, var.function_timeout_seconds))}s"

  retry_config {
    retry_count = 0 # the next run is the retry
  }

  http_target {
    uri         = "${local.urls.heartbeat}/heartbeat"
    http_method = "POST"

    oidc_token {
      service_account_email = local.env.scheduler.email
      audience              = local.urls.heartbeat
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}
