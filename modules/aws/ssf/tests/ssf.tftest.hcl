# terraform test for the ssf module. The Go test that runs it (tests/terraform) starts moto on
# 127.0.0.1 and points the provider at it with AWS_ENDPOINT_URL (provider blocks in test files
# cannot take -var values), and builds the artifact (TF_VAR_artifact). `apply` runs are real
# applies against moto, destroyed at the end.

variables {
  environment         = "tftest"
  name                = "counter"
  deletion_protection = false
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
}

run "rejects_gc_bound_within_function_timeout" {
  command = plan

  variables {
    function_timeout_seconds = 120
    gc_bound_seconds         = 120
  }

  expect_failures = [var.gc_bound_seconds]
}

# The delivery window (SQS retention + visibility, max_receive_count x visibility, Lambda's
# event age) must stay below T: 720 s at the defaults.
run "accepts_gc_bound_just_above_the_delivery_window" {
  command = plan

  variables {
    gc_bound_seconds = 721
  }

  assert {
    condition     = output.delivery_window_seconds == 720
    error_message = "the default delivery window is ${output.delivery_window_seconds} s, want 720 (retention 600 s + visibility 120 s)"
  }
}

run "rejects_gc_bound_at_the_delivery_window" {
  command = plan

  variables {
    gc_bound_seconds = 720
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_receive_counts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    max_receive_count = 10 # 10 x 120 s of visibility, and as much retention
  }

  expect_failures = [var.gc_bound_seconds]
}

run "rejects_timeouts_whose_redeliveries_outlive_gc_bound" {
  command = plan

  variables {
    function_timeout_seconds = 100 # 5 x 200 s of visibility
  }

  expect_failures = [var.gc_bound_seconds]
}

run "accepts_a_longer_timeout_with_a_larger_gc_bound" {
  command = plan

  variables {
    function_timeout_seconds = 900
    relaunch_delay_seconds   = 900
    gc_bound_seconds         = 10801 # (5 + 1) x 1800 s of visibility
  }

  assert {
    condition     = aws_sqs_queue.this.visibility_timeout_seconds == 1800 && aws_sqs_queue.this.message_retention_seconds == 9000 && output.delivery_window_seconds == 10800
    error_message = "visibility ${aws_sqs_queue.this.visibility_timeout_seconds} s, retention ${aws_sqs_queue.this.message_retention_seconds} s, window ${output.delivery_window_seconds} s"
  }

  assert {
    condition     = alltrue([for c in aws_lambda_function_event_invoke_config.this : c.maximum_event_age_in_seconds == 9000])
    error_message = "Lambda's event age must follow the queue's retention"
  }
}

run "rejects_names_the_runtime_refuses" {
  command = plan

  variables {
    name = "my-ssf"
  }

  expect_failures = [var.name]
}

run "rejects_reserved_environment_variables" {
  command = plan

  variables {
    environment_variables = { SSFKIT_STORE = "mem://" }
  }

  expect_failures = [var.environment_variables]
}

run "applies" {
  variables {
    peers = ["caller"]
  }

  assert {
    condition     = output.store_url == "dynamodb://tftest-counter?region=us-east-1"
    error_message = "store_url is ${output.store_url}"
  }

  assert {
    condition     = output.queue_url == "sqs://tftest-counter?region=us-east-1"
    error_message = "queue_url is ${output.queue_url}"
  }

  assert {
    condition     = output.ssfkit_config.gc_bound_seconds > output.ssfkit_config.lifetime_seconds
    error_message = "the GC bound must exceed the lifetime"
  }

  assert {
    condition     = aws_dynamodb_table.this.point_in_time_recovery[0].enabled && aws_dynamodb_table.this.server_side_encryption[0].enabled
    error_message = "backups and encryption must be on by default"
  }

  assert {
    condition     = jsondecode(aws_sqs_queue.this.redrive_policy).deadLetterTargetArn == aws_sqs_queue.dead_letter.arn
    error_message = "the queue must dead-letter into its DLQ"
  }

  # No start is delivered later than T: the queue keeps and redelivers it within the window,
  # and Lambda keeps asynchronous invocations of each function as long, without retries.
  assert {
    condition     = aws_sqs_queue.this.message_retention_seconds == 600 && aws_sqs_queue.this.visibility_timeout_seconds == 120 && jsondecode(aws_sqs_queue.this.redrive_policy).maxReceiveCount == 5
    error_message = "the queue keeps starts ${aws_sqs_queue.this.message_retention_seconds} s, hides them ${aws_sqs_queue.this.visibility_timeout_seconds} s, redrive ${aws_sqs_queue.this.redrive_policy}"
  }

  assert {
    condition = (keys(aws_lambda_function_event_invoke_config.this) == ["garbage_collector", "intent_collector", "ssf"] &&
    alltrue([for k, c in aws_lambda_function_event_invoke_config.this : c.function_name == aws_lambda_function.this[k].function_name && c.maximum_event_age_in_seconds == 600 && c.maximum_retry_attempts == 0 && (c.qualifier == null || c.qualifier == "")]))
    error_message = "every function must have an event-invoke config bounding its asynchronous invocations"
  }

  assert {
    condition     = output.delivery_window_seconds == 720 && output.delivery_window_seconds < output.ssfkit_config.gc_bound_seconds && output.ssfkit_config.gc_bound_seconds == 900
    error_message = "the delivery window (${output.delivery_window_seconds} s) must stay below T (${output.ssfkit_config.gc_bound_seconds} s)"
  }

  assert {
    condition     = length(aws_scheduler_schedule.collector) == 2 && aws_scheduler_schedule.collector["intent_collector"].schedule_expression == "rate(1 minute)" && aws_scheduler_schedule.collector["garbage_collector"].schedule_expression == "rate(5 minutes)"
    error_message = "both collectors must be scheduled"
  }

  assert {
    condition     = alltrue([for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : alltrue([for r in flatten([s.Resource]) : r != "*"])])
    error_message = "the SSF's identity must not reach every resource"
  }
}

run "rejects_relaunch_delay_below_function_timeout" {
  command = plan

  variables {
    relaunch_delay_seconds = 30
  }

  expect_failures = [var.relaunch_delay_seconds]
}

run "rejects_key_retention_within_gc_bound" {
  command = plan

  variables {
    key_retention_seconds = 900
  }

  expect_failures = [var.key_retention_seconds]
}

run "rejects_max_attempts_below_one" {
  command = plan

  variables {
    max_attempts = 0
  }

  expect_failures = [var.max_attempts]
}

run "rejects_provenance_without_a_sink" {
  command = plan

  variables {
    provenance = "metadata"
  }

  expect_failures = [var.provenance]
}

run "rejects_a_provenance_sink_of_another_cloud" {
  command = plan

  variables {
    provenance      = "full"
    provenance_sink = "gs://tftest-provenance?prefix=provenance"
  }

  expect_failures = [var.provenance_sink]
}

# Provenance: the settings reach every function, and the identity may put objects in this SSF's
# three partitions of the bucket, nothing more.
run "grants_its_own_provenance_partitions" {
  command = plan

  variables {
    provenance      = "metadata"
    provenance_sink = "s3://tftest-provenance-123456789012?region=us-east-1&prefix=provenance"
  }

  assert {
    condition = alltrue([for f in aws_lambda_function.this :
      f.environment[0].variables.SSFKIT_PROVENANCE == "metadata" &&
    f.environment[0].variables.SSFKIT_PROVENANCE_SINK == "s3://tftest-provenance-123456789012?region=us-east-1&prefix=provenance"])
    error_message = "every function must get SSFKIT_PROVENANCE and SSFKIT_PROVENANCE_SINK"
  }

  assert {
    condition = [for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : s if try(s.Sid, "") == "OwnProvenance"][0] == {
      Sid    = "OwnProvenance"
      Effect = "Allow"
      Action = "s3:PutObject"
      Resource = [
        "arn:aws:s3:::tftest-provenance-123456789012/provenance/invocations/ssf=counter/*",
        "arn:aws:s3:::tftest-provenance-123456789012/provenance/data_events/ssf=counter/*",
        "arn:aws:s3:::tftest-provenance-123456789012/provenance/calls/ssf=counter/*",
      ]
    }
    error_message = "the provenance grant is ${jsonencode([for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : s if try(s.Sid, "") == "OwnProvenance"])}"
  }
}

run "captures_no_provenance_by_default" {
  command = plan

  assert {
    condition = alltrue([for f in aws_lambda_function.this :
    !contains(keys(f.environment[0].variables), "SSFKIT_PROVENANCE") && !contains(keys(f.environment[0].variables), "SSFKIT_PROVENANCE_SINK")])
    error_message = "provenance is off by default, with no sink"
  }

  assert {
    condition     = length([for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : s if try(s.Sid, "") == "OwnProvenance"]) == 0
    error_message = "no provenance grant without provenance"
  }
}
