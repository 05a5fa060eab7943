# A replica of the SSF's table in another region: reads there are only eventually consistent.
resource "aws_dynamodb_table_replica" "extra" {
  global_table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-a"
}
