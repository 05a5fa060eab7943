# allUsers through a binding resource the rules used not to name.
resource "google_pubsub_topic_iam_binding" "extra" {
  topic   = "corpus-a"
  role    = "roles/pubsub.publisher"
  members = ["allUsers"]
}
