// Command azure is the travel example's Azure Functions custom handler: `ssfkit build --cloud
// azure --app travel` builds it, and each function app of an environment of its SSFs runs it.
package main

import (
	_ "gocloud.dev/blob/azureblob"

	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	_ "github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	"github.com/ssfkit/ssfkit/examples/travel"
)

func main() { httphost.Main(httphost.Azure, travel.Handlers()) }
