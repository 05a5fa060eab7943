# roles/editor on the project for the SSF's service account.
resource "google_project_iam_member" "extra" {
  project = "ssfkit-corpus"
  role    = "roles/editor"
  member  = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
}
