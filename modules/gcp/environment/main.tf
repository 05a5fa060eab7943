# What an application's SSFs share on Google Cloud: the project, region and key, the labels,
# and what each SSF must know about the others without a dependency cycle between the SSF
# modules: one service account per SSF (the identity its peers grant the right to invoke them)
# and the name and URL of each SSF's Cloud Run service.

data "google_project" "this" {
  count      = var.project_number == null ? 1 : 0
  project_id = var.project
}

locals {
  project_number = var.project_number != null ? var.project_number : data.google_project.this[0].number
  tags           = merge(var.tags, tomap({ "ssfkit-environment" = var.name }))

  # Names. Google's names take lower-case letters, digits and hyphens: an SSF whose name is
  # already of those (a letter, then letters and digits) is named <environment>-<ssf>. Any other
  # name (upper case, underscores) is lower-cased with _ as -, and gets a hash of the exact
  # environment and SSF names, so that Teller and teller, or a_b in environment x and b in
  # environment x-a, never share a name in the project. A name too long for its resource is cut
  # and gets the hash too.
  plain = { for s in var.ssfs : s => can(regex("^[a-z][a-z0-9]*$", s)) }
  base  = { for s in var.ssfs : s => replace("${var.name}-${replace(lower(s), "_", "-")}", "/-+$/", "") }
  hash  = { for s in var.ssfs : s => substr(sha1("${var.name}/${s}"), 0, 6) }

  # Service account IDs: 6 to 30 characters.
  account_ids = {
    for s in var.ssfs : s => local.plain[s] && length(local.base[s]) >= 6 && length(local.base[s]) <= 30 ? local.base[s] : "${replace(substr(local.base[s], 0, 23), "/-+$/", "")}-${local.hash[s]}"
  }

  # Cloud Run service names: at most 49 characters, so that the deterministic URL
  # https://<service>-<project number>.<region>.run.app fits a DNS label. The SSF module names
  # the SSF's database, topics, subscriptions and scheduler jobs after its service, so 4
  # characters at least (Firestore's minimum).
  service_names = {
    for s in var.ssfs : s => local.plain[s] && length(local.base[s]) >= 4 && length(local.base[s]) <= 49 ? local.base[s] : "${replace(substr(local.base[s], 0, 42), "/-+$/", "")}-${local.hash[s]}"
  }

  # A user-managed service account's email is <account id>@<project>.iam.gserviceaccount.com:
  # known at plan time, so plans show whom every binding names.
  identities = {
    for s in var.ssfs : s => {
      email  = "${local.account_ids[s]}@${var.project}.iam.gserviceaccount.com"
      member = "serviceAccount:${local.account_ids[s]}@${var.project}.iam.gserviceaccount.com"
      id     = "projects/${var.project}/serviceAccounts/${local.account_ids[s]}@${var.project}.iam.gserviceaccount.com"
    }
  }

  # The service account Cloud Scheduler presents to the SSFs' collector routes, and only to
  # them (the hosts refuse it elsewhere, and refuse every other caller there). One for the
  # environment: its ID, <environment>-sched-<6 hex of sha1("<environment>//cloud-scheduler")>,
  # cannot be an SSF's (an SSF's hash is of "<environment>/<ssf>", and no SSF name has a "/").
  scheduler_account_id = "${replace(substr(var.name, 0, 17), "/-+$/", "")}-sched-${substr(sha1("${var.name}//cloud-scheduler"), 0, 6)}"
  scheduler = {
    email  = "${local.scheduler_account_id}@${var.project}.iam.gserviceaccount.com"
    member = "serviceAccount:${local.scheduler_account_id}@${var.project}.iam.gserviceaccount.com"
    id     = "projects/${var.project}/serviceAccounts/${local.scheduler_account_id}@${var.project}.iam.gserviceaccount.com"
  }

  services = {
    for s in var.ssfs : s => {
      name = local.service_names[s]
      url  = "https://${local.service_names[s]}-${local.project_number}.${var.region}.run.app"
    }
  }

  # The Google service agents that encrypt with the key on the SSFs' behalf.
  service_agents = merge({
    firestore = "serviceAccount:service-${local.project_number}@gcp-sa-firestore.iam.gserviceaccount.com"
    pubsub    = "serviceAccount:service-${local.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    }, var.bigtable == null ? {} : {
    bigtable = "serviceAccount:service-${local.project_number}@gcp-sa-bigtable.iam.gserviceaccount.com"
    }, local.provenance ? {
    storage = "serviceAccount:service-${local.project_number}@gs-project-accounts.iam.gserviceaccount.com"
  } : {})

  provenance        = var.provenance_retention_days > 0
  provenance_bucket = "${var.name}-provenance-${local.project_number}"
  provenance_prefix = "provenance"

  # Cluster IDs take 6 to 30 characters.
  bigtable_cluster = "${substr("${var.name}-state", 0, 27)}-c1"
}

resource "google_service_account" "ssf" {
  for_each     = toset(var.ssfs)
  project      = var.project
  account_id   = local.account_ids[each.key]
  display_name = "ssfkit ${var.name}/${each.key}"
  description  = "The identity of SSF ${each.key} of ssfkit environment ${var.name}: its own state and queue, and its peers' services."

  lifecycle {
    precondition {
      condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", local.account_ids[each.key]))
      error_message = "the service account ID ${local.account_ids[each.key]} is not 6 to 30 lower-case letters, digits or hyphens."
    }

    precondition {
      condition     = length(distinct(values(local.account_ids))) == length(var.ssfs) && length(distinct(values(local.service_names))) == length(var.ssfs)
      error_message = "two SSFs of the environment would share a service account or service name."
    }
  }
}

# Cloud Scheduler's identity for the collectors' jobs: no role of its own; each SSF module lets
# it invoke its service (the host admits it on the collector routes only). Cloud Scheduler's
# service agent mints its ID tokens (its role, roles/cloudscheduler.serviceAgent, allows that
# for the project's service accounts).
resource "google_service_account" "scheduler" {
  project      = var.project
  account_id   = local.scheduler_account_id
  display_name = "ssfkit ${var.name} scheduler"
  description  = "Cloud Scheduler's identity for the collectors of ssfkit environment ${var.name}: the SSFs admit it on their collector routes only."

  lifecycle {
    precondition {
      condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", local.scheduler_account_id)) && !contains(values(local.account_ids), local.scheduler_account_id)
      error_message = "the scheduler's service account ID ${local.scheduler_account_id} is not 6 to 30 lower-case letters, digits or hyphens, or is an SSF's."
    }
  }
}

# The key is the environment's: it grants the service agents once, here, rather than in each
# SSF module (a non-authoritative binding destroyed with one SSF would be gone for all).
# The Firestore service agent exists once the Firestore API has been used or identified:
# `gcloud beta services identity create --service=firestore.googleapis.com --project=P`.
resource "google_kms_crypto_key_iam_member" "service_agents" {
  for_each      = var.encryption_key == null ? {} : local.service_agents
  crypto_key_id = var.encryption_key
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value
}

# The Bigtable instance of the SSFs whose state_store is bigtable (each gets its own table, app
# profile and table-level grant in its SSF module). One cluster: with more, an app profile could
# route to either, and Bigtable replicates between clusters only eventually.
resource "google_bigtable_instance" "state" {
  count               = var.bigtable == null ? 0 : 1
  project             = var.project
  name                = "${var.name}-state"
  display_name        = "ssfkit ${var.name} state"
  deletion_protection = var.deletion_protection
  labels              = local.tags

  cluster {
    cluster_id   = local.bigtable_cluster
    zone         = var.bigtable.zone
    storage_type = var.bigtable.storage_type
    kms_key_name = var.encryption_key

    autoscaling_config {
      min_nodes  = var.bigtable.min_nodes
      max_nodes  = var.bigtable.max_nodes
      cpu_target = var.bigtable.cpu_target
    }
  }

  lifecycle {
    precondition {
      condition     = startswith(var.bigtable.zone, "${var.region}-")
      error_message = "bigtable.zone ${var.bigtable.zone} is not in the environment's region ${var.region}."
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.service_agents]
}

# --- Provenance --------------------------------------------------------------------------------

# The SSFs' garbage collectors export provenance here as Parquet objects (one per table and
# batch, partitioned by SSF and day: query them with BigQuery external tables). Private,
# encrypted with the environment's key, kept provenance_retention_days by a lifecycle rule. Each
# SSF module grants its identity its own partitions only (an IAM condition on object names).
resource "google_storage_bucket" "provenance" {
  count                       = local.provenance ? 1 : 0
  project                     = var.project
  name                        = local.provenance_bucket
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = !var.deletion_protection
  labels                      = merge(local.tags, { "ssfkit-provenance" = "true" })

  dynamic "encryption" {
    for_each = var.encryption_key == null ? [] : [var.encryption_key]
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      age = var.provenance_retention_days
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.service_agents]
}
