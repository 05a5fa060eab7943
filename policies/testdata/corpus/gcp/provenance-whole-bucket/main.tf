# The SSF's identity reads every SSF's provenance: a grant on the environment's provenance
# bucket without the condition that confines it to its own partitions.
resource "google_storage_bucket_iam_member" "extra" {
  bucket = "corpus-provenance-123456789012"
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:corpus-a@ssfkit-corpus.iam.gserviceaccount.com"
}
