# A customer-managed policy and its attachment: the policy's ARN is known only after apply.
resource "aws_iam_policy" "extra" {
  name   = "corpus-extra"
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:*", Resource = "*" }] })
}

resource "aws_iam_role_policy_attachment" "extra" {
  role       = local.role
  policy_arn = aws_iam_policy.extra.arn
}
