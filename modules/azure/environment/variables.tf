variable "name" {
  description = "The environment's name: the prefix of its SSFs' resources (e.g. travel-prod)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be lower-case letters, digits or hyphens, starting with a letter, at most 24 characters."
  }
}

variable "location" {
  description = "The Azure region of the environment's resources (e.g. westeurope): a region that offers the Flex Consumption plan and zone-redundant storage."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]+$", replace(lower(var.location), " ", "")))
    error_message = "location must be an Azure region name, e.g. westeurope."
  }
}

variable "resource_group_name" {
  description = "An existing resource group to put the environment in. Null: the module creates ssfkit-<name> in location."
  type        = string
  default     = null

  validation {
    condition     = var.resource_group_name == null || can(regex("^[-\\w.()]{1,89}[-\\w()]$", var.resource_group_name))
    error_message = "resource_group_name must be a resource group name: letters, digits, underscores, hyphens, periods and parentheses, at most 90 characters, not ending in a period."
  }
}

variable "ssfs" {
  description = "The names of the environment's SSFs: the environment creates one user-assigned identity for each, so that every SSF module can grant its peers' identities the right to invoke it."
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

variable "encryption_key" {
  description = "Customer-managed key for the SSFs' state and queues: a Key Vault key ID, versionless for automatic rotation (https://VAULT.vault.azure.net/keys/KEY). The vault must be in the provider's subscription and use Azure RBAC; the module grants each SSF's identity Key Vault Crypto Service Encryption User on the key. Null: Microsoft-managed keys, still encrypted."
  type        = string
  default     = null

  validation {
    condition     = var.encryption_key == null || can(regex("^https://[A-Za-z0-9-]{3,24}\\.vault\\.[a-z0-9.]+/keys/[A-Za-z0-9-]{1,127}(/[0-9a-f]{32})?/?$", var.encryption_key))
    error_message = "encryption_key must be a Key Vault key ID, https://VAULT.vault.azure.net/keys/KEY (versionless for automatic rotation)."
  }
}

variable "tags" {
  description = "Tags for every resource of the environment and its SSFs; the environment adds ssfkit-environment = name."
  type        = map(string)
  default     = {}
}

variable "provenance_retention_days" {
  description = "Keep the SSFs' provenance (docs/provenance.md) this many days, independent of the garbage collector's bound: each SSF that captures it keeps it in a container of its own storage account, which deletes objects this long after they were written. 0: SSFs capture provenance only into a sink of their own."
  type        = number
  default     = 0

  validation {
    condition     = var.provenance_retention_days >= 0 && floor(var.provenance_retention_days) == var.provenance_retention_days
    error_message = "provenance_retention_days must be a whole number of days, 0 for none."
  }
}
