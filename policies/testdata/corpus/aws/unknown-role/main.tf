# A policy on a role whose name is known only after apply: whose policy it is cannot be told.
resource "aws_iam_role" "extra" {
  name_prefix        = "corpus-"
  assume_role_policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "lambda.amazonaws.com" } }] })
}

resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = aws_iam_role.extra.id
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:*", Resource = "*" }] })
}
