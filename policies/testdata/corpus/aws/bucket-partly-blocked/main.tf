# A bucket, encrypted, whose public access block lets public bucket policies in.
resource "aws_s3_bucket" "extra" {
  bucket = "corpus-extra-123456789012"
}

resource "aws_s3_bucket_public_access_block" "extra" {
  bucket                  = aws_s3_bucket.extra.bucket
  block_public_acls       = true
  block_public_policy     = false
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "extra" {
  bucket = aws_s3_bucket.extra.bucket
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}
