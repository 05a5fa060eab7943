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

  assert {
    condition     = length(aws_scheduler_schedule.collector) == 2 && aws_scheduler_schedule.collector["intent_collector"].schedule_expression == "rate(1 minute)" && aws_scheduler_schedule.collector["garbage_collector"].schedule_expression == "rate(5 minutes)"
    error_message = "both collectors must be scheduled"
  }

  assert {
    condition     = alltrue([for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : alltrue([for r in flatten([s.Resource]) : r != "*"])])
    error_message = "the SSF's identity must not reach every resource"
  }
}
