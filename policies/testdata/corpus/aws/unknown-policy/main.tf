# A policy built from an ARN known only after apply: it cannot be checked before, so it is denied.
resource "aws_dynamodb_table" "other" {
  name         = "corpus-other"
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"
  attribute {
    name = "pk"
    type = "S"
  }
  point_in_time_recovery {
    enabled = true
  }
  server_side_encryption {
    enabled = true
  }
}

resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = local.role
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:GetItem", Resource = aws_dynamodb_table.other.arn }] })
}
