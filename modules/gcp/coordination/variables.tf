variable "name" {
  description = "The coordination service's name within its environment (lower-case letters, digits, hyphens; at most 16 characters): its resources are named <environment>-<name>-coord-..."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 16 lower-case letters, digits or hyphens, starting with a letter and not ending with a hyphen."
  }
}

variable "environment" {
  description = "The environment module's `context` output: project, region, key, labels, and the scheduler's service account (the heartbeat's schedule presents it)."
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
  description = "The coordination functions' container image (built from ./adapters/host/coordhost/http: `ssfkit build --cloud gcp --coordination`), by digest or tag. The writer's and the heartbeat's services run it; SSFKIT_COORD_ROLE tells them apart."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/[^ ]+(@sha256:[0-9a-f]{64}|:[A-Za-z0-9_.-]+)$", var.artifact))
    error_message = "artifact must be a container image reference, REGISTRY/PATH@sha256:DIGEST or REGISTRY/PATH:TAG."
  }
}

variable "function_timeout_seconds" {
  description = "The request timeout of the writer's and the heartbeat's services (and the push's ack deadline, within Pub/Sub's 10..600 s)."
  type        = number
  default     = 60

  validation {
    condition     = var.function_timeout_seconds >= 10 && var.function_timeout_seconds <= 3600 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds from 10 to 3600 (Cloud Run's limit)."
  }
}

variable "memory_mb" {
  description = "Memory of each service's instances, in MB (Cloud Run's CPU follows it)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 32768
    error_message = "memory_mb must be from 128 to 32768 (Cloud Run's limits)."
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
  description = "Pushes of a request to the writer before Pub/Sub moves it to the dead-letter topic (max_delivery_attempts: 5 to 100)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 5 && var.max_receive_count <= 100 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number from 5 to 100 (Pub/Sub's dead-letter policy)."
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
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) for the database, topics and bucket. Null: the environment's key, or Google-managed keys when it has none."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.encryption_key))
    error_message = "encryption_key must be a Cloud KMS key name, projects/P/locations/L/keyRings/R/cryptoKeys/K, or null."
  }
}

variable "point_in_time_recovery" {
  description = "Point-in-time recovery of the Firestore database."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Refuse to delete the database and the services, and keep the bucket from being emptied by a destroy. Turn off only for throwaway environments."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Labels for every resource that takes labels (added to the environment's)."
  type        = map(string)
  default     = {}
}
