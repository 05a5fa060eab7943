variable "artifact" {
  description = "The zip `ssfkit build --cloud aws --app bank` wrote."
  type        = string
}

variable "name" {
  description = "The environment's name."
  type        = string
  default     = "bank"
}

variable "throwaway" {
  description = "A test environment: no deletion protection, the shortest key deletion window."
  type        = bool
  default     = false
}

variable "provenance" {
  description = "What the SSFs record for provenance (off, metadata, full), kept 30 days in the environment's bucket."
  type        = string
  default     = "metadata"
}
