# The SSF's role may put provenance beyond its own partitions: another SSF's, every table's.
resource "aws_iam_role_policy" "extra" {
  name = "extra"
  role = local.role
  policy = jsonencode({ Version = "2012-10-17", Statement = [{
    Effect = "Allow", Action = "s3:PutObject",
    Resource = [
      "arn:aws:s3:::corpus-provenance-123456789012/provenance/invocations/ssf=b/*",
      "arn:aws:s3:::corpus-provenance-123456789012/provenance/*/ssf=a/*",
    ]
  }] })
}
