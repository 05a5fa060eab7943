package ssf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Transactions (Beldi §6): two-phase locking with wait-die over the items' linked DAALs, writes
// kept until commit as the lock holder's uncommitted value in the item's own row (where Beldi
// keeps a shadow DAAL per item), and commit or abort propagated to every SSF the transaction
// called. Every lock, write, commit and release is an exactly-once step, so a crash at any
// point leaves the intent collector to finish what was started: a transaction's effects are all
// or nothing, and no lock stays held.
//
// Isolation is opacity: an operation takes the item's lock before it reads, so a transaction,
// even one that will abort, only ever reads committed values or its own writes.

// TxMode is what a transaction context asks of a participant.
type TxMode string

// Transaction modes.
const (
	TxExecute TxMode = "execute"
	TxCommit  TxMode = "commit"
	TxAbort   TxMode = "abort"
)

// TxContext identifies a transaction; it travels with SyncInvoke to every participant.
type TxContext struct {
	ID string `json:"id"`
	// Start is the intent-creation time of the instance that began the transaction: its age for
	// wait-die, stable across re-executions (and across retries of the transaction in the same
	// instance, so a transaction that keeps dying gets older until it wins).
	Start int64  `json:"start"`
	Mode  TxMode `json:"mode"`
}

// youngerThan reports whether t is younger than the holder (id, start): the holder started
// earlier, or at the same time with a smaller id (a total order, so exactly one of two
// transactions waits).
func (t TxContext) youngerThan(holderID string, holderStart int64) bool {
	return holderStart < t.Start || (holderStart == t.Start && holderID < t.ID)
}

// TxAbortedError says why a transaction must abort; errors.Is(err, ErrTxAborted) holds.
type TxAbortedError struct {
	TxID  string
	Start int64 // the transaction's wait-die age
	// Reason is "wait-die", "application" or "participant".
	Reason string
	// For wait-die: the item and the older transaction holding its lock.
	Item        string
	Holder      string
	HolderStart int64
	// For a participant's abort: the SSF, its message, and the reason its own abort started
	// from ("wait-die" or "application"; see Conflict).
	Participant string
	Message     string
	Cause       string
}

// Conflict reports whether the transaction aborted because it lost a wait-die conflict, here
// or in a participant: retrying it (with the same age) can succeed, unlike an application abort.
func (e *TxAbortedError) Conflict() bool { return e.Reason == "wait-die" || e.Cause == "wait-die" }

func (e *TxAbortedError) Error() string {
	switch e.Reason {
	case "wait-die":
		return fmt.Sprintf("ssf: transaction %s aborted: %s is held by the older transaction %s (wait-die)", e.TxID, e.Item, e.Holder)
	case "participant":
		return fmt.Sprintf("ssf: transaction %s aborted by participant %s: %s", e.TxID, e.Participant, e.Message)
	}
	return fmt.Sprintf("ssf: transaction %s aborted by the application", e.TxID)
}

// Is makes errors.Is(err, ErrTxAborted) hold.
func (e *TxAbortedError) Is(target error) bool { return target == ErrTxAborted }

// txState is an execution's view of the transaction it runs in.
type txState struct {
	ctx     TxContext
	owner   bool            // this instance began it and decides it at EndTx
	aborted *TxAbortedError // why it must abort; nil while it may commit
	locked  map[string]bool // items locked by this execution (table|key), to lock each once
	// touched is what this execution touched in the transaction here, in the order it noted
	// it: items ("k|TABLE|KEY") before their lock steps, callees ("c|SSF") before their calls.
	// Every execution of the instance notes the same (each replays the logged steps that decide
	// its path), so the owner ends its part from this list, and a participant reports it with
	// its result (Result.TxTouched) for its end.
	touched []string
	noted   map[string]bool
	// listed is what the instances this execution called in the transaction touched, per SSF,
	// as their results reported; unlisted are the SSFs one of whose results did not (it came
	// from a collector, or did not fit); deep says that a listed instance called further, so
	// that instances anywhere may have reported to it, not here.
	listed   map[string][]string
	unlisted map[string]bool
	deep     bool
}

func newTxState(ctx TxContext, owner bool) *txState {
	return &txState{ctx: ctx, owner: owner, locked: map[string]bool{}, noted: map[string]bool{},
		listed: map[string][]string{}, unlisted: map[string]bool{}}
}

// maxListedBytes bounds the encoded list of what an SSF touched that a result or an end
// request carries; a longer one is left out, and the end reads the record instead.
const maxListedBytes = 8 << 10

// listable reports whether touched is short enough to carry (maxListedBytes).
func listable(touched []string) bool {
	n := 2
	for _, t := range touched {
		n += len(t) + 3
	}
	return n <= maxListedBytes
}

// heard takes in what a participant called in the transaction reported it touched.
func (tx *txState) heard(callee string, res Result) {
	if tx.unlisted[callee] {
		return
	}
	if !res.TxListed {
		tx.unlisted[callee] = true
		delete(tx.listed, callee)
		return
	}
	for _, t := range res.TxTouched {
		tx.deep = tx.deep || strings.HasPrefix(t, "c|")
		if !slices.Contains(tx.listed[callee], t) {
			tx.listed[callee] = append(tx.listed[callee], t)
		}
	}
	if !listable(tx.listed[callee]) {
		tx.unlisted[callee] = true
		delete(tx.listed, callee)
	}
}

// calleeList is what the instances of callee in the transaction touched, if this execution
// called every one of them and each reported it: the transaction's calls form a star around
// this execution (no participant called further, and each reported what it called, so none
// did). Otherwise an instance of callee may have been called, and reported, elsewhere, and
// only callee's record lists them all.
func (tx *txState) calleeList(callee string) ([]string, bool) {
	if tx == nil || len(tx.unlisted) > 0 || tx.deep {
		return nil, false
	}
	l, ok := tx.listed[callee]
	return l, ok
}

// BeginTx starts a transaction. Inside a transaction inherited from a caller it does nothing:
// the caller's transaction continues (no nesting, as in Beldi).
func (e *Env) BeginTx() (err error) {
	defer e.traceStep("begintx")(&err)
	// Nothing is written: the intent's creation, if not yet written, rides the next flush.
	step, err := e.beginQueued()
	if err != nil {
		return err
	}
	if e.tx != nil {
		return nil
	}
	e.tx = newTxState(TxContext{ID: fmt.Sprintf("%s#%d", e.id, step), Start: e.start, Mode: TxExecute}, true)
	return nil
}

// InTx reports whether the instance is in a transaction.
func (e *Env) InTx() bool { return e.tx != nil }

// AbortTx makes the transaction abort: operations in it fail with ErrTxAborted from now on, and
// EndTx aborts it. In a transaction inherited from a caller, the caller's transaction aborts.
func (e *Env) AbortTx() error {
	if e.tx == nil {
		return fmt.Errorf("%w: AbortTx outside a transaction", ErrBadInput)
	}
	if e.tx.aborted == nil {
		e.tx.aborted = &TxAbortedError{TxID: e.tx.ctx.ID, Start: e.tx.ctx.Start, Reason: "application"}
	}
	return nil
}

// EndTx ends the transaction this instance began: it commits (uncommitted values become the
// items' values, locks are released) unless the transaction must abort (locks are released,
// uncommitted values dropped), here and in every SSF the transaction called, and reports
// whether it committed.
// Inside a transaction inherited from a caller it does nothing; the caller decides.
func (e *Env) EndTx() (committed bool, err error) {
	defer e.traceStep("endtx")(&err)
	if _, err := e.begin(); err != nil {
		return false, err
	}
	if e.tx == nil {
		return false, fmt.Errorf("%w: EndTx without BeginTx", ErrBadInput)
	}
	if !e.tx.owner {
		return e.tx.aborted == nil, nil
	}
	return e.endTx()
}

// endTx runs the commit or abort of the transaction this instance owns, in this instance: its
// steps are logged like any other, and an instance that took locks is never given up, so a
// crash anywhere leaves the intent collector to finish the end (see markLocks).
func (e *Env) endTx() (bool, error) {
	tx := e.tx
	mode := TxCommit
	if tx.aborted != nil {
		mode = TxAbort
	}
	e.tx = nil // the end runs outside the transaction
	end := tx.ctx
	end.Mode = mode
	// Nothing is visited yet: the owner's own part is its list, not its SSF's record, which
	// holds the notes of participant instances of this SSF (a call that came back here), if any.
	if err := e.endTxHere(end, nil, tx.touched, tx); err != nil {
		if e.err != nil {
			return false, e.err
		}
		return false, e.fail(fmt.Errorf("%w: %s of transaction %s failed: %v", ErrCorrupt, mode, tx.ctx.ID, err))
	}
	return mode == TxCommit, nil
}

// Lock takes the item's lock for this instance, exactly once: a re-executed instance finds it
// already holds it. Inside a transaction the lock belongs to the transaction (two-phase locking
// with wait-die) and is released by EndTx; outside one it belongs to the instance, which waits
// until it is free, and must Unlock it.
func (e *Env) Lock(table, key string) (err error) {
	defer e.traceStep("lock", "ssf.item.table", table, "ssf.item.key", key)(&err)
	if err := validItem(table, key); err != nil {
		return err
	}
	if e.tx != nil {
		_, _, err := e.txLock(table, key, nil)
		return err
	}
	owner := "instance:" + e.id
	for {
		out, err := e.lockStep(table, key, owner, e.start, nil)
		if err != nil || out.applied {
			return err
		}
		if !out.replayed {
			holder, err := e.currentLock(table, key)
			if err != nil {
				return e.fail(err)
			}
			if err := e.awaitRelease(table, key, holder); err != nil {
				return err
			}
		}
	}
}

// Unlock releases a lock taken by Lock outside a transaction (inside one, EndTx releases them).
func (e *Env) Unlock(table, key string) (err error) {
	defer e.traceStep("unlock", "ssf.item.table", table, "ssf.item.key", key)(&err)
	if err := validItem(table, key); err != nil {
		return err
	}
	if e.tx != nil {
		return fmt.Errorf("%w: locks taken in a transaction are released by EndTx (two-phase locking)", ErrBadInput)
	}
	step, err := e.begin()
	if err != nil {
		return err
	}
	_, err = e.logAndWrite(dataPartition(table, key), step, releaseIf("instance:"+e.id))
	return err
}

// lockStep is one logged attempt to take the item's lock for owner, and with it, if val is not
// nil, to write val as owner's uncommitted value (see txWrite; both apply or neither): applied
// if it took the lock. replayed reports that the outcome came from the log: a re-execution must
// not sleep again through waits it already waited, or a wait longer than the lifetime bound
// could never be replayed to its end.
func (e *Env) lockStep(table, key, owner string, start int64, val []byte) (daalOutcome, error) {
	if err := e.markLocks(); err != nil {
		return daalOutcome{}, err
	}
	// The lock is taken by a logged write, whose flush carries a called participant's intent
	// creation (deferredIntent): the lock exists only with the intent.
	step, err := e.beginQueued()
	if err != nil {
		return daalOutcome{}, err
	}
	// Taking a lock is an effect others see: the reads before it are logged first.
	free := func(a store.Attrs) bool { o, held := a[attrLockOwner]; return !held || o == owner }
	w := daalWrite{when: free}
	if val != nil {
		w = e.txValueWrite(table, key, val, free)
	}
	w.lock = &lockChange{owner: owner, start: start}
	return e.logAndWrite(dataPartition(table, key), step, w)
}

// markLocks records on the intent that the instance takes locks of its own (Env.Lock, or a
// transaction it began, here or through a participant it calls), before the first: only
// finishing it releases them, so the collectors must never record it as failed instead (given
// up, or abandoned by its holder). A transaction participant's locks are released by the
// transaction's end, not its own.
func (e *Env) markLocks() error {
	if e.locksMarked || e.tx != nil && !e.tx.owner {
		return nil
	}
	if e.unwritten != nil {
		// A called instance that has not written its intent yet (deferredIntent) creates it
		// marked: the flush before the effect that needs the mark (the call, the lock) carries
		// the creation, in front of it.
		e.unwritten.intent.Update = append(slices.Clip(e.unwritten.intent.Update), store.SetAttr(store.Attr(attrHoldsLocks), true))
		e.locksMarked = true
		return nil
	}
	if err := e.alive(); err != nil {
		return err
	}
	r, err := e.rt.st.Update(e.ctx, intentKey(e.id), store.Equal(store.Attr(attrDone), false),
		store.Update{store.SetAttr(store.Attr(attrHoldsLocks), true)})
	if err != nil {
		return e.fail(err)
	}
	e.intentRow = nil
	if r.Applied {
		e.intentRow = r.Attrs
	}
	e.locksMarked = true
	return nil
}

// releaseIf releases the item's lock if owner holds it.
func releaseIf(owner string) daalWrite {
	return daalWrite{lock: &lockChange{}, when: func(a store.Attrs) bool { return a[attrLockOwner] == owner }}
}

// awaitRelease sleeps until the item's lock is free or has changed hands since holder, peeking
// without logging: however long the wait, it adds no steps to the log, only the next attempt
// to take the lock does. Neither sleeping nor peeking is an effect.
func (e *Env) awaitRelease(table, key string, holder lockHolder) error {
	for attempt := 0; ; attempt++ {
		select {
		case <-e.ctx.Done():
			return e.fail(e.ctx.Err())
		case <-time.After(time.Millisecond << min(attempt, 6)):
		}
		if err := e.alive(); err != nil {
			return err
		}
		now, err := e.currentLock(table, key)
		if err != nil {
			return e.fail(err)
		}
		if now.Owner == "" || now != holder {
			return nil
		}
	}
}

// txLock takes the item's lock for the transaction, once per execution (Beldi Fig. 11): if
// another transaction holds it, an older requester waits and a younger one dies (wait-die), so
// no deadlock can form. A write that takes the lock passes its value (val not nil), to write it
// with the lock in one step; written reports that it did. row is the item's row as the lock
// step that took the lock left it, when this call took it and not in a replay (nil otherwise):
// under the lock, the value a read in the transaction sees.
func (e *Env) txLock(table, key string, val []byte) (written bool, row store.Attrs, err error) {
	tx := e.tx
	if tx.aborted != nil {
		return false, nil, tx.aborted
	}
	item := table + "|" + key
	if tx.locked[item] {
		return false, nil, nil
	}
	// Note the item first, so that commit or abort finds it even if the lock is taken and the
	// execution dies at once. The note is idempotent, not a step.
	e.note("k|" + item)
	for {
		out, err := e.lockStep(table, key, tx.ctx.ID, tx.ctx.Start, val)
		if err != nil {
			return false, nil, err
		}
		if out.applied {
			tx.locked[item] = true
			return val != nil, out.row, nil
		}
		holder, err := e.lockHolder(table, key)
		if err != nil {
			return false, nil, err
		}
		if holder.Owner != "" && tx.ctx.youngerThan(holder.Owner, holder.Start) {
			tx.aborted = &TxAbortedError{TxID: tx.ctx.ID, Start: tx.ctx.Start, Reason: "wait-die",
				Item: table + "/" + key, Holder: holder.Owner, HolderStart: holder.Start}
			return false, nil, tx.aborted
		}
		if holder.Owner == "" || holder.Owner == tx.ctx.ID {
			// Free (or ours) when read: the lock was released since the attempt, or the value did
			// not fit. Take the lock alone; the write that follows tells which (the holder read is
			// logged, so every execution takes the same turn).
			val = nil
			continue
		}
		if !out.replayed {
			if err := e.awaitRelease(table, key, holder); err != nil {
				return false, nil, err
			}
		}
	}
}

type lockHolder struct {
	Owner string `json:"owner,omitempty"`
	Start int64  `json:"start,omitempty"`
}

// lockHolder reads who holds the item's lock, logged so that a re-execution takes the same
// wait-or-die decision. The last row holds the current lock, as it holds the current value.
func (e *Env) lockHolder(table, key string) (lockHolder, error) {
	step, err := e.begin()
	if err != nil {
		return lockHolder{}, err
	}
	raw, err := e.logged(step, func() ([]byte, error) {
		h, err := e.currentLock(table, key)
		if err != nil {
			return nil, err
		}
		return json.Marshal(h)
	})
	var h lockHolder
	if err == nil {
		err = json.Unmarshal(raw, &h)
	}
	return h, err
}

// currentLock reads who holds the item's lock now, unlogged. An error is the store's: callers
// outside a logged step must fail the execution with it.
func (e *Env) currentLock(table, key string) (lockHolder, error) {
	rows, err := e.rt.st.Scan(e.ctx, dataPartition(table, key), store.ScanOptions{Reverse: true, Limit: 1,
		Projection: []store.Path{store.Attr(attrLockOwner), store.Attr(attrLockStart)}})
	if err != nil || len(rows) == 0 {
		return lockHolder{}, err
	}
	h := lockHolder{}
	h.Owner, _ = rows[0].Attrs[attrLockOwner].(string)
	h.Start, _ = rows[0].Attrs[attrLockStart].(int64)
	return h, nil
}

// note notes that the transaction touched what here. A participant also writes it in this
// SSF's transaction record, which its end reads if its result does not reach the caller with
// the list (a collector gave the instance up): the record's note is queued with the read-log
// entries, which the lock step or the call it precedes writes first (on a store with
// transactions, in the same transaction), so it costs no request of its own. The owner writes
// no record: it is never given up (markLocks), so an execution of it always reaches its end,
// with the list every execution notes.
func (e *Env) note(what string) {
	tx := e.tx
	if tx.noted[what] {
		return
	}
	tx.noted[what] = true
	tx.touched = append(tx.touched, what)
	if !tx.owner {
		e.unlogged = append(e.unlogged, unloggedEntry{txRecord: &store.Key{Partition: txPartition(tx.ctx.ID), Sort: what}})
	}
}

// report is what the participant reports it touched, with its result of res: the list, unless
// it does not fit (maxListedBytes, or the room the result has in the intent row).
func (tx *txState) report(res *Result, room int) {
	if !listable(tx.touched) {
		return
	}
	listed := *res
	listed.TxTouched, listed.TxListed = slices.Clip(tx.touched), true
	if b, err := json.Marshal(listed); err == nil && len(b) <= room {
		*res = listed
	}
}

// readInTx reads an item inside the transaction, under its lock, with one request: the
// transaction's uncommitted value if it wrote the item (read your writes; shadow true), else
// its committed value and version. The last row holds both, as it holds the lock.
func (rt *Runtime) readInTx(e *Env, table, key string) (v []byte, version int64, shadow bool, err error) {
	rows, err := rt.st.Scan(e.ctx, dataPartition(table, key), store.ScanOptions{Reverse: true, Limit: 1,
		Projection: []store.Path{store.Attr(attrValue), store.Attr(attrSeq), store.Attr(attrTxValue), store.Attr(attrLockOwner)}})
	if err != nil || len(rows) == 0 {
		return nil, 0, false, err
	}
	v, version, shadow = valueInTx(e, rows[0].Attrs)
	return v, version, shadow, nil
}

// valueInTx is the value a read in the transaction sees in the item's last row a: the
// transaction's uncommitted value if it wrote one, else the committed value and its version.
func valueInTx(e *Env, a store.Attrs) (v []byte, version int64, shadow bool) {
	if tv, ok := a[attrTxValue].([]byte); ok && a[attrLockOwner] == e.tx.ctx.ID {
		if bytes.Equal(tv, []byte("null")) {
			tv = nil
		}
		return tv, 0, true
	}
	v, _ = a[attrValue].([]byte)
	return v, itemVersion(a), false
}

// txWrite writes an item inside the transaction: under the item's lock, as the transaction's
// uncommitted value in the item's row, which its commit makes the item's value. The row holds
// it beside the committed value, so the two must fit in one row together; a write that does not
// fit is logged as not applied and fails, the same way in every execution.
// The first write of an item in the execution takes its lock in the same step.
func (e *Env) txWrite(table, key string, val []byte) error {
	if written, _, err := e.txLock(table, key, val); err != nil || written {
		return err
	}
	step, err := e.begin()
	if err != nil {
		return err
	}
	txID := e.tx.ctx.ID
	out, err := e.logAndWrite(dataPartition(table, key), step,
		e.txValueWrite(table, key, val, func(a store.Attrs) bool { return a[attrLockOwner] == txID }))
	if err == nil && !out.applied {
		return fmt.Errorf("%w: %s/%s: inside a transaction the new value waits for the commit beside the committed one, and the two take more than the %d bytes of value a row of %s holds",
			ErrValueTooLarge, table, key, e.rt.maxValueBytes(table, key), e.rt.st.Name())
	}
	return err
}

// txValueWrite writes val as the item's uncommitted value where locked holds of the row and val
// fits in it beside the committed value.
func (e *Env) txValueWrite(table, key string, val []byte, locked func(store.Attrs) bool) daalWrite {
	room := e.rt.maxValueBytes(table, key)
	return daalWrite{setValue: true, value: val, txValue: true,
		when: func(a store.Attrs) bool {
			committed, _ := a[attrValue].([]byte)
			return locked(a) && len(committed)+len(val) <= room
		},
		record: e.writeEvent(table, key, val, true)}
}

// builtinTxEnd is the runtime handler that commits or aborts a transaction in one SSF.
const builtinTxEnd = "tx-end"

type txEndInput struct {
	Tx TxContext `json:"tx"`
	// Visited lists the SSFs this propagation already reached, so that a transaction whose
	// calls form a cycle (A calls B calls A) ends in finitely many steps.
	Visited []string `json:"visited"`
	// Touched, if Listed, is what the transaction touched in this SSF, as its instances in the
	// transaction reported it to the caller; otherwise the end reads the SSF's record.
	Touched []string `json:"touched,omitempty"`
	Listed  bool     `json:"listed,omitempty"`
}

// EndTxRequest is the request that ends transaction tx (tx.Mode commit or abort) in the SSF
// named ssfName, which the request is sent to, and in every SSF that SSF called in the
// transaction: how a coordinator outside the runtime (a workflow) ends a transaction whose
// participants it called itself. Like any request, it is exactly-once per instance id.
func EndTxRequest(instanceID, ssfName string, tx TxContext) (Request, error) {
	if tx.Mode != TxCommit && tx.Mode != TxAbort {
		return Request{}, fmt.Errorf("%w: ending transaction %s needs mode %s or %s, not %q", ErrBadInput, tx.ID, TxCommit, TxAbort, tx.Mode)
	}
	in, err := json.Marshal(txEndInput{Tx: tx, Visited: []string{ssfName}})
	if err != nil {
		return Request{}, err
	}
	return Request{Kind: KindInvoke, InstanceID: instanceID, Input: in, Builtin: builtinTxEnd}, nil
}

// endTxHandler is the built-in handler that ends a transaction in this SSF for the SSF that
// called it in the transaction, or for a coordinator outside the runtime (EndTxRequest).
func (rt *Runtime) endTxHandler(e *Env, raw json.RawMessage) (any, error) {
	var in txEndInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("%w: transaction end input %s: %v", ErrCorrupt, raw, err)
	}
	// The commits go with the done mark (markDone) where the store can take them together: in
	// its store transaction, or in one all-or-nothing batch that also creates the intent.
	e.deferring = e.rt.transactional() || e.rt.atomicBatches()
	touched := in.Touched
	if !in.Listed {
		var err error
		if touched, err = e.readTxRecord(in.Tx.ID); err != nil {
			return nil, err
		}
	}
	return nil, e.endTxHere(in.Tx, in.Visited, touched, nil)
}

// readTxRecord lists the transaction's record in this SSF, logged: a re-execution ends the same
// set. It writes through the flush of the end's first commit, which carries the instance's
// intent creation (deferredIntent). The garbage collector removes the record with the end
// instance's logs (deleteLogs).
func (e *Env) readTxRecord(txID string) ([]string, error) {
	step, err := e.beginQueued()
	if err != nil {
		return nil, err
	}
	listed, err := e.loggedEvent(step, func() ([]byte, *dataEvent, error) {
		rows, err := e.rt.st.Scan(e.ctx, txPartition(txID), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return nil, nil, err
		}
		sorts := make([]string, len(rows))
		for i, r := range rows {
			sorts[i] = r.Key.Sort
		}
		b, err := json.Marshal(sorts)
		return b, nil, err
	})
	if err != nil {
		return nil, err
	}
	var touched []string
	if err := json.Unmarshal(listed, &touched); err != nil {
		return nil, e.fail(fmt.Errorf("%w: transaction record %s", ErrCorrupt, listed))
	}
	return touched, nil
}

// endTxHere commits or aborts the transaction's work in this SSF, the items and callees in
// touched, then in every SSF it called from here (Beldi's recursive Commit/Abort modes), passing
// each the list its instances reported to calls, if it knows it. A commit makes each item's
// uncommitted value its value and releases its lock in one step on its row, so no item is ever
// left committed but locked, or released but uncommitted; an abort releases the locks and drops
// the uncommitted values. Each step applies only while the transaction holds the lock, so ending
// a transaction twice (two ends, or an end replayed after a crash) changes nothing the second
// time. The commits write through flushes, which carry a called end's intent creation
// (deferredIntent) with the first, or, in an end deferring them (Env.deferring), with the done
// mark: in its store transaction, or in one all-or-nothing batch (Runtime.endInOneBatch).
func (e *Env) endTxHere(tx TxContext, visited, touched []string, calls *txState) error {
	var callees []string
	for _, t := range touched {
		if ssf, ok := strings.CutPrefix(t, "c|"); ok {
			callees = append(callees, ssf)
			continue
		}
		table, key, _ := strings.Cut(strings.TrimPrefix(t, "k|"), "|")
		w := releaseIf(tx.ID) // an abort drops the uncommitted value with the lock
		if tx.Mode == TxCommit {
			w.commitTxValue = true
			w.record = e.writeEvent(table, key, nil, false)
		}
		step, err := e.beginQueued()
		if err != nil {
			return err
		}
		if e.deferring {
			e.deferred = append(e.deferred, deferredWrite{part: dataPartition(table, key), step: step, w: w.numbered()})
			continue
		}
		if _, err := e.logAndWrite(dataPartition(table, key), step, w); err != nil {
			return err
		}
	}
	next := append(slices.Clone(visited), callees...)
	var ends []loggedCall
	for _, c := range callees {
		if slices.Contains(visited, c) {
			continue
		}
		in := txEndInput{Tx: tx, Visited: next}
		in.Touched, in.Listed = calls.calleeList(c)
		end, err := e.logCall(c, in, false, builtinTxEnd)
		if err != nil {
			return err
		}
		ends = append(ends, end)
	}
	return e.sendEnds(ends)
}

// sendEnds sends the ends to the SSFs the transaction called side by side, as a two-phase
// commit's coordinator sends its decision: each ends its own part, and their steps are logged
// already, so the order in which they land changes nothing. It waits for all of them.
func (e *Env) sendEnds(ends []loggedCall) error {
	results, errs := make([]Result, len(ends)), make([]error, len(ends))
	if len(ends) < 2 || e.rt.oneAtATime() {
		for i, end := range ends {
			if results[i], errs[i] = end.send(e); errs[i] != nil {
				break
			}
		}
	} else {
		var wg sync.WaitGroup
		for i, end := range ends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = end.send(e)
			}()
		}
		wg.Wait()
	}
	for i := range ends {
		if errs[i] != nil {
			return e.fail(errs[i])
		}
		if err := results[i].Err(); err != nil {
			return err
		}
	}
	return nil
}

// txAbortedResult marks an instance's result as that of an aborted transaction participant.
func txAbortedResult(err *TxAbortedError) Result {
	return Result{Error: err.Error(), TxAborted: true, TxConflict: err.Conflict()}
}

// errTxNotSupported is returned by operations a transaction cannot contain.
var errTxNotSupported = errors.New("not supported inside a transaction")
