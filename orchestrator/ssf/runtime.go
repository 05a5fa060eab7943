// Package ssf is ssfkit's exactly-once runtime for stateful serverless functions: Beldi's
// protocol (OSDI '20, §3-5) over any store driver.
//
// Every SSF instance has an id that is stable across re-execution and an intent row recording
// its arguments and completion. Each external operation (Env.Read, Write, CondWrite, SyncInvoke,
// AsyncInvoke, and the deterministic helpers) is a numbered step whose outcome is logged: writes
// in the item's linked DAAL, atomically with the value; reads and invocations in per-instance
// logs. A re-executed instance replays logged steps instead of repeating them, and the intent
// collector re-executes every instance that has not finished, so each step takes effect exactly
// once. The garbage collector prunes logs and DAAL rows once no execution can still need them.
//
// Imports (docs/architecture.md): the portable store and queue APIs; never a host, a command or
// the test kit.
package ssf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// Config configures one SSF's runtime.
type Config struct {
	// Name identifies the SSF to other SSFs (letters, digits, underscore).
	Name string
	// Store is the SSF's own table; no other SSF should write it.
	Store *store.Table
	// Handler is the SSF's code.
	Handler Handler
	// Transport reaches other SSFs (and this one, for asynchronous starts).
	Transport Transport
	// RowCapacity is N, the number of write-log entries one DAAL row holds (default 32). Small
	// values make multi-row DAALs, which tests use to exercise appends.
	RowCapacity int
	// Lifetime bounds one execution: after it, the execution's operations fail and the intent
	// collector re-runs the instance. It must be at most the host's function timeout.
	Lifetime time.Duration
	// GCBound is Beldi's T: logs of an instance are removed GCBound after it finished, and
	// disconnected DAAL rows GCBound after they were found unreachable. It must exceed Lifetime
	// by the longest a store call can take, so no execution can still use what is removed.
	GCBound time.Duration
	// RelaunchDelay is how long after an instance's last launch the intent collector may launch
	// it again. Re-running a live instance is safe; the delay avoids needless duplicates.
	RelaunchDelay time.Duration
	// MaxAttempts bounds the intent collector's launches of an instance that never finishes
	// (a failure that repeats deterministically: a missing SSF, a store limit, a bug that
	// crashes the host): after that many, once no execution can still be running, the instance
	// is given up, with a failed result that says why (ErrGaveUp's message) and is answered to
	// its caller. The delay between launches doubles from RelaunchDelay up to 32 times it.
	// Default 10; negative: never give up.
	MaxAttempts int
	// OnFailure, if set, is told of every instance a collector recorded as failed (given up
	// after MaxAttempts launches, or abandoned by its holder), after the record: the hosts
	// send it to the SSF's dead-letter queue. Best effort: the instance's result is the
	// durable record, and an error is only logged.
	OnFailure func(ctx context.Context, f Failure) error
	// Hold reports whether an instance's holder (Request.Holder) may still send its request
	// again; the garbage collector keeps finished instances whose holder may, and asks again on
	// its next pass. An error counts as "may". Nil: holders are ignored.
	Hold func(ctx context.Context, holder string) (bool, error)
	// KeyRetention is how long the answer of a collected instance is kept after collection (a
	// tombstone in place of its intent, with its result): a request for its id (idempotency
	// key) within that time gets that result instead of running the instance again. Default
	// 24 hours (as Stripe keeps idempotency keys); it must exceed GCBound.
	KeyRetention time.Duration
	// ExpiredKeyRetention is how long, after KeyRetention, the id is still recognised without
	// its result (a compact record: the id, the input digest and the times): a request for it
	// gets ErrKeyExpired, never a new run. After it the id is forgotten, and a request with it
	// starts a new instance. Default 30 days.
	ExpiredKeyRetention time.Duration
	// Provenance is what the SSF records of its instances for provenance (Apiary): off (the
	// default), metadata (every invocation and data access, with digests of values) or full
	// (the values too). ProvenanceSink keeps the records: the garbage collector exports each
	// finished instance's record there before it collects the instance, and keeps the
	// instance while the sink refuses (docs/provenance.md).
	Provenance     provenance.Capture
	ProvenanceSink provenance.Sink
	// IndexShards spreads the intent and key indexes over this many partitions (default 4).
	IndexShards int
	// Clock defaults to the system clock.
	Clock Clock
	// Faults, if set, injects crashes (tests only).
	Faults FaultInjector
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Default configuration values.
const (
	DefaultRowCapacity   = 32
	DefaultLifetime      = 5 * time.Minute
	DefaultRelaunchDelay = 30 * time.Second
	DefaultIndexShards   = 4
	DefaultMaxAttempts   = 10
	DefaultKeyRetention  = 24 * time.Hour
	// DefaultExpiredKeyRetention: an expired key costs one small row for this long.
	DefaultExpiredKeyRetention = 30 * 24 * time.Hour
)

// Runtime runs one SSF's instances and collectors.
type Runtime struct {
	cfg              Config
	st               *store.Table
	clock            Clock
	log              *slog.Logger
	stats            counters
	collectorMetrics collectorMetrics
	tails            tailCache
}

type counters struct {
	executions, reexecutions, abandoned, callbacks, spuriousCallbacks, relaunched, gaveUp, lateStarts, corruptions, steps, writeScans, cachedWrites stat
}

// Stats are cumulative counters of a runtime's activity.
type Stats struct {
	// Executions started (first runs and re-runs).
	Executions int64
	// Reexecutions: executions of an instance whose intent already existed.
	Reexecutions int64
	// Abandoned executions: crashed or failed before marking their intent done.
	Abandoned int64
	// Callbacks received, and how many of them were spurious (for an unknown invoke).
	Callbacks, SpuriousCallbacks int64
	// Relaunched: instances the intent collector launched again.
	Relaunched int64
	// GaveUp: instances given up after Config.MaxAttempts launches, with a failed result.
	GaveUp int64
	// LateStarts: starts refused because they were delivered more than T after they were sent.
	LateStarts int64
	// Corruptions: invariant violations detected in stored state (must stay zero).
	Corruptions int64
	// Steps taken by executions (a re-execution's replayed steps too).
	Steps int64
	// WriteScans: item writes that scanned the item's whole list, because the last row's
	// PriorWrites summary could not rule out that an earlier row logs the step (a replayed
	// step, a false positive, or rows written without a summary). Every other write reads
	// only the last row, or none (CachedWrites).
	WriteScans int64
	// CachedWrites: item writes that applied to the row this runtime's last write of the item
	// left, without reading the item first (it was still the tail).
	CachedWrites int64
}

// New validates cfg and returns a runtime.
func New(cfg Config) (*Runtime, error) {
	if !store.ValidIdentifier(cfg.Name) {
		return nil, fmt.Errorf("%w: SSF name %q must be letters, digits or underscores", ErrBadInput, cfg.Name)
	}
	if cfg.Store == nil || cfg.Handler == nil || cfg.Transport == nil {
		return nil, fmt.Errorf("%w: SSF %s: Store, Handler and Transport are required", ErrBadInput, cfg.Name)
	}
	if cfg.RowCapacity == 0 {
		cfg.RowCapacity = DefaultRowCapacity
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.GCBound == 0 {
		cfg.GCBound = 2 * cfg.Lifetime
	}
	if cfg.RelaunchDelay == 0 {
		cfg.RelaunchDelay = DefaultRelaunchDelay
	}
	if cfg.IndexShards == 0 {
		cfg.IndexShards = DefaultIndexShards
	}
	if cfg.KeyRetention == 0 {
		cfg.KeyRetention = max(DefaultKeyRetention, 2*cfg.GCBound)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.ExpiredKeyRetention == 0 {
		cfg.ExpiredKeyRetention = DefaultExpiredKeyRetention
	}
	if cfg.RowCapacity < 1 || cfg.IndexShards < 1 || cfg.Lifetime < 0 || cfg.RelaunchDelay < 0 || cfg.ExpiredKeyRetention < 0 {
		return nil, fmt.Errorf("%w: SSF %s: RowCapacity and IndexShards must be positive, durations not negative", ErrBadInput, cfg.Name)
	}
	if cfg.GCBound <= cfg.Lifetime {
		return nil, fmt.Errorf("%w: SSF %s: GCBound (T=%v) must exceed Lifetime (%v): the garbage collector may only remove what no live execution can reach", ErrBadInput, cfg.Name, cfg.GCBound, cfg.Lifetime)
	}
	if cfg.KeyRetention <= cfg.GCBound {
		return nil, fmt.Errorf("%w: SSF %s: KeyRetention (%v) must exceed GCBound (T=%v): a collected instance's id must be remembered longer than any execution of it can run", ErrBadInput, cfg.Name, cfg.KeyRetention, cfg.GCBound)
	}
	capture, err := provenance.ParseCapture(string(cfg.Provenance))
	if err != nil {
		return nil, fmt.Errorf("%w: SSF %s: %v", ErrBadInput, cfg.Name, err)
	}
	if cfg.Provenance = capture; capture != provenance.CaptureOff && cfg.ProvenanceSink == nil {
		return nil, fmt.Errorf("%w: SSF %s: provenance capture %q needs a ProvenanceSink to export to", ErrBadInput, cfg.Name, capture)
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	rt := &Runtime{cfg: cfg, clock: cfg.Clock, log: cfg.Logger.With("ssf", cfg.Name)}
	rt.st = store.NewTable(rt.wrapDriver(cfg.Store.Driver()), cfg.Store.Name())
	rt.stats.meter(cfg.Name)
	rt.collectorMetrics = newCollectorMetrics(cfg.Name)
	return rt, nil
}

// ClaimTable records this SSF as its table's owner, or fails (ErrTableOwned) if another SSF
// owns it: two SSFs on one table would take each other's instances (one SSF's key answering
// another's request) and items. Hosts call it when they open an SSF.
func (rt *Runtime) ClaimTable(ctx context.Context) error {
	r, err := rt.st.Update(ctx, ownerKey, store.Or(store.RowAbsent(), store.Equal(store.Attr(attrOwner), rt.cfg.Name)),
		store.Update{store.SetAttr(store.Attr(attrOwner), rt.cfg.Name)})
	if err != nil {
		return fmt.Errorf("SSF %s: claiming table %s: %w", rt.cfg.Name, rt.st.Name(), err)
	}
	if !r.Applied {
		return fmt.Errorf("%w: %w: SSF %s cannot use table %s: it belongs to SSF %v; every SSF needs a table of its own",
			ErrBadInput, ErrTableOwned, rt.cfg.Name, rt.st.Name(), r.Attrs[attrOwner])
	}
	return nil
}

// wrapDriver puts the lifetime fence (outermost) and the fault points around a driver.
func (rt *Runtime) wrapDriver(raw store.Driver) store.Driver {
	d := raw
	if rt.cfg.Faults != nil {
		d = faultyDriver{Driver: raw, rt: rt}
	}
	return newFencedDriver(d, raw)
}

// atomically runs fn against the SSF's table in one store transaction when the store has them
// (store.Transactor), and directly otherwise. Under fault injection the transaction has its own
// points: before the commit (a crash there rolls everything back) and after it (the commit
// happened, the reply is lost), at key.
func (rt *Runtime) atomically(ctx context.Context, key store.Key, fn func(st *store.Table) error) error {
	tr, ok := rt.cfg.Store.Driver().(store.Transactor)
	if !ok {
		return fn(rt.st)
	}
	return rt.committing(ctx, key, func(beforeCommit func() error) error {
		return tr.Transact(ctx, func(tx store.Driver) error {
			if err := fn(store.NewTable(rt.wrapDriver(tx), rt.st.Name())); err != nil {
				return err
			}
			return beforeCommit()
		})
	})
}

// transactional reports whether the SSF's store runs its writes as store transactions.
func (rt *Runtime) transactional() bool {
	_, ok := rt.cfg.Store.Driver().(store.Transactor)
	return ok
}

// atomicBatches reports whether the SSF's store applies a batch all or nothing
// (store.AtomicBatcher).
func (rt *Runtime) atomicBatches() bool {
	_, ok := rt.cfg.Store.Driver().(store.AtomicBatcher)
	return ok
}

// committing runs a store transaction, whose body calls beforeCommit last: the commit is a
// request of its own, checked against the execution's fence, with its fault points at key
// (before: a crash rolls everything back; after: it committed, the reply is lost). Where the
// store committed with the transaction's last batch (store.FinalBatcher, a request the fence
// checked), a crash at either point is one after the commit.
func (rt *Runtime) committing(ctx context.Context, key store.Key, transact func(beforeCommit func() error) error) error {
	err := transact(func() error {
		if err := checkFence(ctx); err != nil {
			return err
		}
		return rt.inject(ctx, "commit", key, false)
	})
	if err != nil {
		return err
	}
	return rt.inject(ctx, "commit", key, true)
}

// capturing reports whether the SSF records provenance.
func (rt *Runtime) capturing() bool { return rt.cfg.Provenance != provenance.CaptureOff }

// Name returns the SSF's name.
func (rt *Runtime) Name() string { return rt.cfg.Name }

// Config returns the effective configuration (defaults filled in).
func (rt *Runtime) Config() Config { return rt.cfg }

// Stats returns cumulative counters.
func (rt *Runtime) Stats() Stats {
	return Stats{
		Executions: rt.stats.executions.Load(), Reexecutions: rt.stats.reexecutions.Load(),
		Abandoned: rt.stats.abandoned.Load(), Callbacks: rt.stats.callbacks.Load(),
		SpuriousCallbacks: rt.stats.spuriousCallbacks.Load(), Relaunched: rt.stats.relaunched.Load(), GaveUp: rt.stats.gaveUp.Load(), LateStarts: rt.stats.lateStarts.Load(),
		Corruptions: rt.stats.corruptions.Load(), Steps: rt.stats.steps.Load(), WriteScans: rt.stats.writeScans.Load(), CachedWrites: rt.stats.cachedWrites.Load(),
	}
}

func (rt *Runtime) now() int64 { return rt.clock.Now().UnixNano() }

// Handle serves one request; every host (in-process, Lambda, HTTP) calls it. An error means the
// request was not completed (the execution was abandoned, or the request was malformed); a
// Result with Error set is a completed instance that failed in application code.
func (rt *Runtime) Handle(ctx context.Context, req Request) (Result, error) {
	if req.InstanceID == "" {
		return Result{}, fmt.Errorf("%w: SSF %s: request without an instance id", ErrBadInput, rt.cfg.Name)
	}
	if len(req.InstanceID) > MaxInstanceIDLen {
		return Result{}, fmt.Errorf("%w: SSF %s: instance id of %d bytes (at most %d)", ErrBadInput, rt.cfg.Name, len(req.InstanceID), MaxInstanceIDLen)
	}
	switch req.Kind {
	case KindCallback:
		return Result{}, rt.handleCallback(withExec(ctx, rt.cfg.Name, "callback:"+req.InstanceID), req)
	case KindInvoke, "":
		return rt.handleInvoke(withExec(ctx, rt.cfg.Name, req.InstanceID), req)
	}
	return Result{}, fmt.Errorf("%w: SSF %s: unknown request kind %q", ErrBadInput, rt.cfg.Name, req.Kind)
}

// intent is the decoded intent row.
type intent struct {
	id      string
	args    json.RawMessage
	async   bool
	done    bool
	result  Result
	caller  *CallerRef
	start   int64
	tx      *TxContext // the transaction inherited from the caller
	builtin string     // the runtime handler to run instead of the SSF's
	// heldIndex: the finished-index entry was written at creation (holderRetries)
	heldIndex bool
	collected int64     // when the GC collected the instance; the intent is a tombstone since
	expired   int64     // when the tombstone's result was dropped (KeyRetention); 0: kept
	hasResult bool      // the result is recorded (a tombstone keeps it)
	inputHash string    // digest of the input the instance was created with ("" before digests were kept)
	trace     string    // W3C traceparent of the step that invoked the instance (Request.Trace)
	unwritten *creation // the intent's creation, while only this execution has it (deferredIntent)
	// row is the intent's row as an update this execution made left it (its creation, its
	// claim), nil when unknown: the done mark presumes it instead of reading the row.
	row store.Attrs
}

// inputDigest names an input by its content: JSON equal up to whitespace and key order gives
// the same digest, and no input is null.
func inputDigest(input json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(orNull(input)))
	dec.UseNumber()
	var v any
	canonical := []byte(orNull(input))
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canonical = b
		}
	}
	return digest(canonical)
}

// digest is the SHA-256 of b, base64url: how inputs, written values and SQL steps' results are
// named in intents and provenance.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// checkInputSize refuses an input that cannot fit in an intent row on every store.
func checkInputSize(ssfName string, input []byte) error {
	if len(input) > MaxInputBytes {
		return fmt.Errorf("%w: %w: input of %d bytes for SSF %s; at most %d bytes (store large data in an item and pass its key)",
			ErrBadInput, ErrInputTooLarge, len(input), ssfName, MaxInputBytes)
	}
	return nil
}

// sameInput refuses a request that carries an input other than the one the instance was
// created with. Requests without input (an asynchronous start, a relaunch) run the stored one.
func (rt *Runtime) sameInput(req Request, in *intent) error {
	if len(req.Input) == 0 || in.inputHash == "" || inputDigest(req.Input) == in.inputHash {
		return nil
	}
	return fmt.Errorf("%w: %w: SSF %s: instance %s was created with another input; a new request needs a new instance id (idempotency key)",
		ErrBadInput, ErrInputMismatch, rt.cfg.Name, in.id)
}

// incarnation tells this instance from an earlier one with the same id (see logKey).
func (in *intent) incarnation() string { return incarnationOf(in.start) }

// incarnationOf is the incarnation of the intent created at start.
func incarnationOf(start int64) string { return strconv.FormatInt(start, 36) }

// collectedOutcome is the answer to a request for a collected instance: the result its
// tombstone kept; ErrKeyExpired once the result was dropped; ErrInstanceCollected for an
// instance that never ran (its holder closed before its intent was created). Never a new run.
func collectedOutcome(ssfName string, in *intent) (Result, error) {
	if in.expired != 0 {
		return Result{}, fmt.Errorf("%w (%w): SSF %s: the answer to instance %s was kept until %s and is gone; its id cannot run again (use a new idempotency key for a new request)",
			ErrKeyExpired, ErrInstanceCollected, ssfName, in.id, time.Unix(0, in.expired).UTC().Format(time.RFC3339))
	}
	if in.hasResult {
		in.result.Replayed = true
		return in.result, nil
	}
	return Result{}, fmt.Errorf("%w: SSF %s: instance %s was collected at %s without a result; its id cannot run again (use a new instance id for a new request)",
		ErrInstanceCollected, ssfName, in.id, time.Unix(0, in.collected).UTC().Format(time.RFC3339))
}

func decodeIntent(id string, a store.Attrs) (*intent, error) {
	in := &intent{id: id}
	in.args, _ = a[attrArgs].([]byte)
	in.async, _ = a[attrAsync].(bool)
	in.done, _ = a[attrDone].(bool)
	in.start, _ = a[attrStart].(int64)
	if c, ok := a[attrCaller].(string); ok {
		cid, _ := a[attrCallerID].(string)
		step, _ := a[attrCallerStep].(int64)
		in.caller = &CallerRef{SSF: c, InstanceID: cid, Step: int(step)}
	}
	if id, ok := a[attrTxID].(string); ok {
		start, _ := a[attrTxStart].(int64)
		in.tx = &TxContext{ID: id, Start: start, Mode: TxExecute}
	}
	in.builtin, _ = a[attrBuiltin].(string)
	in.heldIndex, _ = a[attrHeldIndex].(bool)
	in.collected, _ = a[attrCollected].(int64)
	in.expired, _ = a[attrExpired].(int64)
	in.inputHash, _ = a[attrInputHash].(string)
	in.trace, _ = a[attrTrace].(string)
	if r, ok := a[attrResult].([]byte); ok {
		in.hasResult = true
		if err := json.Unmarshal(r, &in.result); err != nil {
			return nil, fmt.Errorf("%w: intent %s: result: %v", ErrCorrupt, id, err)
		}
	}
	return in, nil
}

// errVoided: the intent this execution was creating was voided by the intent collector (the
// creation was in flight for longer than T); the request starts over.
var errVoided = errors.New("ssf: intent creation voided by the intent collector")

// ensureIntent returns the instance's intent, creating it with its index entry for a new
// instance. created reports whether this call created it. f is the execution's fence: a
// creation may replace a void only if the execution started after the void was written.
func (rt *Runtime) ensureIntent(ctx context.Context, f *fence, req Request) (in *intent, created bool, err error) {
	key := intentKey(req.InstanceID)
	heldIndex := rt.holderRetries(req)
	if !heldIndex && (!req.Fresh || req.Sent != 0) {
		// Most requests for an existing instance are re-executions and callbacks' re-sends: one
		// read, and no index write, serves them. On the held path the creation is attempted
		// first: a retried activity finds its intent in the failed condition's answer.
		a, found, err := rt.st.Get(ctx, key)
		if err != nil {
			return nil, false, err
		}
		if found && a[attrVoid] == nil {
			in, err := decodeIntent(req.InstanceID, a)
			return in, false, err
		}
	}
	if req.Sent != 0 {
		return nil, false, fmt.Errorf("%w: SSF %s: a start of instance %s, which has no intent (never created, or forgotten after its key retention): nothing to run",
			ErrBadInput, rt.cfg.Name, req.InstanceID)
	}
	creation, err := rt.intentCreation(ctx, f, req)
	if err != nil {
		return nil, false, err
	}
	rs, err := rt.st.UpdateBatch(ctx, creation.batch(false))
	if err != nil {
		return nil, false, err
	}
	if !rs[1].Applied && rs[1].Attrs[attrVoid] != nil {
		return nil, false, errVoided
	}
	if in, err = decodeIntent(req.InstanceID, rs[1].Attrs); err == nil && rs[1].Applied {
		in.row = rs[1].Attrs
	}
	return in, rs[1].Applied, err
}

// deferredIntent is the intent of a new instance that a synchronous call just named
// (Request.Fresh): this execution runs it without writing the intent first, and writes the
// creation with its first write, in the same store transaction where the store has them (one
// commit less per call). Until then nothing of the instance is durable, and nothing needs to
// be: its caller re-sends the call until it is answered. Its creation may find the intent
// written by another execution (a re-sent call, which reads first and creates it at once):
// then this one lost, and starts over replaying (errCreatedElsewhere). The execution started
// before any other that might create the intent finished, so the fence keeps its creation
// from landing after the instance was collected.
func (rt *Runtime) deferredIntent(ctx context.Context, f *fence, req Request) (*intent, error) {
	c, err := rt.intentCreation(ctx, f, req)
	if err != nil {
		return nil, err
	}
	attrs, err := c.batch(false)[1].Update.Apply(nil)
	if err != nil {
		return nil, err
	}
	in, err := decodeIntent(req.InstanceID, attrs)
	if err != nil {
		return nil, err
	}
	in.unwritten = c
	return in, nil
}

// defersIntent reports whether a request's instance may run before its intent is written
// (deferredIntent): a synchronous call's fresh instance not on the held path. One that takes
// locks writes its intent with its first lock (a transaction's participant: its lock step's
// flush carries the creation) or before it (Env.Lock, BeginTx: markLocks, begin).
func (rt *Runtime) defersIntent(req Request) bool {
	return req.Fresh && req.Sent == 0 && req.Caller != nil && !req.Async && !rt.holderRetries(req)
}

// creation is a new instance's intent and index entry, not yet written.
type creation struct {
	index  store.BatchUpdate
	intent store.BatchUpdate // without the done flag
}

// batch is the creation as a batch: the index entry first (batches apply in order where they
// are not atomic: an intent that exists is always findable by the collectors), then the intent,
// with the done flag.
func (c *creation) batch(done bool) []store.BatchUpdate {
	in := c.intent
	in.Update = append(slices.Clip(in.Update), store.SetAttr(store.Attr(attrDone), done))
	return []store.BatchUpdate{c.index, in}
}

// intentCreation validates a new instance's request and builds its creation.
func (rt *Runtime) intentCreation(ctx context.Context, f *fence, req Request) (*creation, error) {
	if len(req.Input) > 0 && !json.Valid(req.Input) {
		return nil, fmt.Errorf("%w: SSF %s: input of instance %s is not valid JSON", ErrBadInput, rt.cfg.Name, req.InstanceID)
	}
	if err := checkInputSize(rt.cfg.Name, req.Input); err != nil {
		return nil, err
	}
	heldIndex := rt.holderRetries(req)
	now := rt.now()
	upd := store.Update{
		store.SetAttr(store.Attr(attrArgs), []byte(orNull(req.Input))),
		store.SetAttr(store.Attr(attrInputHash), inputDigest(req.Input)),
		store.SetAttr(store.Attr(attrAsync), req.Async),
		store.SetAttr(store.Attr(attrStart), now),
	}
	if req.Holder != "" {
		upd = append(upd, store.SetAttr(store.Attr(attrHolder), req.Holder))
	}
	if tp := validTraceparent(req.Trace); tp != "" {
		upd = append(upd, store.SetAttr(store.Attr(attrTrace), tp))
	} else if id := traceID(ctx); id != "" && rt.capturing() {
		// A request from outside ssfkit (a host's, an activity's): provenance names the trace
		// it arrived in, so a record leads to the spans.
		upd = append(upd, store.SetAttr(store.Attr(attrTraceID), id))
	}
	if heldIndex {
		upd = append(upd, store.SetAttr(store.Attr(attrHeldIndex), true))
	}
	if req.Tx != nil && req.Tx.Mode == TxExecute {
		upd = append(upd, store.SetAttr(store.Attr(attrTxID), req.Tx.ID), store.SetAttr(store.Attr(attrTxStart), req.Tx.Start))
	}
	if req.Builtin != "" {
		if req.Builtin != builtinTxEnd {
			return nil, fmt.Errorf("%w: SSF %s: unknown built-in handler %q", ErrBadInput, rt.cfg.Name, req.Builtin)
		}
		upd = append(upd, store.SetAttr(store.Attr(attrBuiltin), req.Builtin))
	}
	if req.Caller != nil && !req.Async {
		upd = append(upd,
			store.SetAttr(store.Attr(attrCaller), req.Caller.SSF),
			store.SetAttr(store.Attr(attrCallerID), req.Caller.InstanceID),
			store.SetAttr(store.Attr(attrCallerStep), int64(req.Caller.Step)))
	}
	index := store.BatchUpdate{Key: pendingKey(rt.cfg.IndexShards, req.InstanceID), Cond: store.Always(),
		Update: store.Update{store.SetAttr(store.Attr(attrLaunched), now)}}
	if heldIndex {
		// The entry names the holder, so the garbage collector can ask it even about an entry
		// whose intent was never created; a fresh launch clears the finish stamp, restarting
		// the GC's count.
		index = store.BatchUpdate{Key: finishedKey(rt.cfg.IndexShards, req.InstanceID), Cond: store.Always(),
			Update: store.Update{store.SetAttr(store.Attr(attrHolder), req.Holder), store.RemoveAttr(store.Attr(attrFinishTime))}}
	}
	// A void the intent collector left is replaced only by an execution that started after it.
	upd = append(upd, store.RemoveAttr(store.Attr(attrVoid)))
	create := store.Or(store.RowAbsent(), store.Compare(store.Attr(attrVoid), store.Lt, f.started.UnixNano()))
	return &creation{index: index, intent: store.BatchUpdate{Key: intentKey(req.InstanceID), Cond: create, Update: upd}}, nil
}

// holderRetries reports whether a new instance's holder retries it until it finishes (a
// Temporal activity: the workflow history records it, and the server retries it), which makes
// the pending index and the intent collector's relaunches redundant. Such an intent goes
// straight into the finished index, naming its holder; the garbage collector asks the holder
// before collecting it, and hands an instance whose holder closed unfinished to the intent
// collector. Transaction participants and built-ins keep the pending index: they hold locks,
// which the intent collector must be able to release without asking anyone.
func (rt *Runtime) holderRetries(req Request) bool {
	return req.Holder != "" && rt.cfg.Hold != nil && req.Tx == nil && req.Builtin == ""
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func (rt *Runtime) abandon(in string, err error) error {
	rt.stats.abandoned.inc()
	if errors.Is(err, ErrCorrupt) {
		rt.stats.corruptions.inc()
		rt.log.Error("corrupt state detected", "instance", in, "err", err)
	}
	var ee *ExecutionError
	if errors.As(err, &ee) {
		return err
	}
	return &ExecutionError{SSF: rt.cfg.Name, InstanceID: in, Err: err}
}

func (rt *Runtime) handleInvoke(ctx context.Context, req Request) (Result, error) {
	if late := time.Duration(rt.now() - req.Sent); req.Sent != 0 && late > rt.cfg.GCBound {
		rt.stats.lateStarts.inc()
		rt.log.Warn("refusing a start delivered later than T after it was sent; the intent collector runs the instance if it is unfinished", "instance", req.InstanceID, "late", late)
		return Result{}, fmt.Errorf("%w: %w: SSF %s: the start of instance %s was sent %v ago, more than T (%v); the platform's delivery window must be below T (the intent collector launches unfinished instances itself)",
			ErrBadInput, ErrLateStart, rt.cfg.Name, req.InstanceID, late.Round(time.Millisecond), rt.cfg.GCBound)
	}
	for attempt := 1; ; attempt++ {
		// The lifetime starts before the intent is read: an execution that saw the instance
		// unfinished started before it finished, so it is fenced off T before the garbage
		// collector may remove the instance's logs.
		fctx, f := rt.startFence(ctx, req.Deadline)
		var in *intent
		created := true
		var err error
		if rt.defersIntent(req) {
			in, err = rt.deferredIntent(fctx, f, req)
		} else {
			in, created, err = rt.ensureIntent(fctx, f, req)
		}
		if errors.Is(err, errVoided) && attempt < maxStartOvers {
			continue
		}
		if err != nil {
			if errors.Is(err, ErrBadInput) {
				return Result{}, err
			}
			return Result{}, rt.abandon(req.InstanceID, err)
		}
		if err := rt.sameInput(req, in); err != nil {
			return Result{}, err
		}
		if in.done {
			return collectedOrDone(rt.cfg.Name, in)
		}
		if req.Async && req.Caller != nil {
			return rt.registerAsync(fctx, req, created)
		}
		if !created {
			if in, err = rt.claimExecution(fctx, f, in); err != nil {
				return Result{}, rt.abandon(req.InstanceID, err)
			}
			if in.done {
				return collectedOrDone(rt.cfg.Name, in)
			}
		}
		// Only the execution that created the intent knows that no other execution logged a
		// step before it; every other one (a duplicate, a redelivered start, a retry) replays.
		res, err := rt.execute(fctx, f, in, !created)
		if errors.Is(err, ErrDiverged) && attempt < maxStartOvers {
			// Another execution logged a different value for a step this one used: start over
			// as a replay of the log, so this delivery still answers with the one result.
			rt.log.Debug("execution diverged; replaying the log", "instance", in.id, "attempt", attempt)
			req.Fresh = false // the intent exists now (errCreatedElsewhere): read it
			continue
		}
		return res, err
	}
}

// maxLastErrorBytes bounds the abandon reason an intent keeps.
const maxLastErrorBytes = 1000

// recordLastError keeps why an execution was abandoned on the intent, for the record the intent
// collector writes if it gives the instance up. Crashes, fenced stragglers, divergences and
// stops say nothing about the instance and are not recorded; failing to record is harmless.
func (rt *Runtime) recordLastError(ctx context.Context, id string, cause error) {
	for _, e := range []error{ErrCrashed, ErrLifetimeExceeded, ErrDiverged, ErrStopped, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(cause, e) {
			return
		}
	}
	msg := cause.Error()
	if len(msg) > maxLastErrorBytes {
		msg = msg[:maxLastErrorBytes] + "..."
	}
	_, _ = rt.st.Update(ctx, intentKey(id), store.Equal(store.Attr(attrDone), false),
		store.Update{store.SetAttr(store.Attr(attrLastError), msg)})
}

// collectedOrDone answers a request for a finished instance with its recorded outcome.
func collectedOrDone(ssfName string, in *intent) (Result, error) {
	if in.collected != 0 {
		return collectedOutcome(ssfName, in)
	}
	in.result.Replayed = true
	return in.result, nil
}

// claimExecution records that an execution other than the intent's creator starts now (its
// fence's start), unless the instance finished, and returns the intent as it stands. The intent
// collector gives an instance up only if no execution started within T (see giveUp): the claim
// and the give-up are conditional writes on the same row, so one of them sees the other.
func (rt *Runtime) claimExecution(ctx context.Context, f *fence, in *intent) (*intent, error) {
	r, err := rt.st.Update(ctx, intentKey(in.id), store.Equal(store.Attr(attrDone), false),
		store.Update{store.SetAttr(store.Attr(attrLastExec), f.started.UnixNano())})
	if err != nil {
		return nil, err
	}
	if r.Applied {
		in.row = r.Attrs
		return in, nil
	}
	return decodeIntent(in.id, r.Attrs)
}

// maxStartOvers bounds how often one request starts over after diverging (each diverged
// execution lost a race to another one that logged first, which makes progress) or after its
// intent creation was voided.
const maxStartOvers = 3

// registerAsync is the registration of an asynchronous call (Beldi §4.5): acknowledge through
// the caller's invoke log, then start the instance without waiting. If the start is lost, the
// intent collector runs it.
func (rt *Runtime) registerAsync(ctx context.Context, req Request, created bool) (Result, error) {
	if err := rt.callback(ctx, *req.Caller, req.InstanceID, Result{}); err != nil {
		return Result{}, rt.abandon(req.InstanceID, err)
	}
	if created {
		if err := rt.cfg.Transport.Spawn(ctx, rt.cfg.Name, Request{Kind: KindInvoke, InstanceID: req.InstanceID, Async: true, Sent: rt.now()}); err != nil {
			rt.log.Warn("asynchronous start failed; the intent collector will run the instance", "instance", req.InstanceID, "err", err)
		}
	}
	return Result{}, nil
}

// execute runs the handler for an instance whose intent exists and is not done, in its span.
func (rt *Runtime) execute(ctx context.Context, f *fence, in *intent, replaying bool) (Result, error) {
	ctx, span := rt.instanceSpan(ctx, in, replaying)
	res, err := rt.run(ctx, f, in, replaying)
	endInstanceSpan(span, res, err)
	return res, err
}

func (rt *Runtime) run(ctx context.Context, f *fence, in *intent, replaying bool) (Result, error) {
	rt.stats.executions.inc()
	if replaying {
		rt.stats.reexecutions.inc()
	}
	env := &Env{rt: rt, ctx: ctx, id: in.id, incarnation: in.incarnation(), replaying: replaying, fence: f, start: in.start,
		unwritten: in.unwritten, intentRow: in.row}
	if in.tx != nil {
		env.tx = newTxState(*in.tx, false)
	}
	handler := rt.cfg.Handler
	if in.builtin == builtinTxEnd {
		handler = rt.endTxHandler
	}
	out, herr := rt.runHandler(env, handler, in.args)
	if env.tx != nil && env.tx.owner && env.err == nil {
		// A handler that began a transaction and returned without ending it: abort it, so no
		// lock stays held.
		rt.log.Warn("handler returned inside its transaction; aborting it", "instance", in.id)
		_ = env.AbortTx()
		_, _ = env.endTx()
	}
	if env.err != nil {
		rt.recordLastError(ctx, in.id, env.err)
		return Result{}, rt.abandon(in.id, env.err)
	}
	res := Result{}
	room := store.PortableMaxRowBytes - intentOverheadBytes - len(in.args)
	if env.tx != nil && env.tx.aborted != nil {
		res = txAbortedResult(env.tx.aborted) // the caller's transaction aborts too
	} else if herr != nil {
		res.Error = herr.Error()
	} else if out != nil {
		b, err := json.Marshal(out)
		switch {
		case err != nil:
			res.Error = fmt.Sprintf("ssf %s: cannot encode output as JSON: %v", rt.cfg.Name, err)
		case len(b) > room:
			// Deterministic: every execution fails the same way, so it is the outcome, not a
			// crash to retry.
			res.Error = fmt.Sprintf("ssf %s: output of %d bytes does not fit the intent row next to this input (at most %d bytes); store it in an item and return its key", rt.cfg.Name, len(b), room)
		default:
			res.Output = b
		}
	}
	if env.tx != nil && !env.tx.owner {
		env.tx.report(&res, room)
	}
	if err := env.alive(); err != nil {
		return Result{}, rt.abandon(in.id, err)
	}
	// Unlike Beldi (Fig. 9), a synchronous callee does not call its result back into the
	// caller's invoke log before it is done: the caller gets the result in the response, a
	// re-execution of the caller that asks again is answered from the done intent (or its
	// tombstone), and the garbage collector calls the result back before it collects the
	// intent (reportToCaller), so the caller's log has it before the answer can expire.
	// The result depends on every read: they are logged, and agreed with every other
	// execution's, with the done mark (one transaction where the store has them). An execution
	// that read a different value than one already logged diverged and must not decide.
	final, err := rt.markDone(env, in, res)
	if err != nil {
		return Result{}, rt.abandon(in.id, err)
	}
	return final, nil
}

// runHandler calls the handler, turning a panic into an application error: a deterministic
// panic would otherwise make the intent collector re-run the instance forever.
func (rt *Runtime) runHandler(env *Env, handler Handler, args json.RawMessage) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			rt.log.Error("handler panicked", "instance", env.id, "panic", p, "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("ssf %s: handler panicked: %v", rt.cfg.Name, p)
		}
	}()
	return handler(env, args)
}

// markDone logs the execution's remaining reads and records the result, marking the intent
// done unless another execution already did, then moves it from the pending to the finished
// index (an intent on the held path is there already); it returns the result that stands.
func (rt *Runtime) markDone(env *Env, in *intent, res Result) (Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return Result{}, err
	}
	// "Done" goes before the finished-index entry (batches apply in order where they are not
	// atomic): the GC must never find an entry for an intent that is not done, unless the
	// entry names a holder to ask.
	done := store.Update{store.SetAttr(store.Attr(attrDone), true), store.SetAttr(store.Attr(attrResult), b)}
	if rt.capturing() {
		done = append(done, store.SetAttr(store.Attr(attrFinished), rt.now()))
	}
	// On a store with transactions the pending-index entry goes in the same commit.
	oneCommit := rt.transactional()
	if len(env.deferred) > 0 && !oneCommit {
		if final, ended, err := rt.endInOneBatch(env, in, res, done); err != nil || ended {
			return final, err
		}
		if err := env.writeDeferredEach(); err != nil {
			return Result{}, err
		}
	}
	pendingInCommit := oneCommit && !in.heldIndex
	// An intent not yet written (deferredIntent) is created done, straight into the finished
	// index, in one commit where the store has transactions; elsewhere it is written first, so
	// that the done mark never applies to an intent another execution created.
	createDone := env.unwritten != nil && oneCommit
	if env.unwritten != nil && !oneCommit {
		if err := env.writeIntent(); err != nil {
			return Result{}, err
		}
	}
	mark := store.BatchUpdate{Key: intentKey(in.id), Cond: store.Equal(store.Attr(attrDone), false), Update: done}
	if createDone {
		mark = env.unwritten.intent
		mark.Update = append(slices.Clip(mark.Update), done...)
		env.unwritten = nil // the execution ends with this commit, or fails
	}
	batch := []store.BatchUpdate{mark}
	if !in.heldIndex {
		batch = append(batch, rt.finishedEntry(in))
	}
	// Write records need no agreement check (reads do): they go first in the same batch.
	records := 0
	for _, u := range env.unlogged {
		if !u.isRecord() {
			records = -1
			break
		}
		records++
	}
	var rs []store.UpdateResult
	if records >= 0 && !oneCommit {
		ups := make([]store.BatchUpdate, 0, records+len(batch))
		for _, u := range env.unlogged {
			ups = append(ups, env.logEntry(u))
		}
		rs, err = rt.st.UpdateBatch(env.ctx, append(ups, batch...))
		if err == nil {
			rs = rs[records:]
		}
	} else {
		queued := len(env.unlogged)
		err = rt.atomically(env.ctx, intentKey(in.id), func(st *store.Table) (err error) {
			env.unlogged = env.unlogged[:queued] // a transaction run again queues its records again
			if !oneCommit {
				if _, err = env.flushTo(st, true); err != nil {
					return err
				}
				rs, err = st.UpdateBatch(env.ctx, batch)
				return err
			}
			// One commit: the pending entry's removal first, then the intent read in the
			// transaction, so that a store that remembers what its transaction read (pgstore)
			// can send the done mark as a compare-and-swap, with the entries, the finished
			// entry and the commit, in one request (store.FinalBatcher).
			if pendingInCommit && !createDone {
				// Sent with the intent's read where the store can (store.BlindDeleter).
				if err = st.DeleteBlind(env.ctx, pendingKey(rt.cfg.IndexShards, in.id)); err != nil {
					return err
				}
			}
			// The row this execution's own update left needs no read: a swap planned on it
			// applies only if no other execution changed it since (store.Presumer).
			if !createDone && (env.intentRow == nil || !st.Presume(intentKey(in.id), env.intentRow)) {
				if _, _, err = st.Get(env.ctx, intentKey(in.id)); err != nil {
					return err
				}
			}
			if err = env.writeDeferred(st); err != nil {
				return err
			}
			carrying, finish := env.carryingFlush(st, true, true, false)
			if rs, err = carrying.UpdateBatch(env.ctx, batch); err != nil {
				return err
			}
			if createDone && !rs[0].Applied {
				return errCreatedElsewhere // rolls back the entries carried with it
			}
			_, err = finish()
			return err
		})
	}
	if err != nil {
		return Result{}, env.fail(err)
	}
	env.unlogged = env.unlogged[:0]
	env.rememberTails()
	if r := rs[0]; !r.Applied {
		stored, err := decodeIntent(in.id, r.Attrs)
		if err != nil {
			return Result{}, err
		}
		if stored.collected != 0 {
			return collectedOutcome(rt.cfg.Name, stored)
		}
		if !stored.done {
			return Result{}, fmt.Errorf("%w: intent %s vanished before it was done", ErrCorrupt, in.id)
		}
		res = stored.result
		res.Replayed = true
	}
	if in.heldIndex || pendingInCommit {
		return res, nil
	}
	return res, rt.removePending(env.ctx, in.id)
}

// endInOneBatch ends an instance whose writes were deferred (a transaction end) on a store
// without transactions but with all-or-nothing batches (store.AtomicBatcher: SQLite, mem): its
// done mark (its intent created done, if this execution has not written it), its finished-index
// entry, its queued log entries and records, and each write as a swap on the row the runtime
// remembers for its item, in one batch that applies all or nothing; then the removal of its
// pending-index entry, if it had one. It reports false, having changed nothing, where a write
// has no remembered row that rules its step out, or where the batch was refused (a row moved,
// another execution created or finished the instance or logged an entry): the caller then
// writes step by step, deciding each on the rows as they are.
func (rt *Runtime) endInOneBatch(env *Env, in *intent, res Result, done store.Update) (Result, bool, error) {
	if in.heldIndex {
		return Result{}, false, nil
	}
	queued := len(env.unlogged)
	taken := make([]chainRow, 0, len(env.deferred))
	giveUp := func() (Result, bool, error) {
		env.unlogged = env.unlogged[:queued]
		return Result{}, false, nil
	}
	var swaps []store.BatchUpdate
	for i := range env.deferred {
		d := &env.deferred[i]
		lk := logKey(env.id, env.incarnation, d.step)
		c, ok := rt.tails.take(rt.st.Name(), d.part)
		if !ok || !rt.writableAt(c, lk) {
			for j, t := range taken { // unsent: the hints stay good for the step-by-step path
				rt.tails.put(rt.st.Name(), env.deferred[j].part, t)
			}
			if ok {
				rt.tails.put(rt.st.Name(), d.part, c)
			}
			return giveUp()
		}
		taken = append(taken, c)
		out, guard, upd := rt.planCaseB(c.attrs, lk, d.w)
		d.out = out
		swaps = append(swaps, store.BatchUpdate{Key: store.Key{Partition: d.part, Sort: c.id}, Cond: guard, Update: upd})
		env.queueRecord(d.step, d.w, out)
	}
	mark := store.BatchUpdate{Key: intentKey(in.id), Cond: store.Equal(store.Attr(attrDone), false), Update: done}
	pending := env.unwritten == nil
	if !pending {
		mark = env.unwritten.intent
		mark.Update = append(slices.Clip(mark.Update), done...)
	}
	batch := append([]store.BatchUpdate{mark, rt.finishedEntry(in)}, env.logEntries(env.unlogged)...)
	first := len(batch)
	rs, applied, err := rt.st.Driver().(store.AtomicBatcher).UpdateBatchAtomic(env.ctx, append(batch, swaps...))
	if err != nil {
		return Result{}, false, env.fail(err)
	}
	if !applied {
		return giveUp()
	}
	for i := range env.deferred {
		env.deferred[i].out.rowID, env.deferred[i].out.row = swaps[i].Key.Sort, rs[first+i].Attrs
	}
	env.unlogged, env.unwritten = env.unlogged[:0], nil
	env.rememberTails()
	if pending {
		return res, true, rt.removePending(env.ctx, in.id)
	}
	return res, true, nil
}

// finishedEntry puts an instance in the finished index, which the GC scans.
// A synchronously called instance's entry names its caller's SSF: the GC calls its result back
// before collecting it (reportToCallers), and reads only those intents.
func (rt *Runtime) finishedEntry(in *intent) store.BatchUpdate {
	upd := store.Update{store.SetAttr(store.Attr(attrDone), true)}
	if in.caller != nil && !in.async {
		upd = append(upd, store.SetAttr(store.Attr(attrCaller), in.caller.SSF))
	}
	return store.BatchUpdate{Key: finishedKey(rt.cfg.IndexShards, in.id), Cond: store.Always(), Update: upd}
}

// endsTx is the transaction a transaction-end instance ends, or "".
func (in *intent) endsTx() string {
	var end txEndInput
	if in.builtin != builtinTxEnd || json.Unmarshal(in.args, &end) != nil {
		return ""
	}
	return end.Tx.ID
}

// moveToFinished moves a done intent from the pending to the finished index, in that order, so
// a crash in between leaves it in both (the IC repairs it) and never in neither.
func (rt *Runtime) moveToFinished(ctx context.Context, in *intent) error {
	e := rt.finishedEntry(in)
	if _, err := rt.st.Update(ctx, e.Key, e.Cond, e.Update); err != nil {
		return err
	}
	return rt.removePending(ctx, in.id)
}

func (rt *Runtime) removePending(ctx context.Context, id string) error {
	_, err := rt.st.Delete(ctx, pendingKey(rt.cfg.IndexShards, id), store.Always())
	return err
}

// callback reports a callee's result to its caller (at least once; the caller ignores repeats).
func (rt *Runtime) callback(ctx context.Context, caller CallerRef, calleeID string, res Result) error {
	return rt.sendCallback(ctx, caller.SSF, Request{Kind: KindCallback, InstanceID: calleeID, Caller: &caller, Result: &res})
}

// sendCallback sends a callback request, of one result or a batch, to the caller SSF.
func (rt *Runtime) sendCallback(ctx context.Context, callerSSF string, req Request) error {
	if _, err := rt.call(ctx, callerSSF, req, "callback", store.Key{}); err != nil {
		return fmt.Errorf("callback to %s: %w", callerSSF, err)
	}
	return nil
}

// recordResults applies callbacks' updates: one conditional update for an acknowledgement or a
// failure's report, a batch for the garbage collector's reports.
func (rt *Runtime) recordResults(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if len(ups) > 1 {
		return rt.st.UpdateBatch(ctx, ups)
	}
	r, err := rt.st.Update(ctx, ups[0].Key, ups[0].Cond, ups[0].Update)
	return []store.UpdateResult{r}, err
}

// createEntries creates the invoke-log entries of the results whose entry was absent (rs: the
// results of recording them), for callers whose intent says they are unfinished, and updates rs.
// The creation is conditional too: an entry written meanwhile (provenance's record of the call,
// or a duplicate callback) must name the same callee instance.
func (rt *Runtime) createEntries(ctx context.Context, results []CalleeResult, rs []store.UpdateResult) error {
	var ups []store.BatchUpdate
	var which []int
	unfinished := map[string]bool{}
	for i, r := range rs {
		if r.Applied || len(r.Attrs) > 0 {
			continue
		}
		caller := results[i].Caller.InstanceID
		open, seen := unfinished[caller]
		if !seen {
			a, found, err := rt.st.Get(ctx, intentKey(caller))
			if err != nil {
				return err
			}
			done, _ := a[attrDone].(bool)
			open = found && !done && a[attrCollected] == nil && a[attrVoid] == nil
			unfinished[caller] = open
		}
		if !open {
			continue
		}
		b, err := json.Marshal(results[i].Result)
		if err != nil {
			return err
		}
		upd := append(invokeEntry(results[i].Callee, results[i].CalleeID, 0), store.SetAttr(store.Attr(attrResult), b))
		ups = append(ups, store.BatchUpdate{Key: invokeLogKey(caller, results[i].Caller.Step),
			Cond: store.Or(store.RowAbsent(), store.Equal(store.Attr(attrCalleeID), results[i].CalleeID)), Update: upd})
		which = append(which, i)
	}
	if len(ups) == 0 {
		return nil
	}
	created, err := rt.recordResults(ctx, ups)
	if err != nil {
		return err
	}
	for k, i := range which {
		rs[i] = created[k]
	}
	return nil
}

// handleCallback records callees' results in this SSF's invoke log (one, or a batch), each only
// in the entry that invoked that very callee. A derived call (Env.derivedCall) may have no
// entry: one is created while the caller is unfinished (createEntries). A callback for an
// entry the GC already removed, or for a finished caller, is spurious and ignored.
func (rt *Runtime) handleCallback(ctx context.Context, req Request) error {
	// Fenced like an execution: an entry created for a caller seen unfinished lands within
	// the lifetime, before the caller can be done for T and collected (no orphan entry).
	ctx, _ = rt.startFence(ctx, 0)
	results := req.Results
	if req.Caller != nil && req.Result != nil {
		results = append(results, CalleeResult{CalleeID: req.InstanceID, Caller: *req.Caller, Result: *req.Result})
	}
	if len(results) == 0 || (req.Caller == nil) != (req.Result == nil) {
		return fmt.Errorf("%w: SSF %s: callback without caller or result", ErrBadInput, rt.cfg.Name)
	}
	ups := make([]store.BatchUpdate, len(results))
	for i, r := range results {
		if r.CalleeID == "" || r.Caller.InstanceID == "" {
			return fmt.Errorf("%w: SSF %s: callback without a callee or caller instance id", ErrBadInput, rt.cfg.Name)
		}
		b, err := json.Marshal(r.Result)
		if err != nil {
			return err
		}
		ups[i] = store.BatchUpdate{Key: invokeLogKey(r.Caller.InstanceID, r.Caller.Step),
			Cond: store.Equal(store.Attr(attrCalleeID), r.CalleeID), Update: store.Update{store.SetAttr(store.Attr(attrResult), b)}}
	}
	rt.stats.callbacks.incBy(int64(len(results)))
	rs, err := rt.recordResults(ctx, ups)
	if err != nil {
		return err
	}
	if err := rt.createEntries(ctx, results, rs); err != nil {
		return err
	}
	for i, r := range rs {
		if !r.Applied {
			rt.stats.spuriousCallbacks.inc()
			rt.log.Debug("ignoring spurious callback", "caller_instance", results[i].Caller.InstanceID, "step", results[i].Caller.Step, "callee", results[i].CalleeID)
		}
	}
	return nil
}
