// Command gcp is the travel example's Cloud Run server: `ssfkit build --cloud gcp --app travel`
// builds it into a container image, and each Cloud Run service of its SSFs runs it.
package main

import (
	_ "gocloud.dev/blob/gcsblob"

	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
	"github.com/ssfkit/ssfkit/examples/travel"
	// The image has no base: the executable carries the CA roots TLS to Google's APIs needs.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() { httphost.Main(httphost.CloudRun, travel.Handlers()) }
