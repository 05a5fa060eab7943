variable "artifact" {
  description = "The zip `ssfkit build --cloud azure --app bank` wrote."
  type        = string
}

variable "name" {
  description = "The environment's name."
  type        = string
  default     = "bank"
}

variable "location" {
  description = "The Azure region (one with Flex Consumption and zone-redundant storage)."
  type        = string
  default     = "westeurope"
}

variable "subscription_id" {
  description = "The Azure subscription to deploy to (the azurerm provider requires it)."
  type        = string
}

variable "throwaway" {
  description = "A test environment: no deletion protection, no point-in-time restore."
  type        = bool
  default     = false
}

variable "provenance" {
  description = "What the SSFs record for provenance (off, metadata, full), kept 30 days in each SSF's own account."
  type        = string
  default     = "metadata"
}
