# A bucket with fine-grained object ACLs instead of uniform bucket-level access.
resource "google_storage_bucket" "extra" {
  name                        = "corpus-extra-exports"
  location                    = "europe-west1"
  uniform_bucket_level_access = false
  public_access_prevention    = "enforced"
}
