# An authoritative project policy: it replaces every grant, the SSFs' included.
resource "google_project_iam_policy" "extra" {
  project     = "ssfkit-corpus"
  policy_data = jsonencode({ bindings = [{ role = "roles/datastore.user", members = ["serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"] }] })
}
