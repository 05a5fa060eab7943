variable "name" {
  description = "The coordination service's name within its environment (lower-case letters, digits, hyphens; at most 16 characters)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 16 lower-case letters, digits or hyphens, starting with a letter and not ending with a hyphen."
  }
}

variable "environment" {
  description = "The environment module's `context` output: its name, location, resource group, tags and the peer invoker role (each function's identity reads its own app's keys with it)."
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
  })

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.environment.name))
    error_message = "environment.name must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters (pass the environment module's context output)."
  }

  validation {
    condition     = can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+$", var.environment.resource_group_id))
    error_message = "environment.resource_group_id must be a resource group's ID, /subscriptions/S/resourceGroups/RG (pass the environment module's context output)."
  }
}

variable "artifact" {
  description = "Path to the coordination function apps' zip (`ssfkit build --cloud azure --coordination`: host.json, the `handler` built from ./adapters/host/coordhost/http, and the `queue` and `heartbeat` functions). The writer's and the heartbeat's apps run it; SSFKIT_COORD_ROLE tells them apart."
  type        = string

  validation {
    condition     = endswith(var.artifact, ".zip")
    error_message = "artifact must be the path of a .zip file."
  }
}

variable "function_timeout_seconds" {
  description = "The bound on one execution of the writer or the heartbeat (the apps' functionTimeout)."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 5 && var.function_timeout_seconds <= 3600 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 5 to 3600."
  }
}

variable "memory_mb" {
  description = "Memory of the apps' instances in MB. Flex Consumption offers 512, 2048 and 4096 MB instances: each app gets the smallest at least this large (the default 256 gets 512)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 4096
    error_message = "memory_mb must be from 128 to 4096 (Flex Consumption's largest instance)."
  }
}

variable "heartbeat_every_minutes" {
  description = "The heartbeat's period in minutes: it expires the sessions whose clients stopped heartbeating and writes snapshots. From 1 to 59, or whole hours up to 1440."
  type        = number
  default     = 1

  validation {
    condition     = floor(var.heartbeat_every_minutes) == var.heartbeat_every_minutes && (var.heartbeat_every_minutes >= 1 && var.heartbeat_every_minutes <= 59 || var.heartbeat_every_minutes % 60 == 0 && var.heartbeat_every_minutes <= 1440)
    error_message = "heartbeat_every_minutes must be a whole number of minutes from 1 to 59, or whole hours up to 1440."
  }
}

variable "max_receive_count" {
  description = "Deliveries of a request to the writer before the queue trigger moves it to the poison queue (the host's maxDequeueCount)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number from 1 to 1000."
  }
}

variable "snapshot_every" {
  description = "Transactions between two snapshots of the tree (SSFKIT_COORD_SNAPSHOT_EVERY): the heartbeat writes one when the log has grown by this many since the last."
  type        = number
  default     = 10000

  validation {
    condition     = var.snapshot_every >= 1 && floor(var.snapshot_every) == var.snapshot_every
    error_message = "snapshot_every must be a whole number, at least 1."
  }
}

variable "encryption_key" {
  description = "Key Vault key (https://VAULT.vault.azure.net/keys/KEY[/VERSION], in a vault of the provider's subscription with Azure RBAC) that encrypts the storage account (table, queues, blobs), unwrapped with the writer's identity. Null: Microsoft-managed keys, still encrypted."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^https://[^.]+\\.vault\\.[^/]+/keys/[^/]+", var.encryption_key))
    error_message = "encryption_key must be a Key Vault key ID, https://VAULT.vault.azure.net/keys/KEY[/VERSION], or null."
  }
}

variable "point_in_time_recovery" {
  description = "Blob versioning, change feed and point-in-time restore of the storage account's blobs (the table's and queues' data have no restore in Azure Storage)."
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
  description = "Refuse to destroy the service's state: a CanNotDelete lock on its storage account (table, queues, containers), and a guard that fails `terraform destroy` until this is set to false and applied. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags for every resource (added to the environment's)."
  type        = map(string)
  default     = {}
}
