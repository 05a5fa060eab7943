variable "name" {
  description = "The environment's name: the prefix of every resource its SSFs create (e.g. travel-prod)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters."
  }
}

variable "customer_managed_key" {
  description = "Create a customer-managed KMS key (rotated yearly) that the SSFs encrypt their tables, queues and logs with. False: AWS-managed keys, still encrypted."
  type        = bool
  default     = true
}

variable "key_deletion_window_days" {
  description = "Days KMS waits before deleting the key after a destroy (7 to 30)."
  type        = number
  default     = 30

  validation {
    condition     = var.key_deletion_window_days >= 7 && var.key_deletion_window_days <= 30
    error_message = "key_deletion_window_days must be from 7 to 30."
  }
}

variable "tags" {
  description = "Tags for every resource; the environment adds ssfkit-environment = name."
  type        = map(string)
  default     = {}
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

variable "deletion_protection" {
  description = "Refuse to destroy the provenance bucket while it holds records (false: a destroy empties it)."
  type        = bool
  default     = true
}
