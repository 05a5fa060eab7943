variable "name" {
  description = "The SSF's name, as its handler is registered in the ssfkit runtime (letters, digits, underscores)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", var.name))
    error_message = "name must be letters, digits or underscores, starting with a letter or underscore, at most 63 characters: the runtime uses it as the SSF's name."
  }

  validation {
    condition     = length("${var.environment}-${var.name}") <= 40
    error_message = "environment and name together must be at most 39 characters: function, role and schedule names add up to 18 more, and AWS allows 64."
  }
}

variable "environment" {
  description = "The environment's name prefix (the environment module's `name` output): every resource is named <environment>-<name>-..."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.environment))
    error_message = "environment must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters (AWS name limits leave room for the SSF's name)."
  }
}

variable "artifact" {
  description = "Path to the function's deployment zip, built by `ssfkit build --cloud aws` (a `bootstrap` executable for the provided.al2023 runtime)."
  type        = string

  validation {
    condition     = endswith(var.artifact, ".zip")
    error_message = "artifact must be the path of a .zip file built by `ssfkit build --cloud aws`."
  }
}

variable "architecture" {
  description = "The instruction set the artifact was built for: arm64 (the default of `ssfkit build --cloud aws`) or x86_64."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

variable "function_timeout_seconds" {
  description = "The SSF function's timeout: the bound on one execution's lifetime (the runtime's Lifetime). The collectors get the same timeout."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 3 && var.function_timeout_seconds <= 900 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 3 to 900 (Lambda's limit)."
  }
}

variable "gc_bound_seconds" {
  description = "Beldi's T: the garbage collector removes an instance's logs this long after it finished. It must exceed the function timeout, so no execution can still use what is removed, and the delivery window (output delivery_window_seconds), so no start is delivered after it."
  type        = number
  # 15 minutes: above every cloud's delivery window at the default timeout and receive count
  # (720 s here; Google's Pub/Sub keeps a message at least 10 minutes). A larger T only keeps
  # logs longer.
  default = 900

  validation {
    condition     = var.gc_bound_seconds > var.function_timeout_seconds
    error_message = "gc_bound_seconds (T) must exceed function_timeout_seconds: an execution still running after T could find its logs collected and repeat an effect."
  }

  validation {
    condition     = var.gc_bound_seconds > local.delivery_window_seconds
    error_message = "gc_bound_seconds (T=${var.gc_bound_seconds}) must exceed the longest delivery window (${local.delivery_window_seconds} s: SQS retention ${local.start_retention_seconds} s + visibility ${local.queue_visibility_seconds} s = ${local.delivery_windows.queue} s; max_receive_count ${var.max_receive_count} x visibility ${local.queue_visibility_seconds} s = ${local.delivery_windows.redeliveries} s; Lambda event age ${local.async_max_event_age_seconds} s; the visibility is 2 x function_timeout_seconds, the retention max_receive_count x visibility): raise gc_bound_seconds, or lower max_receive_count or function_timeout_seconds."
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
  description = "Memory of the SSF function and its collectors, in MB."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 10240
    error_message = "memory_mb must be from 128 to 10240 (Lambda's limits)."
  }
}

variable "intent_collector_every_minutes" {
  description = "The intent collector's period in minutes: it re-runs unfinished instances."
  type        = number
  default     = 1

  validation {
    condition     = var.intent_collector_every_minutes >= 1 && floor(var.intent_collector_every_minutes) == var.intent_collector_every_minutes
    error_message = "intent_collector_every_minutes must be a whole number of minutes, at least 1."
  }
}

variable "garbage_collector_every_minutes" {
  description = "The garbage collector's period in minutes."
  type        = number
  default     = 5

  validation {
    condition     = var.garbage_collector_every_minutes >= 1 && floor(var.garbage_collector_every_minutes) == var.garbage_collector_every_minutes
    error_message = "garbage_collector_every_minutes must be a whole number of minutes, at least 1."
  }
}

variable "max_receive_count" {
  description = "Deliveries of an asynchronous start before SQS moves it to the dead-letter queue."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be from 1 to 1000."
  }
}

variable "peers" {
  description = "Names of the SSFs of the same environment this SSF calls, or is called by (a callee reports its result by invoking its caller). The identity may invoke their functions and no other."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.peers : can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", p))])
    error_message = "peers must be SSF names (letters, digits, underscores)."
  }
}

variable "encryption_key" {
  description = "Customer-managed KMS key (ARN) for the table, queues and logs (the environment module's `encryption_key`). Null: AWS-managed encryption, still on."
  type        = string
  default     = null
}

variable "encryption_key_alias" {
  description = "The alias of encryption_key (the environment module's `encryption_key_alias`, alias/...). Set, the SSF's policy reaches the key through it, so the plan shows the whole policy on a first deployment, when the key's ARN is not known yet."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key_alias == null || can(regex("^alias/[A-Za-z0-9/_-]+$", var.encryption_key_alias))
    error_message = "encryption_key_alias must be alias/NAME (letters, digits, /, _ and -)."
  }
}

variable "point_in_time_recovery" {
  description = "Continuous backups of the SSF's table."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Refuse to delete the SSF's table (its state). Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "log_retention_days" {
  description = "Retention of the functions' CloudWatch logs."
  type        = number
  default     = 30
}

variable "environment_variables" {
  description = "Extra environment variables for the SSF function (application configuration). Names starting with SSFKIT_ are reserved."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.environment_variables) : !startswith(k, "SSFKIT_")])
    error_message = "environment_variables must not set SSFKIT_* names: the module sets them from its own variables."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
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
  description = "Where the garbage collector exports provenance: an s3://BUCKET?region=R&prefix=P URL, the environment module's provenance_sink output. The SSF's identity may put objects only in its own partitions (P/TABLE/ssf=NAME/)."
  type        = string
  default     = null

  validation {
    condition     = var.provenance_sink == null || can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\\?([A-Za-z_]+=[A-Za-z0-9._/-]*)(&[A-Za-z_]+=[A-Za-z0-9._/-]*)*)?$", var.provenance_sink))
    error_message = "provenance_sink must be an s3://BUCKET?region=R&prefix=P URL (the environment module's provenance_sink output)."
  }
}
