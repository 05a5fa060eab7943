package ssf

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// Env is an SSF instance's only door to the outside world: every method is an exactly-once
// step. Steps are numbered in call order, so a handler must make the same calls in the same
// order when re-executed (it is deterministic given the values Env returns).
//
// Once an operation fails for an infrastructure reason (store unreachable, crash, lifetime
// exceeded), every later call returns the same error and the instance is left for the intent
// collector: an execution that lost track of its effects must not mark itself done.
type Env struct {
	rt        *Runtime
	ctx       context.Context
	id        string
	step      int
	replaying bool
	fence     *fence // the execution's lifetime, checked before every request it sends
	err       error
	// incarnation tells this instance's write-log entries from those of an earlier instance
	// that had the same id and was collected (the intent's creation time).
	incarnation string
	start       int64    // the intent's creation time: the wait-die age of transactions it begins
	tx          *txState // the transaction the instance runs in, if any
	locksMarked bool     // the intent says the instance takes locks of its own (markLocks)
	// unlogged holds read-log entries not yet written: a read only needs its value durable
	// before the next externally visible effect, so entries travel together in one batch then
	// (flush), and with the done mark for reads after the last effect. Provenance's write
	// records travel the same way.
	unlogged []unloggedEntry
	// unwritten is the instance's intent creation while this execution has not written it
	// (Runtime.deferredIntent): the first flush carries it, and a step that may write
	// otherwise writes it first (begin).
	unwritten *creation
	// intentRow is the intent's row as this execution's last update of it left it (intent.row),
	// nil when unknown.
	intentRow store.Attrs
	// deferring, set by a transaction end on a store with transactions or all-or-nothing
	// batches, holds its commits back to the done mark (deferred): an end's result depends on
	// none of them, so the whole end is one commit (writeDeferred in the done mark's store
	// transaction, or Runtime.endInOneBatch).
	deferring bool
	deferred  []deferredWrite
	stepSpan  trace.Span // the step being taken, when tracing records (traceStep)
}

// unloggedEntry is a read-log entry (value) or, for a write step, its provenance record, not
// yet written.
type unloggedEntry struct {
	step  int
	value []byte
	event *dataEvent // the item read or written, when the SSF captures provenance
	kind  string     // the log row's kind when not "read" (a read-only SQL step's)
	// txRecord, if set, makes the entry not a log entry but a note in a transaction's record
	// (Env.note), idempotent, at this key.
	txRecord *store.Key
	call     *callRecord // if set, the entry is the invoke-log entry of a derived call
	at       int64       // when it was taken, for provenance (entries without an event)
}

// dataEvent is what a step did to an item, kept for provenance in the step's log entry: in the
// read-log entry of a read, in an entry of its own ("w|STEP") for a write.
type dataEvent struct {
	write      bool
	table, key string
	version    int64 // the item version read, made, or seen by a failed condition; -1 for a shadow
	applied    bool
	shadow     bool   // the transaction's own copy of the item
	digest     string // of a written value
	value      []byte // a written value, with CaptureFull
	at         int64
}

// InstanceID is the instance's id, stable across re-executions.
func (e *Env) InstanceID() string { return e.id }

// Context is the execution's context.
func (e *Env) Context() context.Context { return e.ctx }

// SSF is the name of the SSF this instance belongs to.
func (e *Env) SSF() string { return e.rt.cfg.Name }

// Progress returns the number of the next step, for a checkpoint: a handler that saves it with
// its own state (where its host can keep it, e.g. Temporal's heartbeat details) can make a
// later execution of the instance skip to it with ResumeAt instead of replaying every step
// before it. The reads before it are logged first, so every execution agrees on them. Outside
// transactions only: a transaction's locks and uncommitted writes belong to the execution's state.
func (e *Env) Progress() (int, error) {
	if err := e.alive(); err != nil {
		return 0, err
	}
	if e.tx != nil {
		return 0, fmt.Errorf("%w: no checkpoint inside a transaction", ErrBadInput)
	}
	// Provenance's write records too: a resumed execution skips the steps before it.
	if err := e.flushing(true); err != nil {
		return 0, err
	}
	return e.step, nil
}

// Stop ends this execution without finishing the instance, as a crash would: the instance stays
// unfinished, and its next execution (the host's retry, or the intent collector's) runs it
// again, replaying the logged steps (or resuming from a checkpoint). Return its error from the
// handler, e.g. after checkpointing because the host is shutting down.
func (e *Env) Stop(cause error) error {
	return e.fail(fmt.Errorf("%w: %w", ErrStopped, cause))
}

// ResumeAt makes this execution continue at step, a Progress an earlier execution of the same
// instance reported, with the handler's state from that point restored by the handler. It must
// come before any other operation; the steps after it replay from the log as usual.
func (e *Env) ResumeAt(step int) error {
	switch {
	case e.step != 0 || e.tx != nil:
		return fmt.Errorf("%w: ResumeAt after the execution's first step", ErrBadInput)
	case step < 0:
		return fmt.Errorf("%w: ResumeAt(%d): steps count from 0", ErrBadInput, step)
	}
	e.step = step
	return nil
}

// alive fails once the execution is poisoned or past its lifetime, which fences off stragglers
// so that the GC's bound T holds even if the host does not kill them.
func (e *Env) alive() error {
	if e.err != nil {
		return e.err
	}
	if err := e.fence.expired(); err != nil {
		return e.fail(err)
	}
	return nil
}

// errCreatedElsewhere: another execution wrote the intent of the instance this one ran before
// writing it (Runtime.deferredIntent); this one starts over, replaying.
var errCreatedElsewhere = fmt.Errorf("%w: another execution created the instance first", ErrDiverged)

// begin starts a step and returns its number, writing the intent first if it is not yet
// written: any step may act on the world, except those that call beginQueued.
func (e *Env) begin() (int, error) {
	if err := e.writeIntent(); err != nil {
		return 0, err
	}
	return e.beginQueued()
}

// beginQueued starts a step that writes nothing but through a flush (flushTo, carryingFlush),
// which carries the intent's creation if it is not yet written.
func (e *Env) beginQueued() (int, error) {
	if err := e.alive(); err != nil {
		return 0, err
	}
	s := e.step
	e.step++
	e.rt.stats.steps.inc()
	if e.stepSpan != nil {
		e.stepSpan.SetAttributes(attribute.Int("ssf.step", s))
	}
	return s, nil
}

// writeIntent writes the intent's creation if this execution has not yet.
func (e *Env) writeIntent() error {
	if e.unwritten == nil {
		return nil
	}
	if err := e.alive(); err != nil {
		return err
	}
	rs, err := e.rt.st.UpdateBatch(e.ctx, e.unwritten.batch(false))
	if err == nil {
		_, err = e.checkCreated(rs)
	}
	if err != nil {
		return e.fail(err)
	}
	e.unwritten = nil
	return nil
}

// creationBatch is the unwritten intent's creation, for a flush to carry first; nil once written.
func (e *Env) creationBatch() []store.BatchUpdate {
	if e.unwritten == nil {
		return nil
	}
	return e.unwritten.batch(false)
}

// checkCreated checks the results of a batch that began with creationBatch, and returns the
// results after it.
func (e *Env) checkCreated(rs []store.UpdateResult) ([]store.UpdateResult, error) {
	if e.unwritten == nil {
		return rs, nil
	}
	if !rs[1].Applied {
		return nil, errCreatedElsewhere
	}
	e.intentRow = rs[1].Attrs
	return rs[2:], nil
}

// flushed records a flush that succeeded: kept is what stays queued, and the intent is written.
func (e *Env) flushed(kept []unloggedEntry) {
	e.unlogged, e.unwritten = kept, nil
}

// fail poisons the execution with an infrastructure error.
func (e *Env) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return e.err
}

// Read returns the current value of key in table (nil when absent), exactly once: a
// re-execution returns the value logged by the first execution that reached this step.
func (e *Env) Read(table, key string) (_ json.RawMessage, err error) {
	defer e.traceStep("read", "ssf.item.table", table, "ssf.item.key", key)(&err)
	if err := validItem(table, key); err != nil {
		return nil, err
	}
	var locked store.Attrs // the item's row as the lock step this read took left it
	if e.tx != nil {
		var err error
		if _, locked, err = e.txLock(table, key, nil); err != nil {
			return nil, err
		}
	}
	step, err := e.beginQueued()
	if err != nil {
		return nil, err
	}
	return e.loggedEvent(step, func() ([]byte, *dataEvent, error) {
		var v []byte
		var version int64
		var shadow bool
		var err error
		switch {
		case locked != nil:
			// Under the lock it just took, the transaction sees what the lock step saw: no
			// read of its own.
			v, version, shadow = valueInTx(e, locked)
		case e.tx != nil:
			v, version, shadow, err = e.rt.readInTx(e, table, key)
		default:
			v, version, err = e.rt.readValue(e.ctx, table, key)
		}
		if err != nil || !e.rt.capturing() {
			return v, nil, err
		}
		if shadow {
			version = -1
		}
		return v, &dataEvent{table: table, key: key, version: version, shadow: shadow, at: e.rt.now()}, nil
	})
}

// ReadInto reads key into dst (JSON-decoded); found is false when the key has no value.
func (e *Env) ReadInto(table, key string, dst any) (found bool, err error) {
	v, err := e.Read(table, key)
	if err != nil || v == nil {
		return false, err
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return true, fmt.Errorf("%w: %s/%s holds %s, which does not decode into %T: %v", ErrBadInput, table, key, v, dst, err)
	}
	return true, nil
}

// Write sets key in table to value (any JSON-encodable value; nil stores null), exactly once.
// Inside a transaction the value waits uncommitted beside the item's committed value, in the
// same row, until the commit: the two must fit together, or Write returns ErrValueTooLarge.
func (e *Env) Write(table, key string, value any) (err error) {
	defer e.traceStep("write", "ssf.item.table", table, "ssf.item.key", key)(&err)
	val, err := e.encodeValue(table, key, value)
	if err != nil {
		return err
	}
	if e.tx != nil {
		return e.txWrite(table, key, val)
	}
	step, err := e.beginQueued()
	if err != nil {
		return err
	}
	_, err = e.logAndWrite(dataPartition(table, key), step, daalWrite{setValue: true, value: val, record: e.writeEvent(table, key, val, false)})
	return err
}

// CondWrite sets key to value if cond holds on its current value, exactly once, and reports
// whether it did. cond is evaluated over the JSON value ("$" is the whole value; "balance"
// a field): build it with the store package's constructors or store.ParseCond.
func (e *Env) CondWrite(table, key string, value any, cond store.Cond) (_ bool, err error) {
	defer e.traceStep("condwrite", "ssf.item.table", table, "ssf.item.key", key)(&err)
	if e.tx != nil {
		// Under the item's lock nothing else changes it: evaluate on what the transaction reads.
		cur, err := e.Read(table, key)
		if err != nil || !evalOnValue(cond, []byte(cur)) {
			return false, err
		}
		return true, e.Write(table, key, value)
	}
	val, err := e.encodeValue(table, key, value)
	if err != nil {
		return false, err
	}
	step, err := e.beginQueued()
	if err != nil {
		return false, err
	}
	out, err := e.logAndWrite(dataPartition(table, key), step, daalWrite{setValue: true, value: val,
		when:   func(a store.Attrs) bool { return evalOnValue(cond, a[attrValue]) },
		record: e.writeEvent(table, key, val, false)})
	return out.applied, err
}

// SyncInvoke calls the SSF callee with input and returns its output, exactly once: the callee
// gets an instance id from this step's invoke-log entry, and reports its result back by
// callback before it counts as done (Beldi §4.5). An application error in the callee is
// returned as *AppError.
func (e *Env) SyncInvoke(callee string, input any) (_ json.RawMessage, err error) {
	defer e.traceStep("invoke", "ssf.callee", callee)(&err)
	res, err := e.call(callee, input, false)
	if err != nil {
		return nil, err
	}
	if e.tx != nil {
		e.tx.heard(callee, res)
	}
	if res.TxAborted && e.tx != nil && e.tx.aborted == nil {
		cause := "application"
		if res.TxConflict {
			cause = "wait-die"
		}
		e.tx.aborted = &TxAbortedError{TxID: e.tx.ctx.ID, Start: e.tx.ctx.Start, Reason: "participant", Participant: callee, Message: res.Error, Cause: cause}
	}
	return res.Output, res.Err()
}

// AsyncInvoke starts the SSF callee with input and returns once the callee has durably
// registered the instance; the callee runs it exactly once, later.
func (e *Env) AsyncInvoke(callee string, input any) (err error) {
	defer e.traceStep("invoke", "ssf.callee", callee, "ssf.async", "true")(&err)
	if e.tx != nil {
		// As in Beldi: a transaction's participants must report back before it ends.
		return fmt.Errorf("%w: AsyncInvoke is %v; use SyncInvoke", ErrBadInput, errTxNotSupported)
	}
	_, err = e.call(callee, input, true)
	return err
}

// call invokes callee as one logged step.
func (e *Env) call(callee string, input any, async bool) (Result, error) {
	c, err := e.logCall(callee, input, async, "")
	if err != nil {
		return Result{}, err
	}
	res, err := c.send(e)
	if err != nil {
		return Result{}, e.fail(err)
	}
	return res, nil
}

// loggedCall is a call whose step is logged: the invocation to send, or the result the log
// already holds.
type loggedCall struct {
	callee string
	logRow store.Key
	req    Request
	result *Result // from the log: nothing to send
}

// send invokes the callee, unless the log holds its result. It changes nothing in the
// execution's state, so sends may run side by side; the caller fails the execution with its
// error.
func (c loggedCall) send(e *Env) (Result, error) {
	if c.result != nil {
		return *c.result, nil
	}
	res, err := e.rt.call(e.ctx, c.callee, c.req, "call", c.logRow)
	if err != nil {
		return Result{}, fmt.Errorf("invoke %s (instance %s): %w", c.callee, c.req.InstanceID, err)
	}
	return res, nil
}

// logCall takes the call's step and names the callee's instance (or one of the runtime's
// built-in handlers on it): a synchronous call by the step itself (derivedCall); an
// asynchronous one, which a transaction never makes, in an invoke-log entry it writes with a
// drawn id, or finds with the result if one came back.
func (e *Env) logCall(callee string, input any, async bool, builtin string) (loggedCall, error) {
	if !store.ValidIdentifier(callee) {
		return loggedCall{}, fmt.Errorf("%w: callee name %q is not a valid SSF name", ErrBadInput, callee)
	}
	in, err := json.Marshal(input)
	if err != nil {
		return loggedCall{}, fmt.Errorf("%w: input for %s is not JSON-encodable: %v", ErrBadInput, callee, err)
	}
	if err := checkInputSize(callee, in); err != nil {
		return loggedCall{}, err
	}
	var tx *TxContext
	if e.tx != nil {
		if e.tx.aborted != nil {
			return loggedCall{}, e.tx.aborted
		}
		tx = &e.tx.ctx
		// The callee may lock items that only this instance's end releases.
		if err := e.markLocks(); err != nil {
			return loggedCall{}, err
		}
		// Noted before the call (a participant's record flushed below), so that commit or abort
		// reaches the callee even if this execution dies right after it.
		e.note("c|" + callee)
	}
	// The flush writes the intent's creation, if this execution has not, with the entries.
	step, err := e.beginQueued()
	if err != nil {
		return loggedCall{}, err
	}
	if err := e.flush(); err != nil {
		return loggedCall{}, err
	}
	logRow := invokeLogKey(e.id, step)
	if !async {
		return e.derivedCall(callee, in, step, logRow, tx, builtin)
	}
	var at int64
	if e.rt.capturing() {
		at = e.rt.now()
	}
	r, err := e.rt.st.Update(e.ctx, logRow, store.RowAbsent(), invokeEntry(callee, uuid.NewString(), at))
	if err != nil {
		return loggedCall{}, e.fail(err)
	}
	if r.Attrs[attrCallee] != callee {
		return loggedCall{}, e.fail(fmt.Errorf("%w: step %d of instance %s invoked %v before, %s now: the handler is not deterministic", ErrCorrupt, step, e.id, r.Attrs[attrCallee], callee))
	}
	calleeID, _ := r.Attrs[attrCalleeID].(string)
	if logged, ok := r.Attrs[attrResult].([]byte); ok {
		var res Result
		if err := json.Unmarshal(logged, &res); err != nil {
			return loggedCall{}, e.fail(fmt.Errorf("%w: invoke log %s: %v", ErrCorrupt, logRow, err))
		}
		return loggedCall{callee: callee, logRow: logRow, result: &res}, nil
	}
	req := Request{Kind: KindInvoke, InstanceID: calleeID, Input: in, Async: true,
		Caller: &CallerRef{SSF: e.rt.cfg.Name, InstanceID: e.id, Step: step}, Trace: traceparent(e.ctx), Fresh: r.Applied}
	return loggedCall{callee: callee, logRow: logRow, req: req}, nil
}

// derivedCall is a synchronous call (in a transaction or not), whose callee instance is named by
// the call itself (calledInstanceID): every execution of this step sends the same id, so
// nothing needs to be written before the call (Beldi logs a drawn id first: one commit per
// call). The callee answers with the result that stands, from its done intent or tombstone
// when asked again; its garbage collector calls the result back into this step's invoke-log
// entry before it forgets the instance, creating the entry while this instance is unfinished
// (handleCallback). So only a re-executing execution looks for the entry, and only the
// execution that created this instance's intent (the one that is not replaying, which reaches
// this step at most once) tells the callee that the instance is new (Request.Fresh); every
// other one started after the intent existed and may follow another that called already. The
// creator needs no look: a result is called back only after the callee was done for T, and
// the callee was called after the creator started, which fences it by then.
func (e *Env) derivedCall(callee string, in []byte, step int, logRow store.Key, tx *TxContext, builtin string) (loggedCall, error) {
	calleeID := calledInstanceID(e.rt.cfg.Name, e.id, e.incarnation, step, callee)
	found := false
	if e.replaying {
		a, ok, err := e.rt.st.Get(e.ctx, logRow)
		if err != nil {
			return loggedCall{}, e.fail(err)
		}
		if found = ok; found {
			if c, named := a[attrCallee].(string); named && c != callee {
				return loggedCall{}, e.fail(fmt.Errorf("%w: step %d of instance %s invoked %v before, %s now: the handler is not deterministic", ErrCorrupt, step, e.id, c, callee))
			}
			if id, _ := a[attrCalleeID].(string); id != "" {
				calleeID = id // drawn by an execution from before ids were derived
			}
			if logged, ok := a[attrResult].([]byte); ok {
				var res Result
				if err := json.Unmarshal(logged, &res); err != nil {
					return loggedCall{}, e.fail(fmt.Errorf("%w: invoke log %s: %v", ErrCorrupt, logRow, err))
				}
				return loggedCall{callee: callee, logRow: logRow, result: &res}, nil
			}
		}
	}
	if e.rt.capturing() && !found {
		// Provenance's record of the call, written with the next batch of log entries.
		e.unlogged = append(e.unlogged, unloggedEntry{step: step, call: &callRecord{callee: callee, calleeID: calleeID}, at: e.rt.now()})
	}
	req := Request{Kind: KindInvoke, InstanceID: calleeID, Input: in, Tx: tx, Builtin: builtin,
		Caller: &CallerRef{SSF: e.rt.cfg.Name, InstanceID: e.id, Step: step}, Trace: traceparent(e.ctx), Fresh: !e.replaying}
	return loggedCall{callee: callee, logRow: logRow, req: req}, nil
}

// calledInstanceID names the callee instance of a synchronous call: the
// caller's SSF, instance and incarnation (an id reused after collection calls new instances),
// the step and the callee.
func calledInstanceID(caller, id, incarnation string, step int, callee string) string {
	return uuid.NewSHA1(calledInstanceNamespace, []byte(strings.Join([]string{caller, id, incarnation, strconv.Itoa(step), callee}, "\x00"))).String()
}

// calledInstanceNamespace is the name space of calledInstanceID's version-5 UUIDs.
var calledInstanceNamespace = uuid.MustParse("6f0c2d4e-58a1-4b6e-9d0f-3c7a1e2b5d84")

// callRecord is provenance's record of a derived call (an invoke-log entry written late).
type callRecord struct{ callee, calleeID string }

// invokeEntry is the content of an invoke-log entry naming calleeID of SSF callee ("": not
// known) and, for provenance, when the call was made (0: not recorded).
func invokeEntry(callee, calleeID string, at int64) store.Update {
	upd := store.Update{store.SetAttr(store.Attr(attrKind), "invoke"), store.SetAttr(store.Attr(attrCalleeID), calleeID)}
	if callee != "" {
		upd = append(upd, store.SetAttr(store.Attr(attrCallee), callee))
	}
	if at != 0 {
		upd = append(upd, store.SetAttr(store.Attr(attrAt), at))
	}
	return upd
}

// Now returns the time, logged so that a re-execution sees the same time.
func (e *Env) Now() (_ time.Time, err error) {
	defer e.traceStep("now")(&err)
	step, err := e.beginQueued()
	if err != nil {
		return time.Time{}, err
	}
	b, err := e.logged(step, func() ([]byte, error) {
		return strconv.AppendInt(nil, e.rt.now(), 10), nil
	})
	if err != nil {
		return time.Time{}, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return time.Time{}, e.fail(fmt.Errorf("%w: logged time %q", ErrCorrupt, b))
	}
	return time.Unix(0, n), nil
}

// Random returns a random uint64, logged so that a re-execution sees the same number.
func (e *Env) Random() (_ uint64, err error) {
	defer e.traceStep("random")(&err)
	step, err := e.beginQueued()
	if err != nil {
		return 0, err
	}
	b, err := e.logged(step, func() ([]byte, error) {
		var buf [8]byte
		_, err := rand.Read(buf[:])
		return []byte(strconv.FormatUint(binary.LittleEndian.Uint64(buf[:]), 10)), err
	})
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, e.fail(fmt.Errorf("%w: logged random %q", ErrCorrupt, b))
	}
	return n, nil
}

// UUID returns a random UUID, logged so that a re-execution sees the same one.
func (e *Env) UUID() (_ string, err error) {
	defer e.traceStep("uuid")(&err)
	step, err := e.beginQueued()
	if err != nil {
		return "", err
	}
	b, err := e.logged(step, func() ([]byte, error) { return []byte(uuid.NewString()), nil })
	return string(b), err
}

// External calls fn, a function that does not use ssfkit (a legacy service, an HTTP API), and
// logs its result. This is at-least-once, not exactly-once: a crash after fn ran but before its
// result was logged runs fn again. Once logged, re-executions replay the result.
func (e *Env) External(fn func(ctx context.Context) (json.RawMessage, error)) (_ json.RawMessage, err error) {
	defer e.traceStep("external")(&err)
	step, err := e.begin()
	if err != nil {
		return nil, err
	}
	if logged, found, err := e.rt.readLog(e.ctx, e.id, step); err != nil || found {
		if err != nil {
			return nil, e.fail(err)
		}
		return logged, nil
	}
	if err := e.flush(); err != nil { // the call is an external effect
		return nil, err
	}
	if err := e.alive(); err != nil {
		return nil, err
	}
	out, err := fn(e.ctx)
	if err != nil {
		return nil, err // not logged: a re-execution calls fn again
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("%w: external call returned invalid JSON", ErrBadInput)
	}
	// Logged at once, not deferred: the sooner it is durable, the fewer calls repeat.
	e.unlogged = append(e.unlogged, unloggedEntry{step: step, value: out})
	if err := e.flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// logged runs produce for this step unless a previous execution logged a value, and queues
// the result for the read log, so every execution that performs an effect after this step sees
// the first logged value (Beldi Fig. 5). Producing need not be atomic with logging: until
// logged, nothing external depended on it.
func (e *Env) logged(step int, produce func() ([]byte, error)) ([]byte, error) {
	return e.loggedEvent(step, func() ([]byte, *dataEvent, error) {
		v, err := produce()
		return v, nil, err
	})
}

// loggedEvent is logged for a step whose entry also records what it read, for provenance.
func (e *Env) loggedEvent(step int, produce func() ([]byte, *dataEvent, error)) ([]byte, error) {
	return e.loggedAs(unloggedEntry{step: step}, produce)
}

// loggedAs is loggedEvent for an entry with more to say than its value and event.
func (e *Env) loggedAs(entry unloggedEntry, produce func() ([]byte, *dataEvent, error)) ([]byte, error) {
	if e.replaying {
		if v, found, err := e.rt.readLog(e.ctx, e.id, entry.step); err != nil || found {
			if err != nil {
				return nil, e.fail(err)
			}
			return v, nil
		}
	}
	v, ev, err := produce()
	if err != nil {
		return nil, e.fail(err)
	}
	entry.value, entry.event = v, ev
	e.unlogged = append(e.unlogged, entry)
	return v, nil
}

// flush writes the queued read-log entries, in one request where the store can batch. An entry
// another execution of this instance already logged with a different value means this
// execution went down a path that execution did not: it stops before acting on it, and a
// re-execution replays the logged values.
func (e *Env) flush() error { return e.flushing(false) }

// flushing writes the queued entries that must be durable before an effect, or all of them.
func (e *Env) flushing(all bool) error {
	kept, err := e.flushTo(e.rt.st, all)
	if err != nil {
		return e.fail(err)
	}
	e.flushed(kept)
	return nil
}

// maxQueuedRecords bounds the write records an execution holds back (flushTo).
const maxQueuedRecords = 32

// isRecord reports whether an entry is provenance's record of a write, which no effect depends
// on: it may wait for the done mark, which takes it in its own batch.
func (u unloggedEntry) isRecord() bool { return (u.event != nil && u.event.write) || u.call != nil }

// flushTo writes the queued read-log entries to st (with the write records, if all, or if
// maxQueuedRecords of them wait) and returns the entries it left queued. It keeps the queue
// itself: a transaction that rolls back (and may run again) must still have them.
func (e *Env) flushTo(st *store.Table, all bool) (kept []unloggedEntry, err error) {
	write, kept := e.toFlush(all)
	if len(write) == 0 && e.unwritten == nil {
		return kept, nil
	}
	rs, err := st.UpdateBatch(e.ctx, append(e.creationBatch(), e.logEntries(write)...))
	if err != nil {
		return nil, err
	}
	if rs, err = e.checkCreated(rs); err != nil {
		return nil, err
	}
	return kept, e.checkFlushed(write, rs)
}

// toFlush splits the queued entries into those a flush writes and those it keeps queued.
func (e *Env) toFlush(all bool) (write, kept []unloggedEntry) {
	records := 0
	for _, u := range e.unlogged {
		if u.isRecord() {
			records++
		}
	}
	all = all || records >= maxQueuedRecords
	for _, u := range e.unlogged {
		if u.isRecord() && !all {
			kept = append(kept, u)
		} else {
			write = append(write, u)
		}
	}
	return write, kept
}

func (e *Env) logEntries(write []unloggedEntry) []store.BatchUpdate {
	ups := make([]store.BatchUpdate, len(write))
	for i, r := range write {
		ups[i] = e.logEntry(r)
	}
	return ups
}

// checkFlushed checks the results of writing entries write: an entry another execution logged
// first must hold the same value, or the executions diverged.
func (e *Env) checkFlushed(write []unloggedEntry, rs []store.UpdateResult) error {
	for i, r := range rs {
		if write[i].isRecord() {
			continue // the first record of a write stands: its outcome and version come from the DAAL
		}
		if logged, _ := r.Attrs[attrValue].([]byte); !r.Applied && !bytes.Equal(logged, write[i].value) {
			return fmt.Errorf("%w: step %d of instance %s", ErrDiverged, write[i].step, e.id)
		}
	}
	return nil
}

// carryingFlush returns st with the queued entries a flush writes (see toFlush), after the
// unwritten intent's creation if any, carried by the first update through it (a write's
// case-B attempt; a head's or successor's creation goes uncarried), in one batch with it;
// finish writes them if no update carried them, checks their results and returns what stays
// queued. With guarded, a carrying batch also guards the write (unfinishedGuard).
//
// Inside a store transaction everything commits together, so the entries need not be written
// before the write they precede, and a store that sends a batch's statements together
// (pgstore) spends no round trip of their own on them. With last, the caller makes no other
// store operation in the transaction once the carrying update applies, so the store may commit
// with it (store.FinalBatcher), entries or none.
//
// Outside one, on a store whose batches apply all or nothing (store.AtomicBatcher), the
// entries must be stored before the effect they precede, or with it: the carrying batch is all
// or nothing. If it is refused (the attempt's condition, or an entry's: another execution
// created the intent or logged the step), nothing changed, and the entries are written alone
// and checked before the attempt goes alone, exactly as a flush followed by the write: a check
// that fails (the intent created elsewhere, a diverged step) stops the write.
func (e *Env) carryingFlush(st *store.Table, all, last, guarded bool) (carrying *store.Table, finish func() (kept []unloggedEntry, err error)) {
	write, kept := e.toFlush(all)
	if len(write) == 0 && !last && e.unwritten == nil {
		return st, func() ([]unloggedEntry, error) { return kept, nil }
	}
	check := func(rs []store.UpdateResult) error {
		rs, err := e.checkCreated(rs)
		if err != nil {
			return err
		}
		return e.checkFlushed(write, rs)
	}
	c := &flushCarrier{Driver: st.Driver(), entries: append(e.creationBatch(), e.logEntries(write)...), last: last}
	if !e.rt.transactional() {
		c.checkAlone = check
	}
	if guarded {
		c.guard, c.guardRow = e.unfinishedGuard(), e.intentRow
	}
	return store.NewTable(c, st.Name()), func() ([]unloggedEntry, error) {
		if !c.carried && len(c.entries) > 0 {
			if _, err := c.carry(e.ctx, nil, false); err != nil {
				return nil, err
			}
		}
		e.guardApplied(c)
		return kept, check(c.results)
	}
}

// unfinishedGuard is the update that a batch carrying a write with the entries before it
// includes, so that it applies only to the instance still unfinished in this incarnation; nil
// when the batch creates the intent (a creation is its own such condition). A flush and the
// write it precedes in one request need it: the fence lets one request of a straggler through,
// and if its execution paused past the garbage collector's bound, the instance finished and its
// logs are gone, so the entries' conditions (absent rows) hold again and nothing else would stop
// the write. Step by step the write is a second request, which the fence stops.
func (e *Env) unfinishedGuard() *store.BatchUpdate {
	if e.unwritten != nil {
		return nil
	}
	return &store.BatchUpdate{Key: intentKey(e.id),
		Cond:   store.And(store.Equal(store.Attr(attrDone), false), store.Equal(store.Attr(attrStart), e.start)),
		Update: store.Update{store.SetAttr(store.Attr(attrStart), e.start)}}
}

// guardApplied keeps the intent row as c's guard left it, if it went, for the next update of
// the intent to presume.
func (e *Env) guardApplied(c *flushCarrier) {
	if c.guardResult != nil {
		e.intentRow = c.guardResult.Attrs
	}
}

// errFinishedElsewhere is a write's batch refused by its guard (unfinishedGuard): the instance
// finished, so this execution starts over as a replay, which answers with its result.
var errFinishedElsewhere = fmt.Errorf("%w: the instance finished before this execution's write", ErrDiverged)

// flushCarrier is a driver whose first update (or batch) goes in one batch with entries.
type flushCarrier struct {
	store.Driver
	entries []store.BatchUpdate
	last    bool                 // the carrying update, if it applies, is the transaction's last
	results []store.UpdateResult // the entries', once carried
	carried bool
	// checkAlone, if set, makes the carrying batch all or nothing (store.AtomicBatcher, outside
	// a store transaction): refused, the entries go alone and must pass checkAlone before the
	// update goes (carryingFlush).
	checkAlone func([]store.UpdateResult) error
	// guard, if set, goes in the carrying batch between the entries and the update, never
	// alone (unfinishedGuard); in a store transaction, refused, it fails the transaction.
	// guardRow is the intent row presumed (store.Presumer) for it, if known; guardResult is its
	// result once it applied.
	guard       *store.BatchUpdate
	guardRow    store.Attrs
	guardResult *store.UpdateResult
}

// withGuard returns the batch of the entries, the guard (if any, and if there are entries
// for it to guard) and ups, and the guard's index in it (-1 if none), presuming its row.
func (c *flushCarrier) withGuard(ups []store.BatchUpdate) ([]store.BatchUpdate, int) {
	batch := slices.Clip(c.entries)
	at := -1
	if c.guard != nil && len(c.entries) > 0 && len(ups) > 0 {
		if c.guardRow != nil {
			store.Presume(c.Driver, c.guard.Key, c.guardRow)
		}
		at, batch = len(batch), append(batch, *c.guard)
	}
	return append(batch, ups...), at
}

// uncarried is st without a flushCarrier: an update through it does not carry the entries (the
// creation of a DAAL's head or of a successor row, which the write itself follows).
func uncarried(st *store.Table) *store.Table {
	if c, ok := st.Driver().(*flushCarrier); ok {
		return store.NewTable(c.Driver, st.Name())
	}
	return st
}

// Presume forwards store.Presumer: it sends nothing, so it carries nothing.
func (c *flushCarrier) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(c.Driver, key, attrs)
}

func (c *flushCarrier) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, err := c.UpdateBatch(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

func (c *flushCarrier) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if c.carried {
		return store.UpdateBatch(ctx, c.Driver, ups)
	}
	return c.carry(ctx, ups, c.last)
}

// carry writes the entries in one batch with ups, committing the transaction with them if last
// and the store can.
func (c *flushCarrier) carry(ctx context.Context, ups []store.BatchUpdate, last bool) (rs []store.UpdateResult, err error) {
	batch, guard := c.withGuard(ups)
	if c.checkAlone != nil && len(ups) > 0 {
		rs, applied, err := c.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, batch)
		if err != nil {
			return nil, err
		}
		if applied {
			return c.carriedWith(rs, guard), nil
		}
		if c.results, err = store.UpdateBatch(ctx, c.Driver, c.entries); err != nil {
			return nil, err
		}
		c.carried = true
		if err := c.checkAlone(c.results); err != nil {
			return nil, err
		}
		return store.UpdateBatch(ctx, c.Driver, ups)
	}
	if fb, ok := c.Driver.(store.FinalBatcher); ok && last {
		rs, _, err = fb.UpdateBatchFinal(ctx, batch) // commits only if every update applied
	} else {
		rs, err = store.UpdateBatch(ctx, c.Driver, batch)
	}
	if err != nil {
		return nil, err
	}
	if guard >= 0 && !rs[guard].Applied {
		return nil, errFinishedElsewhere // rolls the store transaction back
	}
	return c.carriedWith(rs, guard), nil
}

// carriedWith records the results of a carrying batch whose guard (at index guard, -1 if none)
// applied, and returns those of the updates it carried the entries with.
func (c *flushCarrier) carriedWith(rs []store.UpdateResult, guard int) []store.UpdateResult {
	c.carried, c.results = true, rs[:len(c.entries)]
	if guard < 0 {
		return rs[len(c.entries):]
	}
	c.guardResult = &rs[guard]
	return rs[guard+1:]
}

// logEntry is the conditional creation of an entry's log row.
func (e *Env) logEntry(r unloggedEntry) store.BatchUpdate {
	if r.txRecord != nil {
		return store.BatchUpdate{Key: *r.txRecord, Cond: store.Always(), Update: store.Update{store.SetAttr(store.Attr(attrKind), "tx")}}
	}
	if c := r.call; c != nil {
		return store.BatchUpdate{Key: invokeLogKey(e.id, r.step), Cond: store.RowAbsent(), Update: invokeEntry(c.callee, c.calleeID, r.at)}
	}
	key, kind := readLogKey(e.id, r.step), "read"
	switch {
	case r.event != nil && r.event.write:
		key, kind = writeRecordKey(e.id, r.step), "write"
	case r.kind != "":
		kind = r.kind
	}
	upd := store.Update{store.SetAttr(store.Attr(attrKind), kind)}
	if r.value != nil {
		upd = append(upd, store.SetAttr(store.Attr(attrValue), r.value))
	}
	if r.at != 0 {
		upd = append(upd, store.SetAttr(store.Attr(attrAt), r.at))
	}
	if ev := r.event; ev != nil {
		upd = append(upd, store.SetAttr(store.Attr(attrItemTable), ev.table), store.SetAttr(store.Attr(attrItemKey), ev.key),
			store.SetAttr(store.Attr(attrAt), ev.at))
		if ev.version >= 0 {
			upd = append(upd, store.SetAttr(store.Attr(attrItemVersion), ev.version))
		}
		if ev.shadow {
			upd = append(upd, store.SetAttr(store.Attr(attrShadow), true))
		}
		if ev.write {
			upd = append(upd, store.SetAttr(store.Attr(attrApplied), ev.applied), store.SetAttr(store.Attr(attrDigest), ev.digest))
			if ev.value != nil {
				upd = append(upd, store.SetAttr(store.Attr(attrWritten), ev.value))
			}
		}
	}
	return store.BatchUpdate{Key: key, Cond: store.RowAbsent(), Update: upd}
}

// numbered is w numbering the item's version, as a write with a provenance record does (not a
// transaction's shadow, whose numbers the commit's write gives).
func (w daalWrite) numbered() daalWrite {
	w.versioned = w.record != nil && !w.record.shadow
	return w
}

// deferredWrite is a logged write held back to the done mark (Env.deferring).
type deferredWrite struct {
	part string
	step int
	w    daalWrite
	out  daalOutcome // once written
}

// writeDeferred performs the deferred writes in st, the done mark's store transaction, and
// queues their provenance records for that transaction's flush. Every execution of the instance
// defers the same steps, and a step another execution committed is found logged (case A), so
// a retried or duplicated transaction writes each at most once.
func (e *Env) writeDeferred(st *store.Table) error {
	for i := range e.deferred {
		d := &e.deferred[i]
		out, err := e.rt.writeDAAL(e.ctx, st, d.part, logKey(e.id, e.incarnation, d.step), d.w)
		if err != nil {
			return err
		}
		d.out = out
		e.queueRecord(d.step, d.w, out)
	}
	return nil
}

// writeDeferredEach performs the deferred writes one logged write at a time, as an end that
// does not defer them would have.
func (e *Env) writeDeferredEach() error {
	for _, d := range e.deferred {
		if _, err := e.logAndWrite(d.part, d.step, d.w); err != nil {
			return err
		}
	}
	e.deferred = nil
	return nil
}

// rememberTails remembers, once the done mark's transaction committed, the rows the deferred
// writes left, as logAndWrite does after its own commit.
func (e *Env) rememberTails() {
	for _, d := range e.deferred {
		if d.out.row != nil {
			e.rt.tails.put(e.rt.st.Name(), d.part, chainRow{id: d.out.rowID, attrs: d.out.row})
		}
	}
	e.deferred = nil
}

// logAndWrite flushes the queued read-log entries, then performs step's logged write on the
// linked DAAL in partition part. On a store with transactions (store.Transactor) both go in one
// transaction with one commit: with an ACID store, the log writes share the data write's
// transaction (Beldi §8, Apiary). Elsewhere they are separate requests, which the protocol
// tolerates: an entry logged without the write that followed is replayed.
//
// A write with a provenance record numbers the item's version (not a transaction's shadow,
// whose numbers the commit's write gives) and queues the record, which is written with the next
// batch of log entries: at the latest with the done mark, so a finished instance has them all.
func (e *Env) logAndWrite(part string, step int, w daalWrite) (out daalOutcome, err error) {
	w = w.numbered()
	var kept []unloggedEntry
	err = e.rt.atomically(e.ctx, store.Key{Partition: part}, func(st *store.Table) (err error) {
		transactional := e.rt.transactional()
		if !transactional && !e.rt.atomicBatches() {
			if kept, err = e.flushTo(st, false); err != nil {
				return err
			}
			out, err = e.rt.writeDAAL(e.ctx, st, part, logKey(e.id, e.incarnation, step), w)
			return err
		}
		// The entries ride with a case-B attempt, which ends the write when it applies (in the
		// store transaction, or in one all-or-nothing batch): the creation of a missing head
		// and of a successor do not carry them (uncarried).
		carrying, finish := e.carryingFlush(st, false, transactional, true)
		if out, err = e.rt.writeDAAL(e.ctx, carrying, part, logKey(e.id, e.incarnation, step), w); err != nil {
			return err
		}
		kept, err = finish()
		return err
	})
	if err != nil {
		return daalOutcome{}, e.fail(err)
	}
	if out.row != nil { // committed now: the row the next write of the item may try first
		e.rt.tails.put(e.rt.st.Name(), part, chainRow{id: out.rowID, attrs: out.row})
	}
	e.flushed(kept)
	e.queueRecord(step, w, out)
	return out, nil
}

// queueRecord queues the provenance record of write step w, which had outcome out, if it has
// one: it is written with the next batch of log entries.
func (e *Env) queueRecord(step int, w daalWrite, out daalOutcome) {
	rec := w.record
	if rec == nil || (!out.applied && w.txValue) { // a transaction's write records what it keeps
		return
	}
	if w.commitTxValue && !e.committedValue(rec, out) {
		return // the commit wrote no value: a release, not a write
	}
	rec.applied, rec.version, rec.at = out.applied, out.version, e.rt.now()
	e.unlogged = append(e.unlogged, unloggedEntry{step: step, event: rec})
}

// committedValue completes the provenance record of a transaction's commit of an item with the
// value the commit made the item's, and reports whether it made one. A commit that applied
// here knows it; a replayed one finds it in the item's last row if no write has come since
// (its record then stands unless the execution that applied it died before writing it).
func (e *Env) committedValue(rec *dataEvent, out daalOutcome) bool {
	v := out.committed
	if out.replayed && out.applied && out.version > 0 {
		if cur, version, err := e.rt.readValue(e.ctx, rec.table, rec.key); err == nil && version == out.version {
			if v = cur; v == nil {
				v = []byte("null")
			}
		}
	}
	if v == nil {
		return false
	}
	*rec = *e.writeEvent(rec.table, rec.key, v, false)
	return true
}

// writeEvent is the provenance record of a write of value to an item, nil when the SSF does not
// capture provenance.
func (e *Env) writeEvent(table, key string, value []byte, shadow bool) *dataEvent {
	if !e.rt.capturing() {
		return nil
	}
	ev := &dataEvent{write: true, table: table, key: key, shadow: shadow, version: -1, digest: digest(value)}
	if e.rt.cfg.Provenance == provenance.CaptureFull {
		ev.value = value
	}
	return ev
}

func (rt *Runtime) readLog(ctx context.Context, id string, step int) ([]byte, bool, error) {
	a, found, err := rt.st.Get(ctx, readLogKey(id, step))
	if err != nil || !found {
		return nil, false, err
	}
	v, _ := a[attrValue].([]byte)
	return v, true, nil
}

func validItem(table, key string) error {
	if !store.ValidIdentifier(table) {
		return fmt.Errorf("%w: table name %q must be letters, digits or underscores", ErrBadInput, table)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key in table %s", ErrBadInput, table)
	}
	if len(table)+len(key) > MaxItemKeyBytes {
		return fmt.Errorf("%w: table %s, key of %d bytes: a table name and key take at most %d bytes together on every store", ErrBadInput, table, len(key), MaxItemKeyBytes)
	}
	return nil
}

// encodeValue JSON-encodes a value and checks that it fits in one DAAL row alongside a full
// write log, so an oversized value is refused before anything is written.
func (e *Env) encodeValue(table, key string, value any) ([]byte, error) {
	if err := validItem(table, key); err != nil {
		return nil, err
	}
	var val []byte
	if raw, ok := value.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%w: value for %s/%s is not valid JSON", ErrBadInput, table, key)
		}
		val = bytes.Clone(raw)
	} else {
		b, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("%w: value for %s/%s is not JSON-encodable: %v", ErrBadInput, table, key, err)
		}
		val = b
	}
	if max := e.rt.maxValueBytes(table, key); len(val) > max {
		return nil, fmt.Errorf("%w: %s/%s: %d bytes, but a row of %s holds at most %d bytes of value next to %d write-log entries (lower RowCapacity or store large blobs elsewhere)",
			ErrValueTooLarge, table, key, len(val), e.rt.st.Name(), max, e.rt.cfg.RowCapacity)
	}
	return val, nil
}
