// Command gcp is the bank example's Cloud Run server: `ssfkit build --cloud gcp --app bank`
// builds it into a container image, and every service of modules/gcp/examples/bank runs it.
package main

import (
	_ "gocloud.dev/blob/gcsblob"

	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
	"github.com/ssfkit/ssfkit/examples/bank"
	// The image has no base: the executable carries the CA roots TLS to Google's APIs needs.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() { httphost.Main(httphost.CloudRun, bank.Handlers()) }
