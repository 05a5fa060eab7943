# What an application's SSFs share: a name prefix, tags, and the key that encrypts their state.
# Each SSF module gets its own table, queue, functions and identity from these.

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  tags = merge(var.tags, { "ssfkit-environment" = var.name })
}

data "aws_iam_policy_document" "key" {
  # The account administers the key; the SSFs' roles get use of it through their own policies.
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }

  # CloudWatch Logs encrypts the functions' log groups with it.
  statement {
    sid       = "LogsEncrypt"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${data.aws_region.current.name}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${data.aws_partition.current.partition}:logs:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:log-group:/aws/lambda/${var.name}-*"]
    }
  }
}

resource "aws_kms_key" "this" {
  count                   = var.customer_managed_key ? 1 : 0
  description             = "ssfkit environment ${var.name}: SSF tables, queues and logs"
  enable_key_rotation     = true
  deletion_window_in_days = var.key_deletion_window_days
  policy                  = data.aws_iam_policy_document.key.json
  tags                    = local.tags
}

resource "aws_kms_alias" "this" {
  count         = var.customer_managed_key ? 1 : 0
  name          = "alias/ssfkit-${var.name}"
  target_key_id = aws_kms_key.this[0].key_id
}

# --- Provenance --------------------------------------------------------------------------------

# The SSFs' garbage collectors export provenance here as Parquet objects (one per table and
# batch, partitioned by SSF and day: query them with Athena). Private, encrypted with the
# environment's key, kept provenance_retention_days by a lifecycle rule. Each SSF's identity may
# only put objects in its own partitions (the ssf module's grant); nothing here grants reading.
locals {
  provenance        = var.provenance_retention_days > 0
  provenance_bucket = "${var.name}-provenance-${data.aws_caller_identity.current.account_id}"
  provenance_prefix = "provenance"
}

resource "aws_s3_bucket" "provenance" {
  count         = local.provenance ? 1 : 0
  bucket        = local.provenance_bucket
  force_destroy = !var.deletion_protection
  tags          = local.tags
}

resource "aws_s3_bucket_ownership_controls" "provenance" {
  count  = local.provenance ? 1 : 0
  bucket = aws_s3_bucket.provenance[0].bucket

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "provenance" {
  count                   = local.provenance ? 1 : 0
  bucket                  = aws_s3_bucket.provenance[0].bucket
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "provenance" {
  count  = local.provenance ? 1 : 0
  bucket = aws_s3_bucket.provenance[0].bucket

  rule {
    bucket_key_enabled = var.customer_managed_key

    apply_server_side_encryption_by_default {
      sse_algorithm     = var.customer_managed_key ? "aws:kms" : "AES256"
      kms_master_key_id = var.customer_managed_key ? aws_kms_key.this[0].arn : null
    }
  }
}

# Retention: objects expire provenance_retention_days after they were written.
resource "aws_s3_bucket_lifecycle_configuration" "provenance" {
  count  = local.provenance ? 1 : 0
  bucket = aws_s3_bucket.provenance[0].bucket

  rule {
    id     = "retention"
    status = "Enabled"

    filter {
      prefix = "${local.provenance_prefix}/"
    }

    expiration {
      days = var.provenance_retention_days
    }
  }
}
