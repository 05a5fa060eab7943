variable "name" {
  description = "The SSF's name, as its handler is registered in the ssfkit runtime (letters, digits, underscores)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", var.name))
    error_message = "name must be letters, digits or underscores, starting with a letter or underscore, at most 63 characters: the runtime uses it as the SSF's name."
  }
}

variable "environment" {
  description = "The environment module's `context` output: its name, location, resource group, tags, the SSFs' identities and the peer invoker role."
  type = object({
    name                = string
    location            = string
    resource_group_name = string
    resource_group_id   = string
    encryption_key      = optional(string)
    tags                = optional(map(string), {})
    identities = map(object({
      id           = string
      principal_id = string
      client_id    = string
    }))
    peer_invoker_role_definition_id = string
    provenance_retention_days       = optional(number, 0)
  })

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.environment.name))
    error_message = "environment.name must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters (pass the environment module's context output)."
  }

  validation {
    condition     = can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+$", var.environment.resource_group_id))
    error_message = "environment.resource_group_id must be a resource group's ID, /subscriptions/S/resourceGroups/RG (pass the environment module's context output)."
  }

  validation {
    condition     = contains(keys(var.environment.identities), var.name)
    error_message = "The environment has no identity for this SSF: add its name to the environment module's ssfs."
  }
}

variable "artifact" {
  description = "Path to the function app's zip, built by `ssfkit build --cloud azure` (host.json, the `handler` custom handler and a function.json per function)."
  type        = string

  validation {
    condition     = endswith(var.artifact, ".zip")
    error_message = "artifact must be the path of a .zip file built by `ssfkit build --cloud azure`."
  }
}

variable "function_timeout_seconds" {
  description = "The bound on one execution (functionTimeout of the function app, which the collectors share); the runtime's lifetime is one second less. At most 230: Azure ends an HTTP-triggered call (a peer's synchronous invoke) after 230 seconds whatever the function timeout."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 3 && var.function_timeout_seconds <= 230 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 3 to 230 (Azure's limit on an HTTP-triggered call)."
  }
}

variable "gc_bound_seconds" {
  description = "Beldi's T: the garbage collector removes an instance's logs this long after it finished. It must exceed the function timeout, so no execution can still use what is removed, and the delivery window (output delivery_window_seconds), so no start is delivered after it."
  type        = number
  # 15 minutes, the same on every cloud: above the delivery window at the default timeout and
  # receive count (450 s here; Google's Pub/Sub keeps a message at least 10 minutes). A larger
  # T only keeps logs longer.
  default = 900

  validation {
    condition     = var.gc_bound_seconds > var.function_timeout_seconds && floor(var.gc_bound_seconds) == var.gc_bound_seconds
    error_message = "gc_bound_seconds (T) must be a whole number of seconds exceeding function_timeout_seconds: an execution still running after T could find its logs collected and repeat an effect."
  }

  validation {
    condition     = var.gc_bound_seconds > local.delivery_window_seconds
    error_message = "gc_bound_seconds (T=${var.gc_bound_seconds}) must exceed the longest delivery window (${local.delivery_window_seconds} s: message time-to-live ${local.message_ttl_seconds} s; max_receive_count ${var.max_receive_count} x (function_timeout_seconds ${local.timeout} s + retry delay ${local.queue_retry_delay_seconds} s) = ${local.delivery_windows.redeliveries} s; the time-to-live is that span, at least 60 s): raise gc_bound_seconds, or lower max_receive_count or function_timeout_seconds."
  }
}

variable "relaunch_delay_seconds" {
  description = "How long after an instance's last launch the intent collector may launch it again. Re-running a live instance is safe, but a delay below an execution's duration duplicates work."
  type        = number
  default     = 120

  validation {
    condition     = var.relaunch_delay_seconds >= 1 && floor(var.relaunch_delay_seconds) == var.relaunch_delay_seconds
    error_message = "relaunch_delay_seconds must be a whole number of seconds, at least 1."
  }

  validation {
    condition     = var.relaunch_delay_seconds >= var.function_timeout_seconds
    error_message = "relaunch_delay_seconds must be at least function_timeout_seconds: a relaunch while the first execution may still run only duplicates it (a paid invocation)."
  }
}

variable "memory_mb" {
  description = "Memory of the function app's instances in MB. Flex Consumption offers 512, 2048 and 4096 MB instances: the app gets the smallest at least this large (the default 256 gets 512)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 4096 && floor(var.memory_mb) == var.memory_mb
    error_message = "memory_mb must be a whole number from 128 to 4096: Flex Consumption instances have 512, 2048 or 4096 MB, and the app gets the smallest at least memory_mb."
  }
}

variable "intent_collector_every_minutes" {
  description = "The intent collector's period in minutes: it re-runs unfinished instances. From 1 to 59 (the timer fires at the minutes past the hour divisible by it), or whole hours up to 1440."
  type        = number
  default     = 1

  validation {
    condition = (floor(var.intent_collector_every_minutes) == var.intent_collector_every_minutes &&
      var.intent_collector_every_minutes >= 1 && (var.intent_collector_every_minutes < 60 ||
    (var.intent_collector_every_minutes % 60 == 0 && var.intent_collector_every_minutes <= 1440)))
    error_message = "intent_collector_every_minutes must be a whole number of minutes from 1 to 59, or a multiple of 60 up to 1440 (a timer's NCRONTAB schedule)."
  }
}

variable "garbage_collector_every_minutes" {
  description = "The garbage collector's period in minutes. From 1 to 59 (the timer fires at the minutes past the hour divisible by it), or whole hours up to 1440."
  type        = number
  default     = 5

  validation {
    condition = (floor(var.garbage_collector_every_minutes) == var.garbage_collector_every_minutes &&
      var.garbage_collector_every_minutes >= 1 && (var.garbage_collector_every_minutes < 60 ||
    (var.garbage_collector_every_minutes % 60 == 0 && var.garbage_collector_every_minutes <= 1440)))
    error_message = "garbage_collector_every_minutes must be a whole number of minutes from 1 to 59, or a multiple of 60 up to 1440 (a timer's NCRONTAB schedule)."
  }
}

variable "max_receive_count" {
  description = "Deliveries of an asynchronous start before the queue trigger moves it to the poison queue (the host's maxDequeueCount)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number from 1 to 1000."
  }
}

variable "peers" {
  description = "Names of the SSFs of the same environment this SSF calls, or is called by (a callee reports its result by invoking its caller). Only their identities may read this SSF's function keys, and SSFKIT_PEERS names only their function apps."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.peers : can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", p))])
    error_message = "peers must be SSF names (letters, digits, underscores)."
  }

  validation {
    condition     = alltrue([for p in var.peers : contains(keys(var.environment.identities), p)])
    error_message = "Every peer must be an SSF of the environment: add it to the environment module's ssfs."
  }
}

variable "encryption_key" {
  description = "Customer-managed key for the SSF's storage account (state, queues, host storage): a Key Vault key ID, versionless for automatic rotation (the environment's `context.encryption_key`). The storage account uses it with the SSF's identity, which the environment module grants the key. Null: Microsoft-managed keys, still encrypted."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^https://[A-Za-z0-9-]{3,24}\\.vault\\.[a-z0-9.]+/keys/[A-Za-z0-9-]{1,127}(/[0-9a-f]{32})?/?$", var.encryption_key))
    error_message = "encryption_key must be a Key Vault key ID, https://VAULT.vault.azure.net/keys/KEY (versionless for automatic rotation)."
  }
}

variable "point_in_time_recovery" {
  description = "Azure Tables have no point-in-time restore. True turns on what the storage account offers: blob versioning, change feed and point-in-time restore (7 days) of the host storage's blobs (the deployed package, the function keys). The table itself is protected by deletion_protection, not by backups."
  type        = bool
  default     = true
}

variable "storage_replication" {
  description = "The storage account's redundancy: ZRS (the default: the state survives a zone's loss), GZRS or RAGZRS (and a region's loss), or LRS, GRS or RAGRS for regions without availability zones."
  type        = string
  default     = "ZRS"

  validation {
    condition     = contains(["LRS", "ZRS", "GRS", "RAGRS", "GZRS", "RAGZRS"], var.storage_replication)
    error_message = "storage_replication must be one of LRS, ZRS, GRS, RAGRS, GZRS or RAGZRS."
  }
}

variable "deletion_protection" {
  description = "Refuse to destroy the SSF's state: a CanNotDelete lock on its storage account (which also covers its table, queues and containers), and a guard that fails `terraform destroy` until this is set to false and applied. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "environment_variables" {
  description = "Extra app settings of the function app (application configuration; Key Vault references resolve with the SSF's identity). Names starting with SSFKIT_ are reserved; the module's own settings (AZURE_CLIENT_ID, AzureWebJobsStorage__*, AzureFunctionsJobHost__*) take precedence."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.environment_variables) : !startswith(k, "SSFKIT_")])
    error_message = "environment_variables must not set SSFKIT_* names: the module sets them from its own variables."
  }
}

variable "tags" {
  description = "Tags for every resource, added to the environment's tags."
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
    condition     = var.provenance == "off" || var.provenance_sink != null || var.environment.provenance_retention_days > 0
    error_message = "provenance = metadata or full keeps records in the SSF's own storage account for the environment's provenance_retention_days: set it on the environment module, or give provenance_sink."
  }
}

variable "provenance_sink" {
  description = "Where the garbage collector exports provenance: null (the default) for the provenance container of the SSF's own storage account, kept for the environment's provenance_retention_days; or an azblob://CONTAINER?storage_account=A&prefix=P URL of a sink the SSF's identity may write (granted outside this module)."
  type        = string
  default     = null

  validation {
    condition     = var.provenance_sink == null || can(regex("^azblob://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](\\?([A-Za-z_]+=[A-Za-z0-9._/-]*)(&[A-Za-z_]+=[A-Za-z0-9._/-]*)*)?$", var.provenance_sink))
    error_message = "provenance_sink must be an azblob://CONTAINER?storage_account=A&prefix=P URL, or null for the SSF's own account."
  }
}
