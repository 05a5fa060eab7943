variable "name" {
  description = "The SSF's name, as its handler is registered in the ssfkit runtime (letters, digits, underscores). The environment must list it in its `ssfs`."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", var.name))
    error_message = "name must be letters, digits or underscores, starting with a letter or underscore, at most 63 characters: the runtime uses it as the SSF's name."
  }

  validation {
    condition     = contains(keys(var.environment.identities), var.name) && contains(keys(var.environment.services), var.name)
    error_message = "name must be one of the environment's ssfs: the environment module creates the SSF's service account and names its service."
  }
}

variable "environment" {
  description = "The environment module's `context` output: project, region, key, labels, every SSF's service account and service, and the scheduler's service account."
  type = object({
    name           = string
    project        = string
    project_number = string
    region         = string
    encryption_key = string
    tags           = map(string)
    identities = map(object({
      email  = string
      member = string
      id     = string
    }))
    scheduler = object({
      email  = string
      member = string
      id     = string
    })
    services = map(object({
      name = string
      url  = string
    }))
    bigtable = optional(object({
      instance = string
      cluster  = string
    }))
  })

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.environment.name)) && !startswith(var.environment.name, "goog")
    error_message = "environment.name must be lower-case letters, digits or hyphens, starting with a letter (not goog), at most 24 characters."
  }

  validation {
    condition     = can(regex("^[0-9]{6,20}$", var.environment.project_number))
    error_message = "environment.project_number must be the project's number: it names the services' URLs and Google's service agents."
  }

  validation {
    condition     = alltrue([for s in values(var.environment.services) : can(regex("^[a-z]([-a-z0-9]{2,47}[a-z0-9])$", s.name)) && startswith(s.url, "https://")])
    error_message = "environment.services must name Cloud Run services (4 to 49 lower-case letters, digits or hyphens, starting with a letter) at https URLs."
  }
}

variable "artifact" {
  description = "The container image `ssfkit build --cloud gcp --image REF --push` pushed (e.g. europe-west1-docker.pkg.dev/PROJECT/REPO/bank:v1, or with @sha256:DIGEST)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+|__[a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$", var.artifact))
    error_message = "artifact must be a container image reference, REGISTRY/PATH[:TAG][@sha256:DIGEST] (e.g. europe-west1-docker.pkg.dev/PROJECT/REPO/bank:v1), built by `ssfkit build --cloud gcp`."
  }
}

variable "function_timeout_seconds" {
  description = "The Cloud Run request timeout: the bound on one execution's lifetime (the runtime's Lifetime is one second less). The collectors get the same timeout."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 3 && var.function_timeout_seconds <= 3600 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 3 to 3600 (Cloud Run's limit)."
  }
}

variable "gc_bound_seconds" {
  description = "Beldi's T: the garbage collector removes an instance's logs this long after it finished. It must exceed the function timeout, so no execution can still use what is removed, and the delivery window (output delivery_window_seconds), so no start is delivered after it."
  type        = number
  # 15 minutes: above the delivery window at the default timeout and receive count (660 s:
  # Pub/Sub keeps a message at least 10 minutes). A larger T only keeps logs longer.
  default = 900

  validation {
    condition     = var.gc_bound_seconds > var.function_timeout_seconds
    error_message = "gc_bound_seconds (T) must exceed function_timeout_seconds: an execution still running after T could find its logs collected and repeat an effect."
  }

  validation {
    condition     = var.gc_bound_seconds > local.delivery_window_seconds
    error_message = "gc_bound_seconds (T=${var.gc_bound_seconds}) must exceed the longest delivery window (${local.delivery_window_seconds} s: Pub/Sub retention ${local.message_retention_seconds} s + push hold ${local.push_hold_seconds} s = ${local.delivery_windows.queue} s; max_receive_count ${var.max_receive_count} x push hold ${local.push_hold_seconds} s + ${var.max_receive_count - 1} x backoff ${local.maximum_backoff_seconds} s = ${local.delivery_windows.redeliveries} s; the push hold is function_timeout_seconds (at least the 10 s ack deadline), the retention the redeliveries' span, at least Pub/Sub's 600 s): raise gc_bound_seconds, or lower max_receive_count or function_timeout_seconds."
  }
}

variable "relaunch_delay_seconds" {
  description = "How long after an instance's last launch the intent collector may launch it again. Re-running a live instance is safe, but a delay below an execution's duration duplicates work."
  type        = number
  default     = 120

  validation {
    condition     = var.relaunch_delay_seconds >= 1
    error_message = "relaunch_delay_seconds must be at least 1."
  }

  validation {
    condition     = var.relaunch_delay_seconds >= var.function_timeout_seconds
    error_message = "relaunch_delay_seconds must be at least function_timeout_seconds: a relaunch while the first execution may still run only duplicates it (a paid invocation)."
  }
}

variable "memory_mb" {
  description = "Memory of the Cloud Run service (the SSF and its collectors), in MiB. The module gives it the fewest CPUs Cloud Run allows with that memory (1 up to 4096, 2 up to 8192, 4 up to 16384, else 8)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 32768 && floor(var.memory_mb) == var.memory_mb
    error_message = "memory_mb must be a whole number from 128 to 32768 (Cloud Run's limits)."
  }
}

variable "intent_collector_every_minutes" {
  description = "The intent collector's period in minutes: it re-runs unfinished instances. Cloud Scheduler runs it at the minutes of each hour that are multiples of the period (60: hourly)."
  type        = number
  default     = 1

  validation {
    condition     = var.intent_collector_every_minutes >= 1 && var.intent_collector_every_minutes <= 60 && floor(var.intent_collector_every_minutes) == var.intent_collector_every_minutes
    error_message = "intent_collector_every_minutes must be a whole number of minutes from 1 to 60 (a cron minute step; 60 is hourly)."
  }
}

variable "garbage_collector_every_minutes" {
  description = "The garbage collector's period in minutes. Cloud Scheduler runs it at the minutes of each hour that are multiples of the period (60: hourly)."
  type        = number
  default     = 5

  validation {
    condition     = var.garbage_collector_every_minutes >= 1 && var.garbage_collector_every_minutes <= 60 && floor(var.garbage_collector_every_minutes) == var.garbage_collector_every_minutes
    error_message = "garbage_collector_every_minutes must be a whole number of minutes from 1 to 60 (a cron minute step; 60 is hourly)."
  }
}

variable "max_receive_count" {
  description = "Deliveries of an asynchronous start before Pub/Sub moves it to the dead-letter topic (the subscription's max_delivery_attempts)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 5 && var.max_receive_count <= 100 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number from 5 to 100 (Pub/Sub's limits on max_delivery_attempts)."
  }
}

variable "peers" {
  description = "Names of the SSFs of the same environment this SSF calls, or is called by (a callee reports its result by invoking its caller). Their service accounts may invoke this SSF's service, and it gets their URLs; no one else may invoke it."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.peers : can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", p))])
    error_message = "peers must be SSF names (letters, digits, underscores)."
  }

  validation {
    condition     = alltrue([for p in var.peers : contains(keys(var.environment.identities), p) && contains(keys(var.environment.services), p)])
    error_message = "peers must be SSFs of the environment (its ssfs): their identities and services come from it."
  }
}

variable "encryption_key" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) for the database and topics. Null: the environment's key if it has one (its `encryption_key`), else Google-managed encryption, still on. A key other than the environment's is granted to the Firestore and Pub/Sub service agents by this module: give each SSF its own such key."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.encryption_key))
    error_message = "encryption_key must be a Cloud KMS key name, projects/P/locations/L/keyRings/R/cryptoKeys/K, or null."
  }
}

variable "point_in_time_recovery" {
  description = "Point-in-time recovery of the SSF's database (reads of any version of the last 7 days)."
  type        = bool
  default     = true
}

variable "state_store" {
  description = "Where the SSF's state lives: firestore (the default: a Firestore database of its own) or bigtable (a table and a single-cluster app profile of its own in the environment's Bigtable instance, for high write rates)."
  type        = string
  default     = "firestore"

  validation {
    condition     = contains(["firestore", "bigtable"], var.state_store)
    error_message = "state_store must be firestore or bigtable."
  }

  validation {
    condition     = var.state_store == "bigtable" ? try(var.environment.bigtable.instance, null) != null : true
    error_message = "state_store = bigtable needs the environment's Bigtable instance: set the environment module's bigtable variable."
  }
}

variable "deletion_protection" {
  description = "Refuse to delete the SSF's database (its state) and service: Firestore's delete protection and Terraform's deletion policy PREVENT. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "environment_variables" {
  description = "Extra environment variables for the SSF's service (application configuration). Names starting with SSFKIT_ are reserved, and Cloud Run sets PORT and K_*."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.environment_variables) : !startswith(k, "SSFKIT_")])
    error_message = "environment_variables must not set SSFKIT_* names: the module sets them from its own variables."
  }

  validation {
    condition     = alltrue([for k in keys(var.environment_variables) : !contains(["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"], k)])
    error_message = "environment_variables must not set PORT, K_SERVICE, K_REVISION or K_CONFIGURATION: Cloud Run sets them."
  }
}

variable "tags" {
  description = "Labels for every resource that takes labels (topics, subscriptions, the service), over the environment's; the module adds ssfkit-ssf."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.tags : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "tags are Google Cloud labels: keys of lower-case letters, digits, _ or -, starting with a letter, at most 63 characters; values of the same characters, at most 63."
  }

  validation {
    condition     = length(merge(var.environment.tags, var.tags)) <= 62
    error_message = "tags and the environment's labels must be at most 62 together (Google allows 64; ssfkit adds its own)."
  }
}

variable "key_retention_seconds" {
  description = "How long the answer to a collected instance (an idempotency key) is kept: a request with the key within it gets the recorded answer, after it a clear 'expired' refusal, never a second run."
  type        = number
  default     = 86400

  validation {
    condition     = var.key_retention_seconds > var.gc_bound_seconds && floor(var.key_retention_seconds) == var.key_retention_seconds
    error_message = "key_retention_seconds must be a whole number of seconds exceeding gc_bound_seconds (T): a collected instance's key must be remembered longer than any execution of it can run."
  }
}

variable "max_attempts" {
  description = "How many times the intent collector launches an instance that never finishes before it records the instance's failure (with the last error) instead: a deterministic failure is not retried, and paid for, without end."
  type        = number
  default     = 10

  validation {
    condition     = var.max_attempts >= 1 && var.max_attempts <= 1000 && floor(var.max_attempts) == var.max_attempts
    error_message = "max_attempts must be a whole number from 1 to 1000."
  }
}
variable "provenance" {
  description = "What the SSF records for provenance (docs/provenance.md): off, metadata (instances, calls, the items and versions each step read and wrote, digests) or full (the values too). Its garbage collector exports the records to provenance_sink."
  type        = string
  default     = "off"

  validation {
    condition     = contains(["off", "metadata", "full"], var.provenance)
    error_message = "provenance must be off, metadata or full."
  }

  validation {
    condition     = var.provenance == "off" || var.provenance_sink != null
    error_message = "provenance = metadata or full needs provenance_sink: the environment module's provenance_sink output (set its provenance_retention_days)."
  }
}

variable "provenance_sink" {
  description = "Where the garbage collector exports provenance: a gs://BUCKET?prefix=P URL, the environment module's provenance_sink output. The SSF's identity may put objects only in its own partitions (P/TABLE/ssf=NAME/)."
  type        = string
  default     = null

  validation {
    condition     = var.provenance_sink == null || can(regex("^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](\\?([A-Za-z_]+=[A-Za-z0-9._/-]*)(&[A-Za-z_]+=[A-Za-z0-9._/-]*)*)?$", var.provenance_sink))
    error_message = "provenance_sink must be a gs://BUCKET?prefix=P URL (the environment module's provenance_sink output)."
  }
}
