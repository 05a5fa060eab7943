variable "project" {
  description = "The Google Cloud project (ID) to deploy the coordination service to."
  type        = string
}

variable "region" {
  description = "The region of the services, database, bucket and schedule."
  type        = string
  default     = "europe-west1"
}

variable "image" {
  description = "The coordination functions' container image (`ssfkit build --cloud gcp --coordination`)."
  type        = string
}

variable "name" {
  description = "The environment's name."
  type        = string
  default     = "coord"
}

variable "throwaway" {
  description = "A test environment: no deletion protection (the bucket is emptied on destroy)."
  type        = bool
  default     = false
}

variable "project_number" {
  description = "The project's number. Null: read from the project; given (with a fake access_token), the plan needs no Google API."
  type        = string
  default     = null
}

variable "access_token" {
  description = "An OAuth access token for the provider instead of Application Default Credentials (null: ADC). A fake one lets an offline plan run."
  type        = string
  default     = null
  sensitive   = true
}
