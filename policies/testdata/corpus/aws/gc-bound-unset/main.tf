# A function of an SSF with the GC bound T empty.
resource "aws_lambda_function" "extra" {
  function_name = "corpus-b"
  role          = "arn:aws:iam::123456789012:role/corpus-b-ssf"
  runtime       = "provided.al2023"
  handler       = "ssf"
  filename      = var.artifact
  environment {
    variables = { SSFKIT_SSF = "b", SSFKIT_GC_BOUND_SECONDS = "" }
  }
}
