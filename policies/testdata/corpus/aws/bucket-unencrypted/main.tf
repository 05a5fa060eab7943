# A private bucket without a default encryption of the plan.
resource "aws_s3_bucket" "extra" {
  bucket = "corpus-extra-123456789012"
}

resource "aws_s3_bucket_public_access_block" "extra" {
  bucket                  = aws_s3_bucket.extra.bucket
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}
