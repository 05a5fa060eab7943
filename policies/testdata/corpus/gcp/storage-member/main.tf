# A grant of a kind the policies do not read: denied, whatever it grants.
resource "google_storage_bucket_iam_member" "extra" {
  bucket = "corpus-exports"
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
}
