# The serverless ZooKeeper-compatible coordination service of an environment (docs/coordination.md):
# its table, its request queue (with a dead-letter queue) feeding the writer function, a bucket for
# large entries and snapshots, the heartbeat function on a schedule, and three least-privilege
# identities: the writer's and the heartbeat's roles, and a managed policy for the clients'
# `ssfkit coord proxy` sidecars.

data "aws_region" "current" {}
data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}

locals {
  prefix  = "${var.environment}-${var.name}-coord"
  region  = data.aws_region.current.name
  arn     = "arn:${data.aws_partition.current.partition}"
  account = data.aws_caller_identity.current.account_id
  # Bucket names are global: the account makes this one the environment's own.
  bucket = "${local.prefix}-${local.account}"

  # Every ARN a policy names is built from names, not read from the resource, so that the plan
  # shows each policy whole before anything exists (and the plan policies check it).
  table_arn       = "${local.arn}:dynamodb:${local.region}:${local.account}:table/${local.prefix}"
  queue_arn       = "${local.arn}:sqs:${local.region}:${local.account}:${local.prefix}"
  dead_letter_arn = "${local.arn}:sqs:${local.region}:${local.account}:${local.prefix}-dlq"
  bucket_arn      = "${local.arn}:s3:::${local.bucket}"
  function_arns   = { for k, f in local.functions : k => "${local.arn}:lambda:${local.region}:${local.account}:function:${f.name}" }
  role_arns       = { for k, f in local.functions : k => "${local.arn}:iam::${local.account}:role/${f.name}" }
  log_group_arns  = { for k, f in local.functions : k => "${local.arn}:logs:${local.region}:${local.account}:log-group:/aws/lambda/${f.name}:*" }
  key_reference   = var.encryption_key_alias != null ? "alias" : (var.encryption_key != null ? "arn" : "none")

  store_url       = "dynamodb://${local.prefix}?region=${local.region}"
  queue_url       = "sqs://${local.prefix}?region=${local.region}"
  dead_letter_url = "sqs://${local.prefix}-dlq?region=${local.region}"
  blobs_url       = "s3://${local.bucket}?region=${local.region}"

  # One artifact, two functions: SSFKIT_COORD_ROLE selects what it does (Lambda's handler
  # setting is the bootstrap's, unused).
  functions = {
    writer    = { name = "${local.prefix}-writer" }
    heartbeat = { name = "${local.prefix}-heartbeat" }
  }
  settings = {
    SSFKIT_ENVIRONMENT          = var.environment
    SSFKIT_COORD_STORE          = local.store_url
    SSFKIT_COORD_QUEUE          = local.queue_url
    SSFKIT_COORD_BLOBS          = local.blobs_url
    SSFKIT_COORD_SNAPSHOT_EVERY = tostring(var.snapshot_every)
  }

  # A request is hidden twice the writer's timeout while a batch holding it runs (Lambda refuses
  # less than the timeout), and kept long enough for max_receive_count deliveries (at least SQS's
  # and Lambda's minimum of 60 s), so that a failing request is dead-lettered, not dropped.
  queue_visibility_seconds  = 2 * var.function_timeout_seconds
  request_retention_seconds = min(1209600, max(60, var.max_receive_count * local.queue_visibility_seconds))
}

# --- Store -----------------------------------------------------------------------------------

# The coordination service's table (pk/sk, as adapters/store/dynamostore keys every table): the
# transaction log, sessions, requests, snapshots' parts, the tree's settings.
resource "aws_dynamodb_table" "this" {
  name                        = local.prefix
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "S"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.encryption_key
  }

  tags = var.tags
}

# --- Request queue -----------------------------------------------------------------------------

resource "aws_sqs_queue" "dead_letter" {
  name                      = "${local.prefix}-dlq"
  message_retention_seconds = 1209600 # 14 days, SQS's longest: time to inspect and redrive
  sqs_managed_sse_enabled   = var.encryption_key == null ? true : null
  kms_master_key_id         = var.encryption_key
  tags                      = var.tags
}

resource "aws_sqs_queue" "this" {
  name                       = local.prefix
  message_retention_seconds  = local.request_retention_seconds
  visibility_timeout_seconds = local.queue_visibility_seconds
  sqs_managed_sse_enabled    = var.encryption_key == null ? true : null
  kms_master_key_id          = var.encryption_key

  redrive_policy = jsonencode({
    deadLetterTargetArn = local.dead_letter_arn
    maxReceiveCount     = var.max_receive_count
  })

  tags       = var.tags
  depends_on = [aws_sqs_queue.dead_letter]
}

# --- Bucket ------------------------------------------------------------------------------------

# Large entries and snapshots: private (no ACLs, public access blocked), encrypted. Entries are
# written once under names of their own, so versioning would only keep garbage.
resource "aws_s3_bucket" "this" {
  bucket        = local.bucket
  force_destroy = !var.deletion_protection
  tags          = var.tags
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.bucket

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.bucket
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.bucket

  rule {
    # Decided on known values (the alias, when given: the key's ARN may be known only after
    # apply), so that the plan shows the algorithm.
    bucket_key_enabled = local.key_reference != "none"

    apply_server_side_encryption_by_default {
      sse_algorithm     = local.key_reference == "none" ? "AES256" : "aws:kms"
      kms_master_key_id = var.encryption_key
    }
  }
}

# --- Identities --------------------------------------------------------------------------------

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

# One role per function, named as the function.
resource "aws_iam_role" "function" {
  for_each           = local.functions
  name               = each.value.name
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

locals {
  table_read  = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:DescribeTable"]
  table_write = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"]
  key_statement = local.key_reference == "none" ? [] : [{
    sid       = "EnvironmentKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = local.key_reference == "alias" ? ["${local.arn}:kms:${local.region}:${local.account}:key/*"] : [var.encryption_key]
    condition = local.key_reference == "alias" ? [{ test = "ForAnyValue:StringEquals", variable = "kms:ResourceAliases", values = [var.encryption_key_alias] }] : []
  }]

  # What each identity may do, statement by statement. The writer applies requests from its
  # queue; the heartbeat expires sessions and writes snapshots; both read and write the table
  # and the bucket, and append to their own logs.
  grants = {
    writer = concat([
      { sid = "Table", actions = concat(local.table_read, local.table_write), resources = [local.table_arn], condition = [] },
      { sid = "ConsumeRequests", actions = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"], resources = [local.queue_arn], condition = [] },
      { sid = "BucketObjects", actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources = ["${local.bucket_arn}/*"], condition = [] },
      { sid = "BucketList", actions = ["s3:ListBucket"], resources = [local.bucket_arn], condition = [] },
      { sid = "OwnLogs", actions = ["logs:CreateLogStream", "logs:PutLogEvents"], resources = [local.log_group_arns.writer], condition = [] },
    ], local.key_statement)
    heartbeat = concat([
      { sid = "Table", actions = concat(local.table_read, local.table_write), resources = [local.table_arn], condition = [] },
      { sid = "BucketObjects", actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources = ["${local.bucket_arn}/*"], condition = [] },
      { sid = "BucketList", actions = ["s3:ListBucket"], resources = [local.bucket_arn], condition = [] },
      { sid = "OwnLogs", actions = ["logs:CreateLogStream", "logs:PutLogEvents"], resources = [local.log_group_arns.heartbeat], condition = [] },
    ], local.key_statement)
    # The proxy reads the table, writes only its sessions' heartbeats (zk/session), its requests
    # (zk/req/<session>) and the parts of requests too large for one row (zk/reqpart), sends
    # requests to the queue, and reads large entries. No logs.
    client = concat([
      { sid = "ReadTable", actions = local.table_read, resources = [local.table_arn], condition = [] },
      {
        sid       = "WriteSessionsAndRequests"
        actions   = local.table_write
        resources = [local.table_arn]
        condition = [{ test = "ForAllValues:StringLike", variable = "dynamodb:LeadingKeys", values = ["zk/session", "zk/req/*", "zk/reqpart"] }]
      },
      { sid = "SendRequests", actions = ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"], resources = [local.queue_arn], condition = [] },
      { sid = "ReadObjects", actions = ["s3:GetObject"], resources = ["${local.bucket_arn}/*"], condition = [] },
      { sid = "ListObjects", actions = ["s3:ListBucket"], resources = [local.bucket_arn], condition = [] },
    ], local.key_statement)
  }
}

data "aws_iam_policy_document" "grants" {
  for_each = local.grants

  dynamic "statement" {
    for_each = each.value
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources

      dynamic "condition" {
        for_each = statement.value.condition
        content {
          test     = condition.value.test
          variable = condition.value.variable
          values   = condition.value.values
        }
      }
    }
  }
}

resource "aws_iam_role_policy" "function" {
  for_each = local.functions
  name     = "coordination-${each.key}"
  role     = aws_iam_role.function[each.key].name
  policy   = data.aws_iam_policy_document.grants[each.key].json
  # The policies name the resources by ARN, not by reference: they wait for them.
  depends_on = [aws_dynamodb_table.this, aws_sqs_queue.this, aws_s3_bucket.this, aws_cloudwatch_log_group.function]
}

# The clients' identity: a managed policy to attach to the roles of the applications that run
# `ssfkit coord proxy` (this module does not know them).
resource "aws_iam_policy" "client" {
  name        = "${local.prefix}-client"
  description = "ssfkit coordination ${var.environment}/${var.name}: what a coord proxy needs (read the table, write its sessions and requests, send requests, read large entries)."
  policy      = data.aws_iam_policy_document.grants["client"].json
  tags        = var.tags
}

# --- Functions ---------------------------------------------------------------------------------

resource "aws_cloudwatch_log_group" "function" {
  for_each          = local.functions
  name              = "/aws/lambda/${each.value.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.encryption_key
  tags              = var.tags
}

resource "aws_lambda_function" "this" {
  for_each         = local.functions
  function_name    = each.value.name
  role             = local.role_arns[each.key]
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = var.artifact
  source_code_hash = filebase64sha256(var.artifact)
  timeout          = var.function_timeout_seconds
  memory_size      = var.memory_mb

  environment {
    variables = merge(local.settings, { SSFKIT_COORD_ROLE = each.key })
  }

  tags       = var.tags
  depends_on = [aws_iam_role.function, aws_iam_role_policy.function, aws_cloudwatch_log_group.function]
}

# Requests reach the writer in batches of up to 10; a request that fails is reported alone and
# comes back, and goes to the dead-letter queue after max_receive_count deliveries.
resource "aws_lambda_event_source_mapping" "requests" {
  event_source_arn        = aws_sqs_queue.this.arn
  function_name           = aws_lambda_function.this["writer"].arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

# The scheduler invokes the heartbeat asynchronously: an invocation that waited a minute, or
# failed, is not worth running again (the next one comes with the schedule).
resource "aws_lambda_function_event_invoke_config" "heartbeat" {
  function_name                = aws_lambda_function.this["heartbeat"].function_name
  maximum_event_age_in_seconds = 60
  maximum_retry_attempts       = 0
}

# --- Heartbeat schedule ------------------------------------------------------------------------

data "aws_iam_policy_document" "assume_scheduler" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${local.prefix}-scheduler"
  assume_role_policy = data.aws_iam_policy_document.assume_scheduler.json
  tags               = var.tags
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    actions   = ["lambda:InvokeFunction"]
    resources = [local.function_arns.heartbeat]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name       = "invoke-heartbeat"
  role       = aws_iam_role.scheduler.name
  policy     = data.aws_iam_policy_document.scheduler.json
  depends_on = [aws_lambda_function.this]
}

resource "aws_scheduler_schedule" "heartbeat" {
  name                = "${local.prefix}-heartbeat"
  schedule_expression = var.heartbeat_every_minutes == 1 ? "rate(1 minute)" : "rate(${var.heartbeat_every_minutes} minutes)"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = local.function_arns.heartbeat
    role_arn = "${local.arn}:iam::${local.account}:role/${aws_iam_role.scheduler.name}"
    input    = jsonencode({ coordination = "heartbeat" })

    retry_policy {
      maximum_retry_attempts = 0 # the next scheduled run is the retry
    }
  }

  depends_on = [aws_iam_role_policy.scheduler]
}
