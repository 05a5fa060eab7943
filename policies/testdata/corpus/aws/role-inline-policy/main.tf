# An SSF role declared with an inline policy on the role itself.
resource "aws_iam_role" "extra" {
  name               = "corpus-b-ssf"
  assume_role_policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "lambda.amazonaws.com" } }] })
  inline_policy {
    name   = "extra"
    policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:*", Resource = "*" }] })
  }
}
