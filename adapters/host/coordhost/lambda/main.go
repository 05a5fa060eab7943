// Command lambda is the coordination service's AWS Lambda bootstrap (provided.al2023): every
// function of modules/aws/coordination runs it, its role in SSFKIT_COORD_ROLE (coordhost).
//
//   - writer: an SQS event from the requests' queue; each record names a session whose stored
//     requests it decides. Failures are reported per record, so SQS delivers only those again
//     (and its redrive dead-letters a record that keeps failing).
//   - heartbeat: EventBridge Scheduler's timer; one housekeeping pass, its report the result.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	"github.com/ssfkit/ssfkit/adapters/host/lambdahost"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/store/dynamostore"
)

// handler serves one function.
type handler struct{ fn *coordhost.Function }

// handle is the Lambda handler: one event in, the function's response out.
func (h handler) handle(ctx context.Context, event json.RawMessage) (any, error) {
	if h.fn.Config.Role == coordhost.RoleHeartbeat {
		return h.fn.Heartbeat(ctx)
	}
	var e events.SQSEvent
	if err := json.Unmarshal(event, &e); err != nil || len(e.Records) == 0 || e.Records[0].EventSource != "aws:sqs" {
		return nil, fmt.Errorf("coordination writer: the event is not an SQS batch (%v): %.200s", err, event)
	}
	var resp events.SQSEventResponse
	for _, r := range e.Records {
		err := h.fn.HandleMessage(ctx, lambdahost.QueueMessage(r))
		if poison := (*queue.PoisonError)(nil); errors.As(err, &poison) {
			// Never decidable: retried until SQS's redrive moves it to the dead-letter queue,
			// where it can be inspected; the error says why.
			fmt.Fprintln(os.Stderr, err)
		}
		if err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

func main() {
	ctx := context.Background()
	cfg, err := coordhost.ConfigFromEnv(os.Getenv)
	if err == nil && cfg.Role == "" {
		err = fmt.Errorf("coordination function: SSFKIT_COORD_ROLE is not set; on Lambda each function is the %s or the %s", coordhost.RoleWriter, coordhost.RoleHeartbeat)
	}
	if err == nil {
		var fn *coordhost.Function
		if fn, err = coordhost.Open(ctx, cfg); err == nil {
			lambda.Start(handler{fn}.handle)
			return
		}
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
