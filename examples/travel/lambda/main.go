// Command lambda is the travel example's AWS Lambda bootstrap: `ssfkit build --cloud aws --app
// travel` builds it, and an environment of its ten SSFs runs it.
package main

import (
	_ "gocloud.dev/blob/s3blob"

	"github.com/ssfkit/ssfkit/adapters/host/lambdahost"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	"github.com/ssfkit/ssfkit/examples/travel"
)

func main() { lambdahost.Main(travel.Handlers()) }
