variable "project" {
  description = "The Google Cloud project (ID) to deploy the bank to."
  type        = string
}

variable "region" {
  description = "The region of the bank's services, databases and schedules."
  type        = string
  default     = "europe-west1"
}

variable "image" {
  description = "The container image `ssfkit build --cloud gcp --app bank --image REF --push` pushed (e.g. europe-west1-docker.pkg.dev/PROJECT/ssfkit/bank:v1)."
  type        = string
}

variable "name" {
  description = "The environment's name."
  type        = string
  default     = "bank"
}

variable "throwaway" {
  description = "A test environment: no deletion protection on the databases and services."
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

variable "bigtable_zone" {
  description = "Null (the default): each SSF's state in a Firestore database of its own. A zone of the region (europe-west1-b): in the environment's Bigtable instance there, a table of each SSF's own."
  type        = string
  default     = null
}

variable "provenance" {
  description = "What the SSFs record for provenance (off, metadata, full), kept 30 days in the environment's bucket."
  type        = string
  default     = "metadata"
}
