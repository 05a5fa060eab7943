output "name" {
  description = "The SSF's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL the ssfkit runtime opens for this SSF."
  value       = local.runtime_environment.SSFKIT_STORE
}

output "queue_url" {
  description = "The queue URL of the SSF's asynchronous starts."
  value       = local.runtime_environment.SSFKIT_QUEUE
}

output "dead_letter_queue_url" {
  description = "The queue URL of the dead-letter queue."
  value       = "sqs://${aws_sqs_queue.dead_letter.name}?region=${local.region}"
}

output "function_name" {
  description = "The SSF function's name."
  value       = aws_lambda_function.this["ssf"].function_name
}

output "function_id" {
  description = "The SSF function's ARN."
  value       = aws_lambda_function.this["ssf"].arn
}

output "collector_function_names" {
  description = "The intent and garbage collector functions."
  value = {
    intent_collector  = aws_lambda_function.this["intent_collector"].function_name
    garbage_collector = aws_lambda_function.this["garbage_collector"].function_name
  }
}

output "identity" {
  description = "The SSF's identity: the IAM role its function and collectors run as."
  value       = aws_iam_role.this.arn
}

output "table_id" {
  description = "The SSF's table (ARN)."
  value       = aws_dynamodb_table.this.arn
}

output "queue_id" {
  description = "The SSF's queue (ARN)."
  value       = aws_sqs_queue.this.arn
}

output "delivery_window_seconds" {
  description = "The longest time after a start is sent (to the SSF's queue, or as an asynchronous invocation) at which the platform may still deliver it: SQS retention + visibility timeout, max_receive_count x visibility timeout, Lambda's maximum event age (no retries). gc_bound_seconds must exceed it."
  value       = local.delivery_window_seconds
}

output "ssfkit_config" {
  description = "The SSF's entry in an ssfkit config file (`ssfkit up` writes it): the runtime's settings as the function receives them."
  value = {
    name                   = var.name
    store                  = local.runtime_environment.SSFKIT_STORE
    queue                  = local.runtime_environment.SSFKIT_QUEUE
    dead_letter_queue      = "sqs://${aws_sqs_queue.dead_letter.name}?region=${local.region}"
    lifetime_seconds       = var.function_timeout_seconds - 1
    gc_bound_seconds       = var.gc_bound_seconds
    relaunch_delay_seconds = var.relaunch_delay_seconds
    function_id            = aws_lambda_function.this["ssf"].arn
  }
}
