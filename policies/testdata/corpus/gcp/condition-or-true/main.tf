# A Firestore grant whose condition names the database, then "|| true": it confines nothing.
resource "google_project_iam_member" "extra" {
  project = "ssfkit-corpus"
  role    = "roles/datastore.user"
  member  = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
  condition {
    title      = "own database"
    expression = "resource.name == \"projects/ssfkit-corpus/databases/corpus-a\" || true"
  }
}
