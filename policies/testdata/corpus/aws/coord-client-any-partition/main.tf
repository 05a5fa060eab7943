# A client policy that writes every partition of the table: no dynamodb:LeadingKeys condition.
resource "aws_iam_policy" "extra" {
  name = "corpus-b-coord-client"
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = ["dynamodb:PutItem", "dynamodb:UpdateItem"], Resource = "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-b-coord"
  }] })
}
