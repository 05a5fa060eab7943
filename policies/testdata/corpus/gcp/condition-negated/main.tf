# A negated condition: every database but the SSF's own.
resource "google_project_iam_member" "extra" {
  project = "ssfkit-corpus"
  role    = "roles/datastore.user"
  member  = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
  condition {
    title      = "not own database"
    expression = "!(resource.name == \"projects/ssfkit-corpus/databases/corpus-a\")"
  }
}
