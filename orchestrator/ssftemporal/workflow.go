package ssftemporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// DefaultActivityOptions apply to SSF activities when the workflow context has none: a bounded
// attempt (keep StartToCloseTimeout below the SSF's ssf.Config.Lifetime, so an attempt Temporal
// gave up on is fenced off before its retry could be mistaken for it) and retries without limit,
// which are safe because every attempt is the same SSF instance.
var DefaultActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    100 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
	},
}

// withOptions returns ctx with DefaultActivityOptions unless the workflow set its own.
func withOptions(ctx workflow.Context) workflow.Context {
	if o := workflow.GetActivityOptions(ctx); o.StartToCloseTimeout > 0 || o.ScheduleToCloseTimeout > 0 {
		return ctx
	}
	return workflow.WithActivityOptions(ctx, DefaultActivityOptions)
}

// Future is the pending result of an SSF call started with Go.
type Future struct{ f workflow.Future }

// Get waits for the result and decodes it into out (nil: discard). An SSF that completed with an
// application error returns it as a *temporal.ApplicationError of type ErrTypeApplication.
func (f Future) Get(ctx workflow.Context, out any) error {
	var raw json.RawMessage
	if err := f.f.Get(ctx, &raw); err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("ssftemporal: decoding the result %s: %w", raw, err)
	}
	return nil
}

// Go starts the SSF named ssfName with input as an activity and returns at once; its effects
// happen exactly once however often Temporal retries the activity.
func Go(ctx workflow.Context, ssfName string, input any) Future {
	return start(ctx, ssfName, input, nil, false)
}

// Call runs the SSF named ssfName with input and decodes its result into out (nil: discard).
func Call(ctx workflow.Context, ssfName string, input any, out any) error {
	return Go(ctx, ssfName, input).Get(ctx, out)
}

// Spawn registers an asynchronous instance of the SSF and returns once it is registered,
// without waiting for it to run: the worker's host runs it (on a goroutine, or through the
// SSF's queue), and the intent collector re-runs it if it never ran. It runs exactly once.
func Spawn(ctx workflow.Context, ssfName string, input any) error {
	return start(ctx, ssfName, input, nil, true).Get(ctx, nil)
}

func start(ctx workflow.Context, ssfName string, input any, tx *ssf.TxContext, async bool) Future {
	raw, err := json.Marshal(input)
	if err != nil {
		f, set := workflow.NewFuture(ctx)
		set.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("ssftemporal: input for %s is not JSON-encodable: %v", ssfName, err), "ssfkit.BadInput", err))
		return Future{f}
	}
	inv := Invocation{Input: raw, Tx: tx, Async: async}
	return Future{workflow.ExecuteActivity(inv.prepare(ctx), ActivityName(ssfName), inv)}
}

// IsTxAborted reports whether err says an SSF's transaction must abort, for any reason.
func IsTxAborted(err error) bool { return hasType(err, ErrTypeTxAborted) || IsTxConflict(err) }

// IsTxConflict reports whether err says an SSF's transaction lost a wait-die conflict.
func IsTxConflict(err error) bool { return hasType(err, ErrTypeTxConflict) }

// IsApplicationError reports whether err is an error an SSF's handler returned.
func IsApplicationError(err error) bool { return hasType(err, ErrTypeApplication) }

func hasType(err error, typ string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == typ
}
