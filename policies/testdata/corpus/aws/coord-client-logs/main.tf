# A client policy that appends to the writer's logs.
resource "aws_iam_policy" "extra" {
  name = "corpus-b-coord-client"
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = ["logs:CreateLogStream", "logs:PutLogEvents"], Resource = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/corpus-b-coord-writer:*"
  }] })
}
