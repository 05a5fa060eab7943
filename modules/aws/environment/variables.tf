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
