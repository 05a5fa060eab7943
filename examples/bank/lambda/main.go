// Command lambda is the bank example's AWS Lambda bootstrap: `ssfkit build --cloud aws --app
// bank` builds it, and every function of modules/aws/examples/bank runs it.
package main

import (
	_ "gocloud.dev/blob/s3blob"

	"github.com/ssfkit/ssfkit/adapters/host/lambdahost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	"github.com/ssfkit/ssfkit/examples/bank"
)

func main() { lambdahost.Main(bank.Handlers()) }
