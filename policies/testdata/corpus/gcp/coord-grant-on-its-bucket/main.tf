# Another identity granted on the coordination service's own bucket, from outside its module.
resource "google_storage_bucket_iam_member" "extra" {
  bucket     = local.bucket
  role       = "roles/storage.objectViewer"
  member     = "serviceAccount:corpus-exporter@ssfkit-corpus.iam.gserviceaccount.com"
  depends_on = [module.coordination]
}
