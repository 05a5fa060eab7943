# A queue with encryption turned off: the plan carries kms_master_key_id as null.
resource "aws_sqs_queue" "extra" {
  name                    = "corpus-extra"
  sqs_managed_sse_enabled = false
}
