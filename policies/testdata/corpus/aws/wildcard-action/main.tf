# Everything on everything, on the SSF's role.
resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = local.role
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "*", Resource = "*" }] })
}
