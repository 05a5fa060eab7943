// Package lambdahost runs an application's SSFs on AWS Lambda (the provided.al2023 runtime).
// One bootstrap binary, built by `ssfkit build --cloud aws`, serves every function the
// modules/aws/ssf module creates: Lambda passes each function's handler setting as _HANDLER,
// and the module sets the runtime's configuration in SSFKIT_* variables.
//
//   - handler "ssf": the SSF named SSFKIT_SSF. A direct invocation carries an ssf.Request
//     (a caller's SyncInvoke, a callback, `ssfkit invoke`) and returns its ssf.Result; an SQS
//     event carries asynchronous starts from the SSF's queue, each run like the local host's
//     queue consumer, failures reported per message so SQS retries only those. A poison start,
//     and one that fails on its last delivery before the queue's maxReceiveCount, are
//     dead-lettered by the host with the reason; SQS's redrive takes what the host could not.
//   - handler "intent-collector" / "garbage-collector": one pass of that collector over the
//     SSF's table, on EventBridge Scheduler's timer; the report is the function's result.
//
// Calls to other SSFs invoke their functions (<SSFKIT_ENVIRONMENT>-<name>) synchronously, and
// asynchronous starts of other SSFs invoke them with the Event invocation type; starts of the
// SSF itself (relaunches, its own spawns) go to its queue.
package lambdahost

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/ssfkit/ssfkit/internal/telemetry"
	"log/slog"
	"os"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The function roles, as the module sets them in each function's handler setting.
const (
	RoleSSF              = "ssf"
	RoleIntentCollector  = "intent-collector"
	RoleGarbageCollector = "garbage-collector"
)

// Config is a function's configuration, from its environment (ConfigFromEnv).
type Config struct {
	Role string // _HANDLER
	host.Config
}

// ConfigFromEnv reads a function's configuration; getenv is os.Getenv outside tests.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Role: getenv("_HANDLER")}
	switch c.Role {
	case RoleSSF, RoleIntentCollector, RoleGarbageCollector:
	default:
		return c, fmt.Errorf("lambdahost: the function's handler setting (_HANDLER) is %q; want %s, %s or %s", c.Role, RoleSSF, RoleIntentCollector, RoleGarbageCollector)
	}
	var err error
	if c.Config, err = host.ConfigFromEnv(getenv); err != nil {
		return c, fmt.Errorf("lambdahost: %w", err)
	}
	return c, nil
}

// Host serves one function.
type Host struct {
	role string
	fn   *host.Function
}

// New opens the SSF's store and queue and builds its runtime. handlers are the application's
// SSF handlers by name; the one named cfg.SSF is served. invoker reaches the other SSFs'
// functions (nil: a Lambda client from the default AWS configuration).
func New(ctx context.Context, cfg Config, handlers map[string]ssf.Handler, invoker Invoker) (*Host, error) {
	if invoker == nil {
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("lambdahost: AWS configuration: %w", err)
		}
		invoker = awslambda.NewFromConfig(awsCfg)
	}
	fn, err := host.Open(ctx, cfg.Config, handlers, func(own *queue.Queue) ssf.Transport {
		return &transport{cfg: cfg, invoker: invoker, queue: own}
	})
	if err != nil {
		return nil, fmt.Errorf("lambdahost: %w", err)
	}
	return &Host{role: cfg.Role, fn: fn}, nil
}

// Runtime is the SSF's runtime.
func (h *Host) Runtime() *ssf.Runtime { return h.fn.Runtime }

// Close releases the store and the queue.
func (h *Host) Close() { h.fn.Close() }

// Handle is the Lambda handler: one event in, the function's response out.
func (h *Host) Handle(ctx context.Context, event json.RawMessage) (any, error) {
	switch h.role {
	case RoleIntentCollector:
		return h.fn.CollectIntents(ctx)
	case RoleGarbageCollector:
		return h.fn.CollectGarbage(ctx)
	}
	var sqsEvent events.SQSEvent
	if err := json.Unmarshal(event, &sqsEvent); err == nil && len(sqsEvent.Records) > 0 && sqsEvent.Records[0].EventSource == "aws:sqs" {
		return h.handleQueued(ctx, sqsEvent), nil
	}
	var req ssf.Request
	if err := json.Unmarshal(event, &req); err != nil {
		return nil, fmt.Errorf("%w: SSF %s: the event is neither an ssf.Request nor an SQS batch: %v", ssf.ErrBadInput, h.fn.Config.SSF, err)
	}
	return h.fn.Runtime.Handle(ctx, req)
}

// handleQueued runs a batch of asynchronous starts; the ones that fail are reported so SQS
// delivers them again. The host dead-letters a poison start, and one that fails on the queue's
// last delivery (SSFKIT_MAX_RECEIVE_COUNT), itself, with the reason (host.Function.HandleQueued);
// SQS's redrive after maxReceiveCount is the backstop.
func (h *Host) handleQueued(ctx context.Context, e events.SQSEvent) events.SQSEventResponse {
	var resp events.SQSEventResponse
	for _, r := range e.Records {
		if err := h.fn.HandleQueued(ctx, QueueMessage(r)); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp
}

// QueueMessage is the queue.Message of an SQS event's record, as sqsqueue would receive it.
func QueueMessage(r events.SQSMessage) *queue.Message {
	attrs := map[string]string{}
	for k, a := range r.MessageAttributes {
		if a.StringValue != nil { // String and Number attributes; Binary ones are left out
			attrs[k] = *a.StringValue
		}
	}
	body, attrs := sqsqueue.Decode(r.Body, attrs)
	attempts, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	return &queue.Message{ID: r.MessageId, Body: body, Attributes: attrs, Attempts: attempts,
		Sent: sqsqueue.Timestamp(r.Attributes["SentTimestamp"]), FirstReceived: sqsqueue.Timestamp(r.Attributes["ApproximateFirstReceiveTimestamp"])}
}

// Main serves the function Lambda started this process for, with the application's handlers.
// It exits with a message if the configuration is wrong: Lambda reports the init failure.
func Main(handlers map[string]ssf.Handler) {
	ctx := context.Background()
	cfg, err := ConfigFromEnv(os.Getenv)
	if err == nil {
		_, err = telemetry.Start(ctx, cfg.SSF)
	}
	if err == nil {
		var h *Host
		if h, err = New(ctx, cfg, handlers, nil); err == nil {
			lambda.Start(func(ctx context.Context, event json.RawMessage) (any, error) {
				out, err := h.Handle(ctx, event)
				if ferr := telemetry.Flush(ctx); ferr != nil {
					slog.Warn("exporting telemetry", "error", ferr)
				}
				return out, err
			})
			return
		}
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// Invoker is the part of the Lambda API the transport uses (*lambda.Client).
type Invoker interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

// transport reaches the other SSFs of the environment through their functions.
type transport struct {
	cfg     Config
	invoker Invoker
	queue   *queue.Queue
}

func (t *transport) function(name string) string { return t.cfg.Environment + "-" + name }

// Call invokes the SSF's function and waits for its result. A function error (the execution
// was abandoned, or the function crashed) leaves the outcome unknown, as the runtime expects.
func (t *transport) Call(ctx context.Context, name string, req ssf.Request) (ssf.Result, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return ssf.Result{}, err
	}
	out, err := t.invoker.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(t.function(name)), Payload: payload})
	if err != nil {
		return ssf.Result{}, fmt.Errorf("invoking %s: %w", t.function(name), err)
	}
	if out.FunctionError != nil {
		return ssf.Result{}, fmt.Errorf("%s failed (%s): %s", t.function(name), aws.ToString(out.FunctionError), out.Payload)
	}
	var res ssf.Result
	if len(out.Payload) > 0 && string(out.Payload) != "null" {
		if err := json.Unmarshal(out.Payload, &res); err != nil {
			return ssf.Result{}, fmt.Errorf("%s returned %q, not an ssf.Result: %w", t.function(name), out.Payload, err)
		}
	}
	return res, nil
}

// Spawn starts req without waiting: on this SSF's own queue, or as an asynchronous invocation
// of another SSF's function (whose identity owns that SSF's queue).
func (t *transport) Spawn(ctx context.Context, name string, req ssf.Request) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if name == t.cfg.SSF {
		_, err := t.queue.Send(ctx, payload)
		return err
	}
	_, err = t.invoker.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(t.function(name)), Payload: payload, InvocationType: types.InvocationTypeEvent})
	if err != nil {
		return fmt.Errorf("starting %s: %w", t.function(name), err)
	}
	return nil
}

var _ ssf.Transport = (*transport)(nil)
