# A bucket, encrypted, whose public access is not blocked.
resource "aws_s3_bucket" "extra" {
  bucket = "corpus-extra-123456789012"
}

resource "aws_s3_bucket_server_side_encryption_configuration" "extra" {
  bucket = aws_s3_bucket.extra.bucket
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}
