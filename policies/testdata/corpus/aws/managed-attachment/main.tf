# A managed full-access policy attached to the SSF's role.
resource "aws_iam_role_policy_attachment" "extra" {
  role       = local.role
  policy_arn = "arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess"
}
