# A queue policy for {"AWS": ["*"]}.
resource "aws_sqs_queue_policy" "extra" {
  queue_url  = "https://sqs.us-east-1.amazonaws.com/123456789012/corpus-a"
  depends_on = [module.ssf]
  policy     = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "sqs:SendMessage", Resource = "*", Principal = { AWS = ["*"] } }] })
}
