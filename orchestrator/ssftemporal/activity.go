// Package ssftemporal runs SSFs as Temporal activities with exactly-once effects, and gives
// workflows helpers to call them, to coordinate cross-SSF transactions (the workflow is the
// durable two-phase-commit coordinator), to run sagas and to use the shared log.
//
// Temporal replays workflow code deterministically but runs activities at least once: a worker
// that dies after an activity's side effect and before reporting it makes Temporal run it again.
// Here an activity is an SSF instance whose id is derived from (namespace, workflow id, the
// business execution's run key, activity id), never the attempt nor the run, so a retried
// activity replays the steps the failed attempt logged instead of repeating them, and so do a
// reset run and a start that reuses the workflow id (see runKey and docs/temporal.md).
//
// Imports (docs/architecture.md): the runtime and the Temporal SDK; never a host (Register takes
// runtimes), a command or the test kit.
package ssftemporal

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// DefaultTaskQueue is the task queue ssfkit's workers and workflows use unless told otherwise.
const DefaultTaskQueue = "ssfkit"

// ActivityName is the Temporal activity type that runs the SSF named ssfName.
func ActivityName(ssfName string) string { return "ssf." + ssfName }

// Error types of the application errors activities return; neither is retried, since a retry
// would replay the same logged outcome.
const (
	// ErrTypeApplication: the SSF completed and its handler returned an error.
	ErrTypeApplication = "ssfkit.ApplicationError"
	// ErrTypeTxAborted: the SSF ran in a transaction that must abort because the application
	// aborted it.
	ErrTypeTxAborted = "ssfkit.TxAborted"
	// ErrTypeTxConflict: the SSF ran in a transaction that must abort because it (or an SSF it
	// called) lost a wait-die conflict; a new transaction with the same age may succeed.
	ErrTypeTxConflict = "ssfkit.TxConflict"
)

// Invocation is an activity's input: what the workflow asks of the SSF.
type Invocation struct {
	Input json.RawMessage `json:"input,omitempty"`
	// Tx is the transaction the SSF runs in (Mode execute), or, with End set, the transaction
	// to commit or abort (Mode commit or abort) in this SSF and every SSF it called in it.
	Tx  *ssf.TxContext `json:"tx,omitempty"`
	End bool           `json:"end,omitempty"`
	// Async registers the instance and returns at once; it runs through the host's transport
	// (a goroutine, or the SSF's queue).
	Async bool `json:"async,omitempty"`
	// IDs is idsStable when the helpers numbered the step and Run is the workflow's run key
	// (runKey); 0: an invocation from a workflow started before (Temporal's activity id and the
	// run id name the instance).
	IDs int    `json:"ids,omitempty"`
	Run string `json:"run,omitempty"`
}

// prepare sets the invocation's id scheme and returns the context to schedule it with: the
// helpers' options and, under stable ids, the step's own activity id.
func (inv *Invocation) prepare(ctx workflow.Context) workflow.Context {
	ctx = withOptions(ctx)
	if !stableIDs(ctx) {
		return ctx
	}
	inv.IDs, inv.Run = idsStable, runKey(ctx)
	return withStepID(ctx, "ssf")
}

// Register registers one activity per SSF runtime on w (a worker.Worker), named
// ActivityName(ssf): whichever host runs the runtimes (local.Host.Runtimes(), a cloud host's).
// Register every SSF a workflow calls on the workers of its task queue.
func Register(w worker.ActivityRegistry, runtimes ...*ssf.Runtime) {
	for _, rt := range runtimes {
		w.RegisterActivityWithOptions(func(ctx context.Context, inv Invocation) (json.RawMessage, error) {
			return invoke(ctx, rt, inv)
		}, activity.RegisterOptions{Name: ActivityName(rt.Name())})
	}
}

// invoke runs one attempt of the activity as the SSF instance the activity stands for.
func invoke(ctx context.Context, rt *ssf.Runtime, inv Invocation) (json.RawMessage, error) {
	name := rt.Name()
	info := activity.GetInfo(ctx)
	req := ssf.Request{
		Kind:       ssf.KindInvoke,
		InstanceID: InstanceID(info.WorkflowNamespace, info.WorkflowExecution.ID, instanceRun(inv.IDs, inv.Run, info.WorkflowExecution.RunID), info.ActivityID),
		// The attempt's deadline fences the execution: once Temporal has timed the attempt out,
		// the workflow may act on the failure (a saga compensates), so the attempt must be
		// unable to take further effects.
		Deadline: unixNanos(info.Deadline),
		Input:    inv.Input,
		Async:    inv.Async,
		Tx:       inv.Tx,
		Holder:   holder{Namespace: info.WorkflowNamespace, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}.String(),
	}
	if inv.End {
		holder := req.Holder
		if inv.Tx == nil || inv.Tx.Mode == ssf.TxExecute {
			return nil, temporal.NewNonRetryableApplicationError("ssftemporal: ending a transaction needs its context with mode commit or abort", "ssfkit.BadInput", nil)
		}
		var err error
		if req, err = ssf.EndTxRequest(req.InstanceID, name, *inv.Tx); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "ssfkit.BadInput", err)
		}
		req.Holder = holder
	}
	res, err := rt.Handle(ctx, req)
	switch {
	case errors.Is(err, ssf.ErrBadInput):
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "ssfkit.BadInput", err)
	case err != nil:
		// The execution was abandoned (a store error, a crash, the worker stopping): Temporal
		// retries the activity, and the retry replays what this attempt logged.
		return nil, err
	case res.TxConflict:
		// Normal under contention: the SDK logs a benign error at DEBUG, not ERROR, and RunTx
		// retries the transaction.
		activity.GetLogger(ctx).Info("transaction died in a wait-die conflict (normal under contention; RunTx retries it as a new transaction)",
			"ssf", name, "reason", res.Error)
		return nil, outcomeError(res.Error, ErrTypeTxConflict)
	case res.TxAborted:
		// The application aborted the transaction (a sold-out item): an outcome, not a failure.
		return nil, outcomeError(res.Error, ErrTypeTxAborted)
	case res.Error != "":
		return nil, temporal.NewNonRetryableApplicationError(res.Error, ErrTypeApplication, nil)
	}
	return res.Output, nil
}

// outcomeError is the activity error of an expected outcome the workflow acts on: not retried,
// and benign, so that workers log it at DEBUG rather than ERROR.
func outcomeError(msg, typ string) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

// unixNanos is t in unix nanoseconds, or 0 for the zero time (no deadline).
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// InstanceID is the SSF instance id of a workflow's activity; run is the run key (runKey). It
// never includes the attempt: every attempt of an activity is the same instance. Ids longer
// than the runtime allows are replaced by a digest of the same parts.
func InstanceID(namespace, workflowID, run, activityID string) string {
	id := strings.Join([]string{"wf", namespace, workflowID, run, activityID}, "/")
	if len(id) <= ssf.MaxInstanceIDLen {
		return id
	}
	return digestID("wf", namespace, workflowID, run, activityID)
}

// digestID names parts by a digest, for ids that would be too long spelled out.
func digestID(prefix string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}
