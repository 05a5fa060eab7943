package ssftemporal

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Tx is a cross-SSF transaction coordinated by a workflow: the workflow is the durable
// two-phase-commit coordinator. SSFs called through Tx run in the transaction (Beldi §6: locks
// with wait-die, writes to shadow copies, opacity); End commits or aborts it in each of them and
// in every SSF they called. Temporal's history makes the coordinator survive worker and process
// crashes: a replayed workflow ends the same transaction the same way, and each end is an
// exactly-once SSF instance.
type Tx struct {
	ctx          ssf.TxContext
	participants []string   // SSFs called in the transaction, in first-call order
	calls        []txFuture // every call, so that End learns each outcome before deciding
	abort        error      // why the transaction must abort; nil while it may commit
}

// BeginTx starts a transaction whose wait-die age is the workflow's current time.
func BeginTx(ctx workflow.Context) *Tx {
	return beginTx(ctx, workflow.Now(ctx).UnixNano())
}

func beginTx(ctx workflow.Context, start int64) *Tx {
	if stableIDs(ctx) {
		// The n-th transaction of the workflow, in every replay and in a run a reset creates:
		// a reset in the middle of a transaction continues it (its participants replay their
		// steps) instead of leaving it open with its locks held.
		return &Tx{ctx: ssf.TxContext{ID: txID(ctx, next(ctx, "tx")), Start: start, Mode: ssf.TxExecute}}
	}
	var id string
	// A workflow started before stable ids: a fresh id recorded in history, as it was.
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return "wftx-" + uuid.NewString() }).Get(&id); err != nil {
		panic(err) // decoding a string Temporal just recorded
	}
	return &Tx{ctx: ssf.TxContext{ID: id, Start: start, Mode: ssf.TxExecute}}
}

// ID is the transaction id, as the SSFs' lock owners and logs show it.
func (tx *Tx) ID() string { return tx.ctx.ID }

// Go starts the SSF in the transaction and returns at once. If the SSF reports that the
// transaction must abort (it lost a wait-die conflict, or its handler aborted), or if its
// outcome is unknown (the activity gave up), the transaction will abort.
func (tx *Tx) Go(ctx workflow.Context, ssfName string, input any) Future {
	if !slices.Contains(tx.participants, ssfName) {
		tx.participants = append(tx.participants, ssfName)
	}
	call := tx.ctx
	f := txFuture{start(ctx, ssfName, input, &call, false).f, tx}
	tx.calls = append(tx.calls, f)
	return Future{f}
}

// Call runs the SSF in the transaction and decodes its result into out (nil: discard).
func (tx *Tx) Call(ctx workflow.Context, ssfName string, input any, out any) error {
	return tx.Go(ctx, ssfName, input).Get(ctx, out)
}

// txFuture marks the transaction for abort when a participant's call fails in a way that
// leaves its part of the transaction unknown or doomed.
type txFuture struct {
	workflow.Future
	tx *Tx
}

func (f txFuture) Get(ctx workflow.Context, out any) error {
	err := f.Future.Get(ctx, out)
	if err != nil && !IsApplicationError(err) && f.tx.abort == nil {
		f.tx.abort = err
	}
	return err
}

// Abort makes the transaction abort when it ends.
func (tx *Tx) Abort(reason string) {
	if tx.abort == nil {
		tx.abort = errors.New(reason)
	}
}

// MustAbort returns why the transaction will abort, or nil if it may commit.
func (tx *Tx) MustAbort() error { return tx.abort }

// End waits for every call made in the transaction, then commits the transaction in every
// participant, or aborts it if it must, and reports whether it committed. It ends all participants in parallel and waits for all of them; an
// error means some participant's end failed for good (with the default activity options,
// Temporal retries an end until it succeeds).
func (tx *Tx) End(ctx workflow.Context) (committed bool, err error) {
	for _, c := range tx.calls {
		_ = c.Get(ctx, nil) // the outcome is what matters here, recorded in tx.abort
	}
	end := tx.ctx
	end.Mode = ssf.TxCommit
	if tx.abort != nil {
		end.Mode = ssf.TxAbort
	}
	futures := make([]workflow.Future, len(tx.participants))
	for i, p := range tx.participants {
		inv := Invocation{Tx: &end, End: true}
		futures[i] = workflow.ExecuteActivity(inv.prepare(ctx), ActivityName(p), inv)
	}
	var errs []error
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("ssftemporal: %s of transaction %s in %s: %w", end.Mode, end.ID, tx.participants[i], err))
		}
	}
	return end.Mode == ssf.TxCommit && len(errs) == 0, errors.Join(errs...)
}

// ErrConflicts is RunTx's error when every transaction it tried lost a wait-die conflict.
var ErrConflicts = errors.New("ssftemporal: every transaction lost a wait-die conflict")

// TxOptions bound RunTx's retries of transactions that lost a wait-die conflict.
type TxOptions struct {
	Attempts int           // at most this many transactions (default 10)
	Backoff  time.Duration // first wait between them, doubling up to 32x (default 50 ms)
}

// RunTx runs fn in a transaction and ends it: it commits if fn returns nil and no participant
// must abort, and aborts otherwise. A transaction that aborted because a participant lost a
// wait-die conflict is retried as a new transaction with the same age (so it only grows older
// than newcomers and eventually wins), after a durable timer. It returns whether a transaction
// committed, and fn's error unless that only said the transaction must abort.
func RunTx(ctx workflow.Context, opts TxOptions, fn func(tx *Tx) error) (committed bool, err error) {
	if opts.Attempts <= 0 {
		opts.Attempts = 10
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 50 * time.Millisecond
	}
	start := workflow.Now(ctx).UnixNano()
	for attempt := 0; ; attempt++ {
		tx := beginTx(ctx, start)
		fnErr := fn(tx)
		if fnErr != nil {
			tx.Abort(fnErr.Error())
		}
		committed, err := tx.End(ctx)
		if IsTxAborted(fnErr) {
			fnErr = nil // an outcome, reported by committed
		}
		if err != nil || committed || !IsTxConflict(tx.abort) {
			return committed, errors.Join(fnErr, err)
		}
		if attempt+1 >= opts.Attempts {
			return false, fmt.Errorf("%w: %d transactions; the last: %w", ErrConflicts, opts.Attempts, tx.abort)
		}
		if err := workflow.Sleep(ctx, opts.Backoff<<min(attempt, 5)); err != nil {
			return false, err
		}
	}
}
