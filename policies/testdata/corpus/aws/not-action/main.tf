# NotAction grants everything it does not name.
resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = local.role
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", NotAction = "iam:*", Resource = local.table }] })
}
