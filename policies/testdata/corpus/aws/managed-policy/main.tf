# A managed policy that is not a coordination client policy.
resource "aws_iam_policy" "extra" {
  name = "corpus-readers"
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = "dynamodb:GetItem", Resource = local.table
  }] })
}
