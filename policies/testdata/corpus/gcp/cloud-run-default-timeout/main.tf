# An SSF's service with the GC bound T at 200 s and Cloud Run's request timeout left at its
# default (300 s): an execution may outlive T.
resource "google_cloud_run_v2_service" "extra" {
  name                = "corpus-b"
  location            = "europe-west1"
  deletion_protection = false
  template {
    containers {
      image = "europe-west1-docker.pkg.dev/ssfkit-corpus/ssfkit/a@sha256:0000000000000000000000000000000000000000000000000000000000000000"
      env {
        name  = "SSFKIT_GC_BOUND_SECONDS"
        value = "200"
      }
    }
  }
}
