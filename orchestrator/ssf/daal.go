package ssf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// A linked DAAL (Beldi §4.1) holds one data item: a list of rows in one partition, each with
// the item's value, a write log (RecentWrites), its size (LogSize) and a NextRow pointer. Writes
// go to the tail together with their log entry in one conditional update (the atomicity scope),
// so a write and its log can never be separated. A full tail gets a successor; the head is never
// collected. Successor ids are the predecessor's id + 1 (see nextRowID).

type chainRow struct {
	id    string
	attrs store.Attrs
}

// scanChain reads the partition with one projected scan and returns the rows reachable from the
// head, in list order (Beldi's local skeleton of the DAAL), and every scanned row, reachable or
// not, for the garbage collector. A scan is not a snapshot on paged cloud stores: a row appended
// after the scan passed can be linked from a row read later. The skeleton then ends at the last
// row the scan returned, which is not the tail; callers follow NextRow from there with direct
// reads, as Beldi's write does in case C.
func (rt *Runtime) scanChain(ctx context.Context, st *store.Table, part string, proj []store.Path) (chain []chainRow, all []store.Row, err error) {
	all, err = st.Scan(ctx, part, store.ScanOptions{Projection: proj})
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[string]store.Attrs, len(all))
	for _, r := range all {
		byID[r.Key.Sort] = r.Attrs
	}
	for id := headRowID; ; {
		a, ok := byID[id]
		if !ok {
			return chain, all, nil // never written (no head), or appended after the scan
		}
		chain = append(chain, chainRow{id: id, attrs: a})
		next, ok := a[attrNextRow].(string)
		if !ok {
			return chain, all, nil
		}
		if next <= id {
			return nil, nil, fmt.Errorf("%w: %s: NextRow of %s points back to %s", ErrCorrupt, part, id, next)
		}
		id = next
	}
}

// valueAndLink is what a read needs of a row it gets: the value, its version and whether the
// row has a successor.
var valueAndLink = []store.Path{store.Attr(attrValue), store.Attr(attrSeq), store.Attr(attrNextRow)}

// readValue returns the item's current value with one request: the value of the row with the
// highest id. Ids increase along the list, rows after the tail can only be a successor being
// appended (created holding its full predecessor's final value), and the collector removes only
// rows before the tail, so the last row always holds the current value (Beldi Fig. 5 reads the
// tail found by a scan; this is the same value without the scan). It also returns the value's
// version (0 for an item never written).
//
// Where the runtime remembers the item's tail (tailCache), it gets that row instead, a get
// rather than a query (cheaper on the cloud stores): a row that was ever linked and has no
// successor is the tail, whose value is the item's. One that has a successor, or is gone, is
// forgotten, and the read takes the way above.
func (rt *Runtime) readValue(ctx context.Context, table, key string) ([]byte, int64, error) {
	part := dataPartition(table, key)
	if id, ok := rt.tails.rowID(rt.st.Name(), part); ok {
		a, found, err := rt.st.GetProjected(ctx, store.Key{Partition: part, Sort: id}, valueAndLink)
		if err != nil {
			return nil, 0, err
		}
		if _, linked := a[attrNextRow]; found && !linked {
			v, _ := a[attrValue].([]byte)
			return v, itemVersion(a), nil
		}
		rt.tails.forget(rt.st.Name(), part, id)
	}
	rows, err := rt.st.Scan(ctx, part, store.ScanOptions{
		Reverse: true, Limit: 1, Projection: []store.Path{store.Attr(attrValue), store.Attr(attrSeq)}})
	if err != nil || len(rows) == 0 {
		return nil, 0, err
	}
	v, _ := rows[0].Attrs[attrValue].([]byte)
	return v, itemVersion(rows[0].Attrs), nil
}

// daalWrite is one logged change to an item: its value, its lock, or both, optionally under a
// condition on the item's current state.
type daalWrite struct {
	setValue bool
	value    []byte // JSON; "null" removes the value
	// txValue writes value as the lock holder's uncommitted value (TxValue) instead of the
	// item's: a transaction's write, kept in the item's row beside its lock.
	txValue bool
	// lock changes the lock owner: a non-empty owner takes it (with ownerStart, the wait-die
	// age), an empty one releases it and drops any uncommitted value.
	lock *lockChange
	// commitTxValue makes the uncommitted value the row holds, if any, the item's value (a
	// transaction's commit); the value comes from the row's state at the write, pinned by its
	// version, so w.when must be set.
	commitTxValue bool
	// when, if set, must hold on the tail's attributes; its outcome is what the step logs
	// (Beldi's B1/B2), and the tail's version is pinned so it is the outcome at the write.
	when func(store.Attrs) bool
	// record, if set, is the write's provenance record, completed with its outcome and queued
	// for the instance's log (Env.logAndWrite).
	record *dataEvent
	// versioned numbers the item's values for provenance: a value write that applies sets Seq
	// to one more than the tail's, pinned to it, and the step's write-log entry holds the
	// version it made (or, failed, saw) in place of its outcome flag (versionEntry), so a
	// re-execution that finds the step logged knows it.
	versioned bool
}

// daalOutcome is a logged write's outcome: whether it applied, whether an earlier or
// concurrent execution of the step had logged it already (Beldi's case A), and, for a versioned
// write, the item's version it made or its condition saw (-1 otherwise).
type daalOutcome struct {
	applied, replayed bool
	version           int64
	// committed is the value a commitTxValue write made the item's, when it applied here
	// (nil for a row without an uncommitted value, or a replay).
	committed []byte
	// row is the row as this execution's update of it left it (case B, applied or not; nil for
	// a replay), and rowID its id.
	rowID string
	row   store.Attrs
}

type lockChange struct {
	owner string
	start int64
}

// writeDAAL performs one logged write on the linked DAAL in partition part under logKey lk,
// and reports whether it applied (always true without a condition) and whether that outcome was
// already logged (by an earlier or concurrent execution of the step: Beldi's case A). Beldi Fig.
// 6 and §4.4 scan the list first, since case A may hold in any row; here the last row alone
// decides when it is the head or its PriorWrites summary rules the step out of every row before
// it (see priorwrites.go), so a write costs the same on a long list as on a short one. Only
// when the summary cannot rule it out (a key that may be there, a row written without one)
// does a projected scan check every row. tryWrite then works through the cases from there.
func (rt *Runtime) writeDAAL(ctx context.Context, st *store.Table, part, lk string, w daalWrite) (daalOutcome, error) {
	if c, ok := rt.tails.take(st.Name(), part); ok {
		if out, applied, err := rt.writeCached(ctx, st, part, c, lk, w); err != nil || applied {
			return out, err
		}
	}
	proj := []store.Path{store.Attr(attrNextRow), store.Attr(attrRecentWrites).Entry(lk)}
	if w.versioned {
		// The version to number after comes with the scan (pinned at the write), without the
		// value: a versioned write that must append re-reads the full row first (tryWrite).
		proj = append(proj, store.Attr(attrSeq), store.Attr(attrLogSize))
	}
	if w.when != nil {
		// The condition needs the tail's state: bring it with the scan rather than in a
		// separate read. The version pin catches a change in between.
		proj = append(proj, store.Attr(attrValue), store.Attr(attrVersion), store.Attr(attrLogSize),
			store.Attr(attrLockOwner), store.Attr(attrLockStart), store.Attr(attrSeq), store.Attr(attrTxValue))
	}
	last, err := st.Scan(ctx, part, store.ScanOptions{Reverse: true, Limit: 2, Projection: append(proj, store.Attr(attrPriorWrites))})
	if err != nil {
		return daalOutcome{}, err
	}
	tail, linked := linkedLastRow(last)
	switch prior, _ := tail.attrs[attrPriorWrites].([]byte); {
	case len(last) == 0:
		return rt.writeFromHead(ctx, st, part, lk, w) // the item's first write
	case linked && (tail.id == headRowID || !priorMayHold(prior, lk)):
		return rt.writeFrom(ctx, st, part, tail, lk, w)
	}
	rt.stats.writeScans.inc()
	chain, _, err := rt.scanChain(ctx, st, part, proj)
	if err != nil {
		return daalOutcome{}, err
	}
	for _, r := range chain {
		if out, ok := loggedOutcome(r.attrs, lk); ok {
			return out, nil
		}
	}
	if len(chain) == 0 {
		return rt.writeFromHead(ctx, st, part, lk, w)
	}
	return rt.writeFrom(ctx, st, part, chain[len(chain)-1], lk, w)
}

// writeFromHead drives a write from the head, creating it if the item has none: no row comes
// before the head, so the write may start there whatever rows were created since. The head's
// state, as its creation found or made it, spares a write that decides on it a read.
func (rt *Runtime) writeFromHead(ctx context.Context, st *store.Table, part, lk string, w daalWrite) (daalOutcome, error) {
	head, err := rt.ensureHead(ctx, uncarried(st), part)
	if err != nil {
		return daalOutcome{}, err
	}
	return rt.tryWrite(ctx, st, part, headRowID, head, lk, w)
}

// linkedLastRow returns the row with the highest id, from the two highest (a reverse scan), if
// it is the tail: the head, or a row its predecessor links to. Rows after the tail can only be
// a successor created and not yet linked (appendRow; a crash in between leaves it so until the
// next appender links it), and rows are linked only at the tail and unlinked only before it, so
// a row that was ever linked and has the highest id is the tail. When the row below it is not
// the predecessor that linked it (the GC unlinked that one, and deleted it), this cannot tell
// and says no: the caller scans.
func linkedLastRow(rows []store.Row) (chainRow, bool) {
	if len(rows) == 0 {
		return chainRow{}, false
	}
	last := chainRow{id: rows[0].Key.Sort, attrs: rows[0].Attrs}
	if last.id == headRowID {
		return last, true
	}
	if len(rows) < 2 {
		return chainRow{}, false
	}
	next, _ := rows[1].Attrs[attrNextRow].(string)
	return last, next == last.id
}

// writeFrom drives a write from row r, known to have no row before it that logs the step.
func (rt *Runtime) writeFrom(ctx context.Context, st *store.Table, part string, r chainRow, lk string, w daalWrite) (daalOutcome, error) {
	if out, ok := loggedOutcome(r.attrs, lk); ok {
		return out, nil
	}
	var known store.Attrs
	if _, more := r.attrs[attrNextRow]; (w.when != nil || w.versioned) && !more {
		known = r.attrs
	}
	return rt.tryWrite(ctx, st, part, r.id, known, lk, w)
}

// loggedOutcome returns the step's logged outcome in row a, if it is there.
func loggedOutcome(a store.Attrs, lk string) (daalOutcome, bool) {
	v, ok := store.Lookup(a, store.Attr(attrRecentWrites).Entry(lk))
	if !ok {
		return daalOutcome{}, false
	}
	out := daalOutcome{replayed: true, version: -1}
	switch x := v.(type) {
	case bool:
		out.applied = x
	case int64:
		out.applied, out.version = x > 0, x
		if x < 0 {
			out.version = -x - 1
		}
	}
	return out, true
}

// versionEntry is a versioned write's write-log entry: the version it made (at least 1) if it
// applied, or minus one less the version its condition saw if it did not.
func versionEntry(out daalOutcome) int64 {
	if out.applied {
		return out.version
	}
	return -out.version - 1
}

// itemVersion is the version of the value a row holds (rows written before versions were
// numbered count as version 0).
func itemVersion(a store.Attrs) int64 {
	v, _ := a[attrSeq].(int64)
	return v
}

// tryWrite drives one write to completion from a candidate tail. Each row is in one of Beldi's
// cases (Fig. 7): A, this step is logged here; B, room and no successor (for a conditional write
// B1, condition true, or B2, false: both are logged); C, a successor exists; D, full without a
// successor. The first attempt assumes B; its failure returns the row's state, which says which
// case holds, and since no case leads back to B, the state read stays valid for the decision.
// A conditional write also pins the row version it evaluated the condition against, so the
// logged outcome is the condition's value at the instant of the write.
// cur is the row's state if the caller knows it (a conditional or versioned write's scan,
// projected), else nil.
func (rt *Runtime) tryWrite(ctx context.Context, st *store.Table, part, row string, cur store.Attrs, lk string, w daalWrite) (daalOutcome, error) {
	needsState := w.when != nil || w.versioned
	projected := cur != nil && w.when == nil // lacks what appendRow copies
	for {
		if err := ctx.Err(); err != nil {
			return daalOutcome{}, err
		}
		key := store.Key{Partition: part, Sort: row}
		if cur == nil && needsState {
			a, found, err := st.Get(ctx, key)
			if err != nil {
				return daalOutcome{}, err
			}
			if !found {
				return daalOutcome{}, vanished(ctx, part, row)
			}
			cur, projected = a, false
		}
		if cur == nil || rt.caseB(cur, lk) {
			out, r, err := rt.caseBWrite(ctx, st, key, cur, lk, w)
			if err != nil {
				return daalOutcome{}, err
			}
			if r.Applied {
				return out, nil // case B (B1 or B2)
			}
			if r.Attrs == nil {
				return daalOutcome{}, vanished(ctx, part, row)
			}
			cur, projected = r.Attrs, false
		}
		if out, ok := loggedOutcome(cur, lk); ok {
			return out, nil // case A: a concurrent execution of this step got here first
		}
		if next, ok := cur[attrNextRow].(string); ok {
			row, cur, projected = next, nil, false // case C
			continue
		}
		if n, _ := cur[attrLogSize].(int64); n >= int64(rt.cfg.RowCapacity) {
			if projected {
				a, found, err := st.Get(ctx, key)
				if err != nil {
					return daalOutcome{}, err
				}
				if !found {
					return daalOutcome{}, vanished(ctx, part, row)
				}
				cur = a
			}
			next, err := rt.appendRow(ctx, uncarried(st), part, row, cur) // case D
			if err != nil {
				return daalOutcome{}, err
			}
			row, cur, projected = next, nil, false
			continue
		}
		// Still case B: another write changed the row's version (or the item's) under a
		// write that pinned it. Re-evaluate on the state just returned.
		if !needsState {
			cur = nil
		}
	}
}

// caseBWrite attempts write w as case B on row key, whose state is cur (nil if unknown, for a
// write that needs none): the update logs the step's outcome and, if it applies, makes the
// write's changes, under the condition that the row is still in case B (and, for a write that
// decided on cur, still at cur's version).
func (rt *Runtime) caseBWrite(ctx context.Context, st *store.Table, key store.Key, cur store.Attrs, lk string, w daalWrite) (daalOutcome, store.UpdateResult, error) {
	out, guard, upd := rt.planCaseB(cur, lk, w)
	r, err := st.Update(ctx, key, guard, upd)
	if err != nil {
		return daalOutcome{}, store.UpdateResult{}, err
	}
	if r.Applied {
		out.rowID, out.row = key.Sort, r.Attrs
	}
	return out, r, nil
}

// planCaseB plans write w as case B on a row whose state is cur: the outcome if the update
// applies, the condition that the row is still in case B (and, for a write that decided on cur,
// still at cur's version), and the update.
func (rt *Runtime) planCaseB(cur store.Attrs, lk string, w daalWrite) (daalOutcome, store.Cond, store.Update) {
	w = w.committing(cur)
	out, guard := daalOutcome{applied: true, version: -1}, rt.caseBCond(lk)
	if w.when != nil {
		out.applied = w.when(cur)
		guard = store.And(guard, versionIs(cur))
	}
	if w.versioned {
		out.version = itemVersion(cur)
		if out.applied {
			out.version++
		}
		if w.when == nil {
			guard = store.And(guard, seqIs(cur))
		}
	}
	if w.commitTxValue && out.applied {
		out.committed = w.value
	}
	return out, guard, w.update(lk, out)
}

// caseB reports whether the row, as known, is a tail with room and without this step logged.
func (rt *Runtime) caseB(a store.Attrs, lk string) bool {
	_, logged := loggedOutcome(a, lk)
	_, hasNext := a[attrNextRow]
	n, _ := a[attrLogSize].(int64)
	return !logged && !hasNext && n < int64(rt.cfg.RowCapacity)
}

func (rt *Runtime) caseBCond(lk string) store.Cond {
	return store.And(
		store.RowExists(),
		store.NotExists(store.Attr(attrRecentWrites).Entry(lk)),
		store.Compare(store.Attr(attrLogSize), store.Lt, int64(rt.cfg.RowCapacity)),
		store.NotExists(store.Attr(attrNextRow)),
	)
}

// seqIs pins the item's version a versioned write numbers its value after.
func seqIs(a store.Attrs) store.Cond {
	if v, ok := a[attrSeq].(int64); ok {
		return store.Equal(store.Attr(attrSeq), v)
	}
	return store.NotExists(store.Attr(attrSeq))
}

func versionIs(a store.Attrs) store.Cond {
	if v, ok := a[attrVersion].(int64); ok {
		return store.Equal(store.Attr(attrVersion), v)
	}
	return store.NotExists(store.Attr(attrVersion))
}

// committing turns a commit into the write it is on row state a: the uncommitted value, if a
// holds one, becomes the item's (a numbered version where versions are kept); without one the
// commit only releases the lock.
func (w daalWrite) committing(a store.Attrs) daalWrite {
	if !w.commitTxValue {
		return w
	}
	v, ok := a[attrTxValue].([]byte)
	w.setValue, w.value = ok, v
	w.versioned = w.versioned && ok
	return w
}

// update logs the step's outcome and, when the write applies, makes its changes.
func (w daalWrite) update(lk string, out daalOutcome) store.Update {
	var entry any = out.applied
	if w.versioned {
		entry = versionEntry(out)
	}
	u := store.Update{
		store.AddInt(store.Attr(attrLogSize), 1),
		store.SetAttr(store.Attr(attrRecentWrites).Entry(lk), entry),
		store.AddInt(store.Attr(attrVersion), 1),
	}
	if w.versioned && out.applied {
		u = append(u, store.SetAttr(store.Attr(attrSeq), out.version))
	}
	if !out.applied {
		return u
	}
	switch {
	case w.setValue && w.txValue:
		u = append(u, store.SetAttr(store.Attr(attrTxValue), w.value))
	case w.setValue:
		if bytes.Equal(w.value, []byte("null")) {
			u = append(u, store.RemoveAttr(store.Attr(attrValue)))
		} else {
			u = append(u, store.SetAttr(store.Attr(attrValue), w.value))
		}
	}
	if w.lock != nil {
		if w.lock.owner == "" {
			u = append(u, store.RemoveAttr(store.Attr(attrLockOwner)), store.RemoveAttr(store.Attr(attrLockStart)),
				store.RemoveAttr(store.Attr(attrTxValue)))
		} else {
			u = append(u, store.SetAttr(store.Attr(attrLockOwner), w.lock.owner), store.SetAttr(store.Attr(attrLockStart), w.lock.start))
		}
	}
	return u
}

// appendRow gives the full row `full` a successor and returns the successor's id (case D). The
// successor starts with the full row's value and lock, which are final because the row is full,
// and with the PriorWrites summary of the log keys of every row up to the full one. Creating it
// before linking means a crash in between leaves an unlinked row that the next appender adopts
// (its id is deterministic, its summary as good as any) or that the GC removes.
func (rt *Runtime) appendRow(ctx context.Context, st *store.Table, part, full string, fullAttrs store.Attrs) (string, error) {
	next, err := nextRowID(full)
	if err != nil {
		return "", err
	}
	// The item's current state moves to the successor: its value, its lock and the lock
	// holder's uncommitted value.
	init := store.Update{store.SetAttr(store.Attr(attrLogSize), int64(0)), store.SetAttr(store.Attr(attrVersion), int64(0))}
	for _, a := range []string{attrValue, attrSeq, attrLockOwner, attrLockStart, attrTxValue} {
		if v, ok := fullAttrs[a]; ok {
			init = append(init, store.SetAttr(store.Attr(a), v))
		}
	}
	prior, err := rt.priorWritesThrough(ctx, st, part, full)
	if err != nil {
		return "", err
	}
	if prior != nil {
		init = append(init, store.SetAttr(store.Attr(attrPriorWrites), prior))
	}
	if _, err := st.Update(ctx, store.Key{Partition: part, Sort: next}, store.RowAbsent(), init); err != nil {
		return "", err
	}
	r, err := st.Update(ctx, store.Key{Partition: part, Sort: full},
		store.And(store.RowExists(), store.NotExists(store.Attr(attrNextRow))),
		store.Update{store.SetAttr(store.Attr(attrNextRow), next)})
	if err != nil {
		return "", err
	}
	if r.Applied {
		return next, nil
	}
	if linked, ok := r.Attrs[attrNextRow].(string); ok {
		return linked, nil // a concurrent appender linked it (or the GC bypassed it): follow
	}
	return "", vanished(ctx, part, full)
}

// vanished is the error of a row gone from under a write. Rows a write can reach are deleted
// only T after they were unlinked, so the write's execution outlived its lifetime: its last
// request, let go by the fence before, met the collector's work, harmlessly (docs/protocol.md,
// "Fencing"). Only a live execution finding a row gone means corrupt state.
func vanished(ctx context.Context, part, row string) error {
	if err := checkFence(ctx); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: row %s vanished", ErrCorrupt, part, row)
}

// priorWritesThrough returns the PriorWrites summary of a successor of the full row `full`: the
// log keys of every row of the list up to and including it. Those rows are full (or linked) and
// their logs final, so a scan taken now sees them as they will stay; rows the GC unlinked hold
// only the keys of instances collected or past every execution's lifetime, which no execution
// will write again. It returns nil when the scan does not reach the full row (it is not a
// snapshot on paged stores): the successor then has no summary, and writes to it scan.
func (rt *Runtime) priorWritesThrough(ctx context.Context, st *store.Table, part, full string) ([]byte, error) {
	chain, _, err := rt.scanChain(ctx, st, part, []store.Path{store.Attr(attrNextRow), store.Attr(attrRecentWrites)})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, r := range chain {
		writes, _ := r.attrs[attrRecentWrites].(map[string]any)
		for lk := range writes {
			keys = append(keys, lk)
		}
		if r.id == full {
			return buildPriorWrites(keys), nil
		}
	}
	return nil, nil
}

// ensureHead creates the item's head row, registering the item in the key directory first so
// that the GC can find every DAAL that exists, and returns the head as its creation made it or,
// if it existed, found it (a full row either way).
func (rt *Runtime) ensureHead(ctx context.Context, st *store.Table, part string) (store.Attrs, error) {
	if _, err := st.Update(ctx, directoryKey(rt.cfg.IndexShards, part), store.Always(),
		store.Update{store.SetAttr(store.Attr(attrKind), "daal")}); err != nil {
		return nil, err
	}
	r, err := st.Update(ctx, store.Key{Partition: part, Sort: headRowID}, store.RowAbsent(),
		store.Update{store.SetAttr(store.Attr(attrLogSize), int64(0)), store.SetAttr(store.Attr(attrVersion), int64(0))})
	return r.Attrs, err
}

// MaxInstanceIDLen bounds instance ids (in bytes) so that the write-log space of a row is bounded.
const MaxInstanceIDLen = 100

// MaxItemKeyBytes bounds an item's table name plus key (in bytes) on every store, so that a key
// that works on SQLite also works in the cloud: DynamoDB and Azure Tables allow 1 KiB keys, and
// the runtime's own prefixes and transaction ids share them.
const MaxItemKeyBytes = 512

// intentOverheadBytes is what an intent row holds besides its input and result: the id, the
// caller, the holder, the transaction, the digest, the times (generously).
const intentOverheadBytes = 2048

// MaxInputBytes bounds an instance's input, on every store: the intent row keeps it with the
// result, and leaves room for at least an error result.
const MaxInputBytes = store.PortableMaxRowBytes - intentOverheadBytes - 2048

// maxValueBytes is the largest value that fits in a DAAL row next to a full write log.
func (rt *Runtime) maxValueBytes(table, key string) int {
	perEntry := MaxInstanceIDLen + 40 // "#" incarnation (13 base-36 digits) "#" step, the flag or version, the encoding's overhead
	overhead := len(dataPartition(table, key)) + len(headRowID)*2 + 256 + rt.cfg.RowCapacity*perEntry + maxPriorBytes
	return rt.st.Limits().MaxRowBytes - overhead
}

// evalOnValue evaluates a user condition on a stored JSON value (absent = null).
func evalOnValue(c store.Cond, raw any) bool {
	b, _ := raw.([]byte)
	if len(b) == 0 {
		return c.Eval(nil, true)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	return c.Eval(normalizeNumbers(v), true)
}

// normalizeNumbers turns json.Number into int64 where exact, float64 otherwise, so conditions
// compare numbers the same way on every backend.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}
