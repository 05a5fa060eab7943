# NotResource reaches every resource it does not name: other SSFs' tables.
resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = local.role
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:GetItem", NotResource = local.table }] })
}
