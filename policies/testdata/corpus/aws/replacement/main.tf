# A replacement: stage 1 creates an encrypted queue; stage 2 renames it (delete, then create) and
# turns encryption off. What a replacement creates is checked like a creation.
variable "stage" {
  type    = number
  default = 1
}

resource "aws_sqs_queue" "extra" {
  name                    = "corpus-extra-${var.stage}"
  sqs_managed_sse_enabled = var.stage == 1
}
