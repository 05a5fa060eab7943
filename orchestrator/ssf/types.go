package ssf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Handler is an SSF's code. It must be deterministic given its input and the values its Env
// returns, and must reach external state only through env. A returned error is an application
// error: it is recorded as the instance's result (exactly once) and returned to the caller.
type Handler func(env *Env, input json.RawMessage) (any, error)

// Result is an instance's outcome, as stored in its intent and returned to callers.
type Result struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	// TxAborted reports that the instance ran inside a transaction that must abort (it lost a
	// wait-die conflict, or the application aborted); the caller's transaction aborts too.
	TxAborted bool `json:"tx_aborted,omitempty"`
	// TxConflict reports that the abort started from a lost wait-die conflict (not from the
	// application), so retrying the transaction can succeed.
	TxConflict bool `json:"tx_conflict,omitempty"`
	// TxTouched, if TxListed, is what a transaction's participant touched in it (the items it
	// locked, the SSFs it called), for the caller to pass to the participant's end, which then
	// need not read the participant's record of it.
	TxTouched []string `json:"tx_touched,omitempty"`
	TxListed  bool     `json:"tx_listed,omitempty"`
	// Replayed reports that the result was recorded before this request reached the runtime
	// (by an earlier request with the same instance id, or a concurrent one that finished
	// first): the request ran nothing. Set by the runtime that answers; never stored or sent.
	Replayed bool `json:"-"`
}

// Err returns the application error carried by r, or nil. A result of an aborted transaction
// is an error wrapping ErrTxAborted.
func (r Result) Err() error {
	switch {
	case r.TxAborted:
		return fmt.Errorf("%w: %s", ErrTxAborted, r.Error)
	case r.Error == "":
		return nil
	}
	return &AppError{Message: r.Error}
}

// AppError is an application error returned by a handler, possibly in another SSF.
type AppError struct{ Message string }

func (e *AppError) Error() string { return e.Message }

// RequestKind says what a Request asks of an SSF.
type RequestKind string

// Request kinds.
const (
	// KindInvoke runs (or registers, if Async) an instance.
	KindInvoke RequestKind = "invoke"
	// KindCallback records a callee's result in the caller's invoke log (Beldi §4.5).
	KindCallback RequestKind = "callback"
)

// Request is the message between SSFs and from hosts to an SSF; it is JSON on the wire.
type Request struct {
	Kind       RequestKind     `json:"kind"`
	InstanceID string          `json:"instance_id"`
	Input      json.RawMessage `json:"input,omitempty"`
	// Async asks the callee to register the intent, acknowledge by callback and return; the
	// instance runs later (spawned, or by the intent collector).
	Async bool `json:"async,omitempty"`
	// Caller is where the callback goes; nil for top-level requests.
	Caller *CallerRef `json:"caller,omitempty"`
	// Result is the callee's result, for callbacks.
	Result *Result `json:"result,omitempty"`
	// Results are more callbacks in one request, each to its own invoke-log entry of this SSF:
	// a callee's garbage collector reports the instances it collects this way.
	Results []CalleeResult `json:"results,omitempty"`
	// Tx is the transaction the callee runs in (Beldi §6: contexts travel with calls).
	Tx *TxContext `json:"tx,omitempty"`
	// Holder names what may still send this request again after the instance finished, such
	// as the Temporal workflow execution whose activity it is (retries of a completed activity
	// whose completion was lost). The garbage collector keeps the instance while Config.Hold
	// says the holder may; without a holder, T after finishing is enough.
	Holder string `json:"holder,omitempty"`
	// Builtin names a runtime-provided handler to run instead of the SSF's own (the commit and
	// abort propagation of transactions).
	Builtin string `json:"builtin,omitempty"`
	// Sent marks a start of an existing instance (the runtime's own asynchronous starts and
	// relaunches) with when it was sent, in unix nanoseconds. Such a request never creates an
	// intent, and one delivered more than T after it was sent is refused (ErrLateStart): a
	// platform's late redelivery, which the intent collector has covered since.
	Sent int64 `json:"sent,omitempty"`
	// Deadline, if set (unix nanoseconds), is when the sender stops waiting and may act on the
	// request's failure (a Temporal activity attempt's deadline): the execution serving this
	// request is fenced DeadlineMargin before it, if that comes before its Lifetime.
	Deadline int64 `json:"deadline,omitempty"`
	// Trace is the W3C traceparent of the step that sent the request, kept in the intent: every
	// execution of the instance is traced as that step's child (OpenTelemetry).
	Trace string `json:"trace,omitempty"`
	// Fresh says the call comes from the caller's first execution of its step: the one that
	// created the caller's intent (a derived call), or the one that created the invoke-log
	// entry naming this instance. The instance is new unless a duplicate of the caller's
	// execution called it first, so the callee runs it without reading or writing its intent
	// first (deferredIntent). A hint: an intent that exists makes that execution start over.
	Fresh bool `json:"fresh,omitempty"`
}

// CalleeResult is one callback of a batch: the callee instance, the caller's invoke-log entry
// it reports to, and its result.
type CalleeResult struct {
	CalleeID string    `json:"callee_id"`
	Callee   string    `json:"callee,omitempty"` // the callee's SSF, for an entry the callback creates`
	Caller   CallerRef `json:"caller"`
	Result   Result    `json:"result"`
}

// CallerRef names the invoke-log entry a callee reports to.
type CallerRef struct {
	SSF        string `json:"ssf"`
	InstanceID string `json:"instance_id"`
	Step       int    `json:"step"`
}

// Transport carries requests between SSFs: an in-process host, Lambda, an HTTP endpoint.
type Transport interface {
	// Call delivers req to the SSF named ssf and waits for its result (Beldi's rawSyncInvoke).
	// An error means the outcome is unknown: the callee may or may not have run.
	Call(ctx context.Context, ssf string, req Request) (Result, error)
	// Spawn starts req on the SSF without waiting (the platform's asynchronous invoke). Delivery
	// may fail silently; the intent collector re-runs what never ran.
	Spawn(ctx context.Context, ssf string, req Request) error
}

// Clock supplies time; tests substitute a controllable one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

// Now reads the wall clock without Go's monotonic reading: lifetimes are compared across
// processes, and must count time a suspended VM spent asleep, which the monotonic clock skips.
func (systemClock) Now() time.Time { return time.Now().Round(0) }

// Errors returned by the runtime.
var (
	// ErrCorrupt: a stored structure violates an invariant (e.g. a NextRow pointing nowhere).
	ErrCorrupt = errors.New("ssf: corrupt runtime state")
	// ErrLifetimeExceeded: the execution outlived Config.Lifetime and was fenced off; the intent
	// collector will run the instance again.
	ErrLifetimeExceeded = errors.New("ssf: execution exceeded its lifetime bound")
	// ErrStopped: the handler stopped the execution (Env.Stop); the instance runs again later.
	ErrStopped = errors.New("ssf: execution stopped by its handler")
	// ErrValueTooLarge: a value does not fit in one row of the store with its logs.
	ErrValueTooLarge = errors.New("ssf: value too large for the store")
	// ErrBadInput: a request or argument is malformed.
	ErrBadInput = errors.New("ssf: bad input")
	// ErrDiverged: another execution of the same instance logged a different value for a step
	// this execution has used; it stops before acting on it, and a re-execution replays the log.
	ErrDiverged = errors.New("ssf: execution diverged from a concurrent execution of the same instance")
	// ErrTxAborted: the transaction must abort (wait-die, the application, or a participant);
	// operations in it fail with this until EndTx, which aborts it.
	ErrTxAborted = errors.New("ssf: transaction aborted")
	// ErrInstanceCollected: the instance was garbage-collected without a result (its holder
	// closed before it ran); its id is remembered (Config.KeyRetention) so that a late delivery
	// of its request cannot run it. A new request needs a new instance id. (A collected instance
	// that finished answers with its result.)
	ErrInstanceCollected = errors.New("ssf: instance already finished and collected")
	// The errors that come wrapped in ErrBadInput (ErrInputTooLarge, ErrLateStart,
	// ErrTableOwned, ErrInputMismatch) have no "ssf:" prefix: they read "ssf: bad input: ...".

	// ErrInputTooLarge: an input exceeds MaxInputBytes; it wraps ErrBadInput. Refused before
	// anything is written, on every store alike.
	ErrInputTooLarge = errors.New("input too large")
	// ErrLateStart: a start (Request.Sent) delivered more than T after it was sent; it wraps
	// ErrBadInput, so queues dead-letter it with the reason. Nothing is lost: the intent
	// collector launches every unfinished instance itself.
	ErrLateStart = errors.New("start delivered later than T after it was sent")
	// ErrAbandoned begins the failed result of an instance whose holder (a Temporal workflow)
	// closed without its result: it never takes effect after that.
	ErrAbandoned = errors.New("ssf: instance abandoned by its holder")
	// ErrTableOwned: the SSF's table belongs to another SSF (ClaimTable); it wraps ErrBadInput.
	ErrTableOwned = errors.New("table owned by another SSF")
	// ErrGaveUp begins the failed result of an instance the intent collector gave up on after
	// Config.MaxAttempts launches (the result's Error names it and the last error).
	ErrGaveUp = errors.New("ssf: instance given up")
	// ErrKeyExpired: the instance was collected and its answer dropped after KeyRetention; its
	// id is still recognised (ExpiredKeyRetention), so the request is refused, never run again.
	// It comes with ErrInstanceCollected.
	ErrKeyExpired = errors.New("ssf: idempotency key expired")
	// ErrInputMismatch: a request names an instance (an idempotency key) that was created
	// with a different input; it wraps ErrBadInput. Reusing a key for a new request is a
	// client bug, and answering with the old result would hide it.
	ErrInputMismatch = errors.New("instance id already used with a different input")
	// ErrCrashed is what fault injectors return to simulate a crash at a point.
	ErrCrashed = errors.New("ssf: crash injected")
)

// Failure is an instance a collector recorded as failed (Config.OnFailure).
type Failure struct {
	SSF        string
	InstanceID string
	// Error is the failed result's message: ErrGaveUp's or ErrAbandoned's, with the last error.
	Error string
	// Launches is how many times the intent collector launched it (0 for an abandoned one).
	Launches int
	// FirstExecution is when its first execution started (its intent was created), and
	// LastExecution when its last one did (FirstExecution if it ran once): the span of its
	// failures, which a dead-letter record reports.
	FirstExecution, LastExecution time.Time
	// Time is when the failure was recorded.
	Time time.Time
}

// ExecutionError reports that an execution was abandoned before its intent was marked done; the
// intent collector re-runs the instance. It wraps the infrastructure failure that caused it.
type ExecutionError struct {
	SSF, InstanceID string
	Err             error
}

func (e *ExecutionError) Error() string {
	return fmt.Sprintf("ssf %s: instance %s abandoned (the intent collector will re-run it): %v", e.SSF, e.InstanceID, e.Err)
}

func (e *ExecutionError) Unwrap() error { return e.Err }
