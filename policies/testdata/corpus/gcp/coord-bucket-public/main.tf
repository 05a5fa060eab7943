# A bucket whose public access is not prevented (it inherits the organization's setting).
resource "google_storage_bucket" "extra" {
  name                        = "corpus-extra-exports"
  location                    = "europe-west1"
  uniform_bucket_level_access = true
  public_access_prevention    = "inherited"
}
