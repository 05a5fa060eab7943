# A role the kit does not make, with broad rights: nothing shows it is not an SSF's identity.
resource "aws_iam_role" "extra" {
  name               = "corpus-admin"
  assume_role_policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "lambda.amazonaws.com" } }] })
}

resource "aws_iam_role_policy" "extra" {
  name   = "extra"
  role   = aws_iam_role.extra.name
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "dynamodb:*", Resource = "*" }] })
}
