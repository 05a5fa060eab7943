# A function that calls itself a coordination function (so ssfkit.gc_bound asks it for no T)
# with a role that is neither the writer nor the heartbeat.
resource "aws_lambda_function" "extra" {
  function_name = "corpus-a-coord-reader"
  role          = "arn:aws:iam::123456789012:role/corpus-a-coord-reader"
  runtime       = "provided.al2023"
  handler       = "bootstrap"
  filename      = var.artifact

  environment {
    variables = { SSFKIT_COORD_ROLE = "reader", SSFKIT_COORD_STORE = "dynamodb://corpus-a-coord?region=us-east-1" }
  }
}
