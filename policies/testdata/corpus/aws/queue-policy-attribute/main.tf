# A queue's own policy attribute, for anyone.
resource "aws_sqs_queue" "extra" {
  name                    = "corpus-extra"
  sqs_managed_sse_enabled = true
  policy                  = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sqs:*", Resource = "*", Principal = "*" }] })
}
