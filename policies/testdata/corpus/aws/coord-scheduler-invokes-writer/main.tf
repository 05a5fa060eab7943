# The heartbeat's scheduler role may invoke the writer too.
resource "aws_iam_role_policy" "extra" {
  name       = "extra"
  role       = "corpus-a-coord-scheduler"
  depends_on = [module.coordination]
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = "lambda:InvokeFunction", Resource = "arn:aws:lambda:us-east-1:123456789012:function:corpus-a-coord-writer"
  }] })
}
