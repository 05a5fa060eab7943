# The heartbeat's role consumes the request queue, which only the writer does.
resource "aws_iam_role_policy" "extra" {
  name       = "extra"
  role       = "corpus-a-coord-heartbeat"
  depends_on = [module.coordination]
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = ["sqs:ReceiveMessage", "sqs:DeleteMessage"], Resource = local.queue
  }] })
}
