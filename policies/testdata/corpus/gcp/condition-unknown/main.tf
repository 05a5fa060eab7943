# A condition built from a value known only after apply: it cannot be checked before.
resource "google_service_account" "extra" {
  account_id = "corpus-extra"
}

resource "google_project_iam_member" "extra" {
  project = "ssfkit-corpus"
  role    = "roles/datastore.user"
  member  = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
  condition {
    title      = "own database"
    expression = "resource.name == \"projects/ssfkit-corpus/databases/${google_service_account.extra.unique_id}\""
  }
}
