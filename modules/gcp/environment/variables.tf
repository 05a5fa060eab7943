variable "name" {
  description = "The environment's name: the prefix of every resource its SSFs create (e.g. travel-prod)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters."
  }

  validation {
    condition     = !startswith(var.name, "goog")
    error_message = "name must not start with \"goog\": Pub/Sub refuses topic names with that prefix."
  }
}

variable "project" {
  description = "The Google Cloud project (ID) the environment's SSFs live in."
  type        = string

  validation {
    # Domain-scoped projects (example.com:p) are not supported: their service accounts' emails differ.
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a project ID: 6 to 30 lower-case letters, digits or hyphens, starting with a letter, not ending with a hyphen."
  }
}

variable "region" {
  description = "The region of the SSFs' services, databases and schedules (e.g. europe-west1)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1."
  }
}

variable "ssfs" {
  description = "The names of the environment's SSFs (as the runtime knows them). The environment creates one service account per SSF, so that each SSF module can let its peers' identities invoke it without a dependency cycle."
  type        = list(string)

  validation {
    condition     = alltrue([for s in var.ssfs : can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", s))])
    error_message = "ssfs must be SSF names: letters, digits or underscores, starting with a letter or underscore, at most 63 characters."
  }

  validation {
    condition     = length(distinct(var.ssfs)) == length(var.ssfs)
    error_message = "ssfs must not name an SSF twice."
  }
}

variable "project_number" {
  description = "The project's number (it names the Cloud Run URLs and the Google service agents). Null: read with the google_project data source; given, nothing is read, so a plan works offline."
  type        = string
  default     = null

  validation {
    condition     = var.project_number == null || can(regex("^[0-9]{6,20}$", var.project_number))
    error_message = "project_number must be the project's number (digits), or null."
  }
}

variable "encryption_key" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K, in the region or its multi-region) that the SSFs encrypt their state and queues with; the environment lets the Firestore and Pub/Sub service agents use it. Null: Google-managed keys, still encrypted."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.encryption_key))
    error_message = "encryption_key must be a Cloud KMS key name, projects/P/locations/L/keyRings/R/cryptoKeys/K, or null."
  }
}

variable "tags" {
  description = "Labels for every resource of the environment's SSFs that takes labels; the environment adds ssfkit-environment = name."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.tags : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "tags are Google Cloud labels: keys of lower-case letters, digits, _ or -, starting with a letter, at most 63 characters; values of the same characters, at most 63."
  }

  validation {
    condition     = length(var.tags) <= 60
    error_message = "tags must be at most 60 labels (Google allows 64; ssfkit adds its own)."
  }
}

variable "bigtable" {
  description = "A Bigtable instance for the SSFs whose `state_store` is bigtable: one cluster in `zone` (single-cluster routing, which ssfkit's conditional writes need), autoscaled between `min_nodes` and `max_nodes` at `cpu_target` percent CPU, on `storage_type` SSD or HDD. Null (the default): no instance, every SSF on Firestore."
  type = object({
    zone         = string
    min_nodes    = optional(number, 1)
    max_nodes    = optional(number, 3)
    cpu_target   = optional(number, 60)
    storage_type = optional(string, "SSD")
  })
  default = null

  validation {
    condition     = var.bigtable == null ? true : can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.bigtable.zone))
    error_message = "bigtable.zone must be a zone such as europe-west1-b, in the environment's region."
  }

  validation {
    condition     = var.bigtable == null ? true : var.bigtable.min_nodes >= 1 && var.bigtable.max_nodes >= var.bigtable.min_nodes && var.bigtable.cpu_target >= 10 && var.bigtable.cpu_target <= 80
    error_message = "bigtable needs 1 <= min_nodes <= max_nodes, and cpu_target between 10 and 80 percent."
  }

  validation {
    condition     = var.bigtable == null ? true : contains(["SSD", "HDD"], var.bigtable.storage_type)
    error_message = "bigtable.storage_type must be SSD or HDD."
  }
}

variable "deletion_protection" {
  description = "Refuse to destroy the Bigtable instance (when `bigtable` is set), which holds the state of the SSFs on it, and the provenance bucket while it holds records. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "provenance_retention_days" {
  description = "Keep the SSFs' provenance (docs/provenance.md) this many days in a bucket the environment creates, independent of the garbage collector's bound. 0: no bucket; SSFs that capture provenance then need a sink of their own."
  type        = number
  default     = 0

  validation {
    condition     = var.provenance_retention_days >= 0 && floor(var.provenance_retention_days) == var.provenance_retention_days
    error_message = "provenance_retention_days must be a whole number of days, 0 for no provenance bucket."
  }
}
