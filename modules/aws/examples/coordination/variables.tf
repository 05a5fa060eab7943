variable "artifact" {
  description = "The zip with the coordination functions' bootstrap (built from ./adapters/host/coordhost/lambda)."
  type        = string
}

variable "name" {
  description = "The environment's name."
  type        = string
  default     = "coord"
}

variable "customer_managed_key" {
  description = "Encrypt with the environment's own KMS key (false: AWS-managed keys)."
  type        = bool
  default     = true
}

variable "throwaway" {
  description = "A test environment: no deletion protection (the bucket is emptied on destroy), the shortest key deletion window."
  type        = bool
  default     = false
}
