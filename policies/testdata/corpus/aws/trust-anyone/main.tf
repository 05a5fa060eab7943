# An SSF-named role that any AWS principal may assume.
resource "aws_iam_role" "extra" {
  name               = "corpus-b-ssf"
  assume_role_policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { AWS = "*" } }] })
}
