# A function that runs as an SSF's identity without being that SSF.
resource "aws_lambda_function" "extra" {
  function_name = "corpus-exporter"
  role          = "arn:aws:iam::123456789012:role/corpus-a-ssf"
  runtime       = "provided.al2023"
  handler       = "exporter"
  filename      = var.artifact
}
