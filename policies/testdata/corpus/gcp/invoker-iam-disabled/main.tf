# A Cloud Run service without its invoker check.
resource "google_cloud_run_v2_service" "extra" {
  name                 = "corpus-extra"
  location             = "europe-west1"
  invoker_iam_disabled = true
  deletion_protection  = false
  template {
    containers {
      image = "europe-west1-docker.pkg.dev/ssfkit-corpus/ssfkit/a@sha256:0000000000000000000000000000000000000000000000000000000000000000"
    }
  }
}
