# A bucket of the root module, private, on which a service account is granted objectAdmin
# (which can change the bucket's policy).
resource "google_storage_bucket" "extra" {
  name                        = "corpus-extra-exports"
  location                    = "europe-west1"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
}

resource "google_storage_bucket_iam_member" "extra" {
  bucket = google_storage_bucket.extra.name
  role   = "roles/storage.objectAdmin"
  member = "serviceAccount:corpus-exporter@ssfkit-corpus.iam.gserviceaccount.com"
}
