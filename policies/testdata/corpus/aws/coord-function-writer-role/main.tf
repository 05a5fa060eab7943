# Another function runs as the coordination writer's role.
resource "aws_lambda_function" "extra" {
  function_name = "corpus-extra"
  role          = "arn:aws:iam::123456789012:role/corpus-a-coord-writer"
  runtime       = "provided.al2023"
  handler       = "bootstrap"
  filename      = var.artifact
}
