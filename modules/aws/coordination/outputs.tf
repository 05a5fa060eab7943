output "name" {
  description = "The coordination service's name."
  value       = var.name
}

output "store_url" {
  description = "The store URL of the coordination table (dynamodb://TABLE?region=R): SSFKIT_COORD_STORE."
  value       = local.store_url
}

output "queue_url" {
  description = "The queue URL of the request queue (sqs://QUEUE?region=R): SSFKIT_COORD_QUEUE."
  value       = local.queue_url
}

output "dead_letter_queue_url" {
  description = "The queue URL of the requests' dead-letter queue."
  value       = "sqs://${aws_sqs_queue.dead_letter.name}?region=${local.region}"
}

output "blobs_url" {
  description = "The bucket of large entries and snapshots, as gocloud.dev opens it (s3://BUCKET?region=R): SSFKIT_COORD_BLOBS."
  value       = "s3://${aws_s3_bucket.this.bucket}?region=${local.region}"
}

output "writer_function_name" {
  description = "The writer function (Lambda), fed by the request queue."
  value       = aws_lambda_function.this["writer"].function_name
}

output "heartbeat_function_name" {
  description = "The heartbeat function (Lambda), run by EventBridge Scheduler."
  value       = aws_lambda_function.this["heartbeat"].function_name
}

output "identity" {
  description = "The writer's identity: the IAM role (ARN) its function runs as."
  value       = aws_iam_role.function["writer"].arn
}

output "client_identity" {
  description = "What a `ssfkit coord proxy` runs as: the ARN of the managed policy to attach to the application's role."
  value       = aws_iam_policy.client.arn
}

output "table_id" {
  description = "The coordination table (ARN)."
  value       = aws_dynamodb_table.this.arn
}

output "queue_id" {
  description = "The request queue (ARN)."
  value       = aws_sqs_queue.this.arn
}

output "bucket_id" {
  description = "The bucket (ARN)."
  value       = aws_s3_bucket.this.arn
}

output "coord_config" {
  description = "What `ssfkit coord proxy` needs (the store, queue, blobs and dead-letter queue URLs and the environment's name) and the writer's and heartbeat's function IDs (which `ssfkit up` syncs the triggers of on Azure)."
  value = {
    environment       = var.environment
    store             = local.store_url
    queue             = local.queue_url
    blobs             = "s3://${aws_s3_bucket.this.bucket}?region=${local.region}"
    dead_letter_queue = "sqs://${aws_sqs_queue.dead_letter.name}?region=${local.region}"
    function_ids      = [for role in ["writer", "heartbeat"] : aws_lambda_function.this[role].arn]
  }
}
