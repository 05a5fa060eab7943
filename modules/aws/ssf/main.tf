# One stateful serverless function: its table (single-table design: the runtime keeps the
# linked DAALs, shadows, intents, read and invoke logs and the collectors' indexes in one table
# keyed pk/sk, see docs/protocol.md), its queue with a dead-letter queue, the function, the
# intent and garbage collectors on schedules, and one identity that reaches only these.

data "aws_region" "current" {}
data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}

locals {
  prefix = "${var.environment}-${var.name}"
  region = data.aws_region.current.name
  # Peers by name, not by reference: SSFs that call each other would otherwise form a cycle.
  #
  # Every ARN an identity's policy names is built from names, not read from the resource: the
  # plan then shows each policy whole before anything exists, and the plan policies, which deny
  # what they cannot see (docs/security.md), check it on the first deployment too.
  arn             = "arn:${data.aws_partition.current.partition}"
  account         = data.aws_caller_identity.current.account_id
  peer_functions  = [for p in var.peers : "${local.arn}:lambda:${local.region}:${local.account}:function:${var.environment}-${p}"]
  table_arn       = "${local.arn}:dynamodb:${local.region}:${local.account}:table/${local.prefix}"
  queue_arn       = "${local.arn}:sqs:${local.region}:${local.account}:${local.prefix}"
  dead_letter_arn = "${local.arn}:sqs:${local.region}:${local.account}:${local.prefix}-dlq"
  role_arn        = "${local.arn}:iam::${local.account}:role/${aws_iam_role.this.name}"
  function_arns   = { for k, f in local.functions : k => "${local.arn}:lambda:${local.region}:${local.account}:function:${f.name}" }
  log_group_arns  = [for f in local.functions : "${local.arn}:logs:${local.region}:${local.account}:log-group:/aws/lambda/${f.name}:*"]
  # How the SSF's policy names the key: decided on known values only (the key's ARN may not be).
  key_reference = var.encryption_key_alias != null ? "alias" : (var.encryption_key != null ? "arn" : "none")

  # Provenance: the garbage collector puts one object per table and batch under
  # PREFIX/TABLE/ssf=NAME/ (adapters/provenance/blobsink); the identity reaches those three
  # partitions of the bucket and nothing else in it.
  provenance        = var.provenance != "off"
  provenance_bucket = local.provenance ? regex("^s3://([^?]+)", var.provenance_sink)[0] : null
  provenance_prefix = local.provenance ? trim(try(regex("[?&]prefix=([^&]*)", var.provenance_sink)[0], ""), "/") : ""
  provenance_objects = local.provenance ? [for table in ["invocations", "data_events", "calls"] :
    "${local.arn}:s3:::${local.provenance_bucket}/${local.provenance_prefix == "" ? "" : "${local.provenance_prefix}/"}${table}/ssf=${var.name}/*"
  ] : []

  # The runtime's configuration, the same for the SSF and its collectors. The lifetime leaves
  # the function a second to report before Lambda kills it.
  runtime_environment = {
    SSFKIT_SSF                    = var.name
    SSFKIT_STORE                  = "dynamodb://${aws_dynamodb_table.this.name}?region=${local.region}"
    SSFKIT_QUEUE                  = "sqs://${aws_sqs_queue.this.name}?region=${local.region}"
    SSFKIT_LIFETIME_SECONDS       = tostring(var.function_timeout_seconds - 1)
    SSFKIT_GC_BOUND_SECONDS       = tostring(var.gc_bound_seconds)
    SSFKIT_RELAUNCH_DELAY_SECONDS = tostring(var.relaunch_delay_seconds)
    SSFKIT_KEY_RETENTION_SECONDS  = tostring(var.key_retention_seconds)
    SSFKIT_MAX_ATTEMPTS           = tostring(var.max_attempts)
    SSFKIT_MAX_RECEIVE_COUNT      = tostring(var.max_receive_count)
    SSFKIT_DEAD_LETTER_QUEUE      = "sqs://${aws_sqs_queue.dead_letter.name}?region=${local.region}"
  }

  # Delivery windows (docs/protocol.md, "Delivery windows"): no platform may deliver a start to
  # the SSF later than T (gc_bound_seconds) after it was sent, so every setting that lets a
  # start wait or come back is derived here, and gc_bound_seconds' validation refuses T at or
  # below the longest window.
  #
  # The queue's visibility timeout is twice the function timeout: a message is not delivered
  # again while the execution holding it may still run, and a throttled invocation gets a
  # retry. (AWS advises six times; with max_receive_count deliveries that would spread the
  # deliveries of one start over 30 minutes at the defaults, far beyond T.) Lambda refuses a
  # visibility timeout below the function timeout.
  queue_visibility_seconds = 2 * var.function_timeout_seconds
  # How long a start may wait to be delivered: long enough for max_receive_count deliveries of
  # a failing start, so that it is dead-lettered rather than dropped; at least SQS's and
  # Lambda's minimum of 60 s. A start dropped unrun is not lost: its intent stays pending and
  # the intent collector launches it again.
  start_retention_seconds = min(1209600, max(60, var.max_receive_count * local.queue_visibility_seconds))
  # Asynchronous invocations (a peer's spawn, the scheduler's collector runs) wait in Lambda's
  # own queue at most as long (Lambda: 60 s to 6 h, 6 h by default), and are not retried after
  # a function error (Lambda retries 1 and 2 minutes later by default): the intent collector
  # relaunches an unfinished instance, and the next scheduled run is a collector's retry.
  async_max_event_age_seconds = min(21600, local.start_retention_seconds)
  async_retry_attempts        = 0
  # The event source mapping's batching window (maximum_batching_window_in_seconds) is left at
  # SQS's default, 0: a received batch is handed to the function at once.
  delivery_windows = {
    # The last receive happens before the retention ends; the poller then holds the message
    # (retrying a throttled invocation) until its visibility timeout ends.
    queue = local.start_retention_seconds + local.queue_visibility_seconds
    # max_receive_count deliveries of a failing start, each hidden for the visibility timeout.
    redeliveries = var.max_receive_count * local.queue_visibility_seconds
    # The event's maximum age, plus each retry's attempt and wait (1 and 2 minutes).
    async_invoke = local.async_max_event_age_seconds + sum(concat([0], [for w in slice([60, 120], 0, local.async_retry_attempts) : var.function_timeout_seconds + w]))
  }
  delivery_window_seconds = max(values(local.delivery_windows)...)

  # Lambda passes a function's handler setting to a provided.al2023 bootstrap as _HANDLER: one
  # artifact serves the SSF and both collectors.
  functions = {
    ssf               = { name = local.prefix, handler = "ssf" }
    intent_collector  = { name = "${local.prefix}-intent-collector", handler = "intent-collector" }
    garbage_collector = { name = "${local.prefix}-garbage-collector", handler = "garbage-collector" }
  }
}

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

  # Always encrypted: with the given key, or with the AWS-managed key for DynamoDB.
  server_side_encryption {
    enabled     = true
    kms_key_arn = var.encryption_key
  }

  tags = var.tags
}

resource "aws_sqs_queue" "dead_letter" {
  name                      = "${local.prefix}-dlq"
  message_retention_seconds = 1209600 # 14 days, SQS's longest: time to inspect and redrive
  sqs_managed_sse_enabled   = var.encryption_key == null ? true : null
  kms_master_key_id         = var.encryption_key
  tags                      = var.tags
}

# The SSF's starts: kept and redelivered only within the delivery window (see the locals).
resource "aws_sqs_queue" "this" {
  name                       = local.prefix
  message_retention_seconds  = local.start_retention_seconds
  visibility_timeout_seconds = local.queue_visibility_seconds
  sqs_managed_sse_enabled    = var.encryption_key == null ? true : null
  kms_master_key_id          = var.encryption_key

  # The dead-letter queue's ARN is built rather than read from it, so that the plan shows the
  # whole redrive policy (the delivery-window policy checks maxReceiveCount before apply).
  redrive_policy = jsonencode({
    deadLetterTargetArn = local.dead_letter_arn
    maxReceiveCount     = var.max_receive_count
  })

  tags       = var.tags
  depends_on = [aws_sqs_queue.dead_letter]
}

resource "aws_cloudwatch_log_group" "this" {
  for_each          = local.functions
  name              = "/aws/lambda/${each.value.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.encryption_key
  tags              = var.tags
}

# The SSF's identity (Beldi's data sovereignty): its own table and queue, its own logs, the
# functions it calls or reports to, and the key that encrypts them. Nothing else.
data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "this" {
  name               = "${local.prefix}-ssf"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

data "aws_iam_policy_document" "this" {
  statement {
    sid = "OwnTable"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:DeleteItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:Query",
      "dynamodb:DescribeTable",
    ]
    resources = [local.table_arn]
  }

  statement {
    sid = "OwnQueue"
    actions = [
      "sqs:SendMessage",
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
    ]
    resources = [local.queue_arn]
  }

  # The runtime records instances it gave up on in its dead-letter queue.
  statement {
    sid       = "OwnDeadLetterQueue"
    actions   = ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
    resources = [local.dead_letter_arn]
  }

  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = local.log_group_arns
  }

  # Its garbage collector exports provenance: putting (and overwriting, for a batch exported
  # again) objects in its own partitions, no reading, no listing.
  dynamic "statement" {
    for_each = local.provenance ? [1] : []
    content {
      sid       = "OwnProvenance"
      actions   = ["s3:PutObject"]
      resources = local.provenance_objects
    }
  }

  dynamic "statement" {
    for_each = length(var.peers) > 0 ? [1] : []
    content {
      sid       = "Peers"
      actions   = ["lambda:InvokeFunction"]
      resources = local.peer_functions
    }
  }

  # The environment's key by its alias when there is one: its ARN exists only after apply, and a
  # policy naming it could not be checked before (docs/security.md).
  dynamic "statement" {
    for_each = local.key_reference == "none" ? [] : [1]
    content {
      sid       = "EnvironmentKey"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = local.key_reference == "alias" ? ["${local.arn}:kms:${local.region}:${local.account}:key/*"] : [var.encryption_key]
      dynamic "condition" {
        for_each = local.key_reference == "alias" ? [1] : []
        content {
          test     = "ForAnyValue:StringEquals"
          variable = "kms:ResourceAliases"
          values   = [var.encryption_key_alias]
        }
      }
    }
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "ssf"
  role   = aws_iam_role.this.name
  policy = data.aws_iam_policy_document.this.json
  # The policy names the SSF's resources by ARN, not by reference: it waits for them.
  depends_on = [aws_dynamodb_table.this, aws_sqs_queue.this, aws_sqs_queue.dead_letter, aws_cloudwatch_log_group.this]
}

resource "aws_lambda_function" "this" {
  for_each         = local.functions
  function_name    = each.value.name
  role             = local.role_arn
  runtime          = "provided.al2023"
  handler          = each.value.handler
  architectures    = [var.architecture]
  filename         = var.artifact
  source_code_hash = filebase64sha256(var.artifact)
  timeout          = var.function_timeout_seconds
  memory_size      = var.memory_mb

  # URLs and settings, no secrets: Lambda's own key encrypts them at rest.
  environment {
    variables = merge(var.environment_variables, local.runtime_environment, local.provenance ? { SSFKIT_PROVENANCE = var.provenance, SSFKIT_PROVENANCE_SINK = var.provenance_sink } : {})
  }

  tags       = var.tags
  depends_on = [aws_iam_role_policy.this, aws_cloudwatch_log_group.this]
}

# Asynchronous invocations of every function (peers spawning the SSF, the scheduler running
# the collectors): Lambda keeps an event at most the delivery window's event age, and does not
# retry it after a function error.
resource "aws_lambda_function_event_invoke_config" "this" {
  for_each                     = local.functions
  function_name                = aws_lambda_function.this[each.key].function_name
  maximum_event_age_in_seconds = local.async_max_event_age_seconds
  maximum_retry_attempts       = local.async_retry_attempts
}

# Asynchronous starts (AsyncInvoke, spawns, the intent collector's relaunches) arrive on the
# queue; a failed batch item is retried by SQS and dead-lettered after max_receive_count.
resource "aws_lambda_event_source_mapping" "queue" {
  event_source_arn        = aws_sqs_queue.this.arn
  function_name           = aws_lambda_function.this["ssf"].arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

# The collectors run on schedules, invoked by EventBridge Scheduler with a role that may invoke
# only them.
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
  name               = "${local.prefix}-collectors"
  assume_role_policy = data.aws_iam_policy_document.assume_scheduler.json
  tags               = var.tags
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    actions   = ["lambda:InvokeFunction"]
    resources = [local.function_arns.intent_collector, local.function_arns.garbage_collector]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name       = "invoke-collectors"
  role       = aws_iam_role.scheduler.name
  policy     = data.aws_iam_policy_document.scheduler.json
  depends_on = [aws_lambda_function.this]
}

resource "aws_scheduler_schedule" "collector" {
  for_each = {
    intent_collector  = var.intent_collector_every_minutes
    garbage_collector = var.garbage_collector_every_minutes
  }
  name                = "${local.prefix}-${replace(each.key, "_", "-")}"
  schedule_expression = each.value == 1 ? "rate(1 minute)" : "rate(${each.value} minutes)"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = local.function_arns[each.key]
    role_arn = "${local.arn}:iam::${local.account}:role/${aws_iam_role.scheduler.name}"
    input    = jsonencode({ collector = replace(each.key, "_", "-") })

    retry_policy {
      maximum_retry_attempts = 0 # the next scheduled run is the retry
    }
  }

  depends_on = [aws_iam_role_policy.scheduler]
}
