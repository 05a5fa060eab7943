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
