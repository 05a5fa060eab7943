# Anyone may invoke the SSF's function.
resource "aws_lambda_permission" "extra" {
  statement_id  = "anyone"
  action        = "lambda:InvokeFunction"
  function_name = "corpus-a"
  principal     = "*"
  depends_on    = [module.ssf]
}
