variable "name" {
  description = "The coordination service's name within its environment (lower-case letters, digits, hyphens; at most 16 characters): every resource is named <environment>-<name>-coord-..."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 16 lower-case letters, digits or hyphens, starting with a letter and not ending with a hyphen (bucket, function and role names are built from it)."
  }
}

variable "environment" {
  description = "The environment's name prefix (the environment module's `name` output)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.environment))
    error_message = "environment must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters."
  }
}

variable "artifact" {
  description = "Path to the coordination functions' deployment zip: a `bootstrap` for the provided.al2023 runtime built from ./adapters/host/coordhost/lambda (internal/build.AWSLambda). The writer and the heartbeat run it; SSFKIT_COORD_ROLE tells them apart."
  type        = string

  validation {
    condition     = endswith(var.artifact, ".zip")
    error_message = "artifact must be the path of a .zip file with a bootstrap executable."
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
  description = "The timeout of the writer and the heartbeat functions."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 3 && var.function_timeout_seconds <= 900 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 3 to 900 (Lambda's limit)."
  }
}

variable "memory_mb" {
  description = "Memory of the writer and the heartbeat functions, in MB."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 10240
    error_message = "memory_mb must be from 128 to 10240 (Lambda's limits)."
  }
}

variable "heartbeat_every_minutes" {
  description = "The heartbeat's period in minutes: it expires the sessions whose clients stopped heartbeating and writes snapshots."
  type        = number
  default     = 1

  validation {
    condition     = var.heartbeat_every_minutes >= 1 && var.heartbeat_every_minutes <= 1440 && floor(var.heartbeat_every_minutes) == var.heartbeat_every_minutes
    error_message = "heartbeat_every_minutes must be a whole number of minutes from 1 to 1440."
  }
}

variable "max_receive_count" {
  description = "Deliveries of a request to the writer before SQS moves it to the dead-letter queue."
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
  description = "Customer-managed KMS key (ARN) for the table, queues, bucket and logs (the environment module's `encryption_key`). Null: AWS-managed encryption, still on."
  type        = string
  default     = null
}

variable "encryption_key_alias" {
  description = "The alias of encryption_key (the environment module's `encryption_key_alias`, alias/...). Set, the identities reach the key through it, so the plan shows their whole policies on a first deployment."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key_alias == null || can(regex("^alias/[A-Za-z0-9/_-]+$", var.encryption_key_alias))
    error_message = "encryption_key_alias must be alias/NAME (letters, digits, /, _ and -)."
  }
}

variable "point_in_time_recovery" {
  description = "Continuous backups of the table."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Refuse to delete the table, and keep the bucket from being emptied by a destroy. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "log_retention_days" {
  description = "Retention of the functions' CloudWatch logs."
  type        = number
  default     = 30
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
