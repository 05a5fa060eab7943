# A function URL without authorization.
resource "aws_lambda_function_url" "extra" {
  function_name      = "corpus-a"
  authorization_type = "NONE"
  depends_on         = [module.ssf]
}
