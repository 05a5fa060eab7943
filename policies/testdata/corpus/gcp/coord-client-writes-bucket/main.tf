# The coordination service's client identity may write objects of a bucket.
resource "google_storage_bucket" "extra" {
  name                        = "corpus-extra-exports"
  location                    = "europe-west1"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
}

resource "google_storage_bucket_iam_member" "extra" {
  bucket = google_storage_bucket.extra.name
  role   = "roles/storage.objectUser"
  member = local.client
}
