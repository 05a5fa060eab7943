terraform {
  # Variable validations that compare two variables need Terraform 1.9.
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 9.0"
    }
  }
}
