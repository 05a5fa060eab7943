# The base the AWS coordination cases of the corpus add their violation to: one coordination
# service (corpus-a-coord) of the coordination module, as a real deployment has it. The corpus
# test plans each case against moto.
terraform {
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
  }
}

variable "artifact" {
  type = string
}

module "coordination" {
  source              = "../../../../../modules/aws/coordination"
  name                = "a"
  environment         = "corpus"
  artifact            = var.artifact
  deletion_protection = false
}

locals {
  table  = "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-a-coord"
  queue  = "arn:aws:sqs:us-east-1:123456789012:corpus-a-coord"
  bucket = "arn:aws:s3:::corpus-a-coord-123456789012"
}
