# The base every AWS case of the corpus adds its violation to: one SSF (corpus-a) of the ssf
# module, as a real deployment has it. The corpus test plans each case against moto.
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

module "ssf" {
  source              = "../../../../../modules/aws/ssf"
  name                = "a"
  environment         = "corpus"
  artifact            = var.artifact
  deletion_protection = false
  # Provenance to the environment's bucket: the kit's grant of its own partitions is checked too.
  provenance      = "metadata"
  provenance_sink = "s3://corpus-provenance-123456789012?region=us-east-1&prefix=provenance"
}

locals {
  role  = "corpus-a-ssf"
  table = "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-a"
}
