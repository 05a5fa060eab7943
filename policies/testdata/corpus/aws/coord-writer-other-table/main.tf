# The coordination writer's role reaches an SSF's table.
resource "aws_iam_role_policy" "extra" {
  name       = "extra"
  role       = "corpus-a-coord-writer"
  depends_on = [module.coordination]
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = ["dynamodb:GetItem", "dynamodb:PutItem"], Resource = "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-bank"
  }] })
}
