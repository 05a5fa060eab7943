// Command azure is the bank example's Azure Functions custom handler: `ssfkit build --cloud
// azure --app bank` builds it, and every function app of modules/azure/examples/bank runs it.
package main

import (
	_ "gocloud.dev/blob/azureblob"

	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	_ "github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	"github.com/ssfkit/ssfkit/examples/bank"
)

func main() { httphost.Main(httphost.Azure, bank.Handlers()) }
