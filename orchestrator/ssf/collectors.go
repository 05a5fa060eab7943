package ssf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// ICReport summarises one intent-collector pass.
type ICReport struct {
	Pending    int // unfinished intents found in the index
	Relaunched int // instances launched again
	Repaired   int // done intents still in the pending index, moved to the finished index
	Orphans    int // index entries whose intent was never created, removed after T
	GaveUp     int // instances given up after Config.MaxAttempts launches, with a failed result
}

// CollectIntents is the intent collector (Beldi §3.3): it launches again every unfinished
// instance whose last launch is older than RelaunchDelay. Re-running an instance that is still
// running is safe (its steps are logged), so the collector needs no coordination; claiming the
// launch with a conditional update only keeps concurrent collectors from doubling the work.
func (rt *Runtime) CollectIntents(ctx context.Context) (ICReport, error) {
	start := time.Now()
	rep, err := rt.collectIntents(ctx)
	rt.collectorMetrics.icPass(time.Since(start), rep, err)
	return rep, err
}

func (rt *Runtime) collectIntents(ctx context.Context) (ICReport, error) {
	ctx = withExec(ctx, rt.cfg.Name, CollectorIC)
	var rep ICReport
	now := rt.now()
	for s := 0; s < rt.cfg.IndexShards; s++ {
		rows, err := rt.st.Scan(ctx, "p|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{store.Attr(attrLaunched), store.Attr(attrAttempts)}})
		if err != nil {
			return rep, err
		}
		for _, row := range rows {
			rep.Pending++
			launched, _ := row.Attrs[attrLaunched].(int64)
			attempts, _ := row.Attrs[attrAttempts].(int64)
			if time.Duration(now-launched) < rt.cfg.RelaunchDelay<<min(attempts, 5) {
				continue
			}
			id := row.Key.Sort
			a, found, err := rt.st.Get(ctx, intentKey(id))
			if err != nil {
				return rep, err
			}
			switch {
			case !found || a[attrVoid] != nil:
				// The creator died or stalled between the index entry and the intent; nobody
				// was told the instance exists. After T its fence stopped it, but its creation
				// may still be in flight: the void makes it fail, so no intent can appear that
				// the index no longer names.
				if time.Duration(now-launched) > rt.cfg.GCBound {
					if !found {
						voided, err := rt.voidIntent(ctx, id)
						if err != nil {
							return rep, err
						}
						if !voided {
							continue // created meanwhile: a live intent, judged on the next pass
						}
					}
					if _, err := rt.st.Delete(ctx, row.Key, store.Equal(store.Attr(attrLaunched), launched)); err != nil {
						return rep, err
					}
					rep.Orphans++
				}
				continue
			case a[attrCollected] != nil:
				// A late delivery of a collected instance re-entered it in the index; its
				// tombstone answered it.
				if _, err := rt.st.Delete(ctx, row.Key, store.Equal(store.Attr(attrLaunched), launched)); err != nil {
					return rep, err
				}
				rep.Repaired++
				continue
			case a[attrDone] == true:
				in, err := decodeIntent(id, a)
				if err != nil {
					return rep, err
				}
				if err := rt.moveToFinished(ctx, in); err != nil {
					return rep, err
				}
				rep.Repaired++
				continue
			}
			if rt.cfg.MaxAttempts > 0 && attempts >= int64(rt.cfg.MaxAttempts) && a[attrBuiltin] == nil && a[attrHoldsLocks] == nil {
				gaveUp, err := rt.giveUp(ctx, id, a, attempts, now)
				if err != nil {
					return rep, err
				}
				if gaveUp {
					rep.GaveUp++
				}
				continue
			}
			claim, err := rt.st.Update(ctx, row.Key, store.Equal(store.Attr(attrLaunched), launched),
				store.Update{store.SetAttr(store.Attr(attrLaunched), now), store.SetAttr(store.Attr(attrAttempts), attempts+1)})
			if err != nil {
				return rep, err
			}
			if !claim.Applied {
				continue // another collector launched it, or it finished
			}
			if err := rt.cfg.Transport.Spawn(ctx, rt.cfg.Name, Request{Kind: KindInvoke, InstanceID: id, Sent: now}); err != nil {
				rt.log.Warn("relaunch failed; next pass retries", "instance", id, "err", err)
				continue
			}
			rt.stats.relaunched.inc()
			rep.Relaunched++
		}
	}
	return rep, nil
}

// giveUp records the failure of an instance the intent collector launched MaxAttempts times
// without it finishing (see recordFailure). Transaction ends (built-ins) and instances that
// take locks of their own are never given up: only finishing them releases the locks. It reports whether the instance was given up now.
func (rt *Runtime) giveUp(ctx context.Context, id string, a store.Attrs, attempts, now int64) (bool, error) {
	reason, _ := a[attrLastError].(string)
	if reason == "" {
		reason = "none recorded (crashes or timeouts)"
	}
	msg := fmt.Sprintf("%v: SSF %s, instance %s: %d launches by the intent collector did not finish it; last error: %s",
		ErrGaveUp, rt.cfg.Name, id, attempts, reason)
	done, err := rt.recordFailure(ctx, id, a, now, msg)
	if done {
		rt.stats.gaveUp.inc()
		rt.log.Error("instance given up: it never finished", "instance", id, "launches", attempts, "last_error", reason)
		rt.reportFailure(ctx, a, Failure{SSF: rt.cfg.Name, InstanceID: id, Error: msg, Launches: int(attempts)})
	}
	return done, err
}

// reportFailure tells Config.OnFailure of a recorded failure; a is the instance's intent.
func (rt *Runtime) reportFailure(ctx context.Context, a store.Attrs, f Failure) {
	if rt.cfg.OnFailure == nil {
		return
	}
	f.Time = rt.clock.Now().UTC()
	if start, _ := a[attrStart].(int64); start > 0 {
		f.FirstExecution = time.Unix(0, start).UTC()
		f.LastExecution = f.FirstExecution
	}
	if last, _ := a[attrLastExec].(int64); last > 0 {
		f.LastExecution = time.Unix(0, last).UTC()
	}
	if err := rt.cfg.OnFailure(ctx, f); err != nil {
		rt.log.Warn("reporting a failed instance (dead letter) failed; its result records the failure", "instance", f.InstanceID, "err", err)
	}
}

// recordFailure makes msg the failed result of an unfinished instance, once no execution of it
// can still be running: none started within T (the creator's start is the intent's, every
// later execution's is claimed on the intent: claimExecution), and T exceeds the lifetime. The
// record is conditional on no execution having claimed a start since the intent was read, so
// a late execution either finds the instance done or keeps it alive. A transaction
// participant's failure aborts its transaction. It reports whether the failure was recorded
// now; false without error means an execution may still run (ask again later).
func (rt *Runtime) recordFailure(ctx context.Context, id string, a store.Attrs, now int64, msg string) (bool, error) {
	in, err := decodeIntent(id, a)
	if err != nil {
		return false, err
	}
	lastExec, claimed := a[attrLastExec].(int64)
	if time.Duration(now-max(in.start, lastExec)) <= rt.cfg.GCBound {
		return false, nil
	}
	res := Result{Error: msg}
	if in.tx != nil {
		res.TxAborted = true // the caller's transaction aborts; its end releases the locks
	}
	b, err := json.Marshal(res)
	if err != nil {
		return false, err
	}
	unclaimed := store.NotExists(store.Attr(attrLastExec))
	if claimed {
		unclaimed = store.Equal(store.Attr(attrLastExec), lastExec)
	}
	cond := store.And(store.Equal(store.Attr(attrDone), false), store.Equal(store.Attr(attrStart), in.start), unclaimed)
	rs, err := rt.st.UpdateBatch(ctx, []store.BatchUpdate{
		{Key: intentKey(id), Cond: cond, Update: store.Update{store.SetAttr(store.Attr(attrDone), true), store.SetAttr(store.Attr(attrResult), b)}},
		rt.finishedEntry(in),
	})
	if err != nil || !rs[0].Applied {
		return false, err
	}
	if err := rt.removePending(ctx, id); err != nil {
		return true, err
	}
	if in.caller != nil && !in.async {
		// After the record, so the caller can only ever hear this outcome; if this callback is
		// lost, the caller's re-execution asks again and is answered the same.
		if err := rt.callback(ctx, *in.caller, id, res); err != nil {
			rt.log.Warn("callback of a failed instance failed; the caller will ask again", "instance", id, "err", err)
		}
	}
	return true, nil
}

// voidIntent marks the intent row of an instance whose creation never landed, unless it was
// created meanwhile, and reports whether the row is void. A creation still in flight from an
// execution fenced off since then fails against it; a request that starts later replaces it.
func (rt *Runtime) voidIntent(ctx context.Context, id string) (bool, error) {
	r, err := rt.st.Update(ctx, intentKey(id), store.RowAbsent(), store.Update{store.SetAttr(store.Attr(attrVoid), rt.now())})
	if err != nil {
		return false, err
	}
	return r.Applied || r.Attrs[attrVoid] != nil, nil
}

// GCReport summarises one garbage-collector pass.
type GCReport struct {
	Stamped        int // finished intents given a finish time
	Recyclable     int // intents finished more than T ago
	Held           int // intents finished more than T ago but kept: their holder may still re-send the request
	Abandoned      int // unfinished instances whose holder closed, recorded as failed (ErrAbandoned)
	Adopted        int // unfinished instances whose holder closed that take locks, handed to the intent collector
	LogRowsDeleted int // read- and invoke-log entries removed
	Disconnected   int // DAAL rows unlinked from their list
	Dangling       int // unreachable DAAL rows given a dangle time
	RowsDeleted    int // unreachable DAAL rows deleted T after they dangled
	IntentsRemoved int // intents replaced by tombstones (last)
	KeysExpired    int // tombstones whose result was dropped KeyRetention after collection, with any rows left in their partitions
	KeysForgotten  int // expired keys removed ExpiredKeyRetention after they expired
	Unreported     int // recyclable instances kept because their result could not be called back to their caller
	TxsRemoved     int // finished transactions whose records were removed
	Items          int // linked DAALs visited
	Exported       int // instances whose provenance records were exported before their logs were deleted
	// Lag is how long past T the oldest finished instance the pass kept (held by its holder,
	// or unreported) has waited; an export that fails fails the pass.
	Lag time.Duration
}

// CollectGarbage is the garbage collector (Beldi §5, Fig. 10). It relies on the bound T
// (GCBound) on an execution's lifetime, and is safe with concurrent SSF executions, intent
// collectors and other garbage collectors; it needs only at-least-once execution:
//
//  1. stamp finish times on newly finished intents; intents finished more than T ago are
//     recyclable: no execution of them is alive, and none will start;
//  2. delete the read and invoke logs of recyclable intents, and the record and shadow DAALs of
//     the transactions recyclable transaction-end instances ended;
//  3. for each item, unlink non-tail rows whose write-log entries all belong to recyclable or
//     removed intents (the head is never unlinked);
//  4. give rows found unreachable a dangle time, and delete them T later, when no traversal
//     that saw them linked can still be running;
//  5. replace the recyclable intents by tombstones last, so a crash anywhere above leaves them
//     for next time, each after calling its result back to its synchronous caller (kept while
//     that fails); a tombstone answers late requests for the id with the instance's result
//     (never a new run) until KeyRetention passed, and then with ErrKeyExpired until
//     ExpiredKeyRetention passed.
func (rt *Runtime) CollectGarbage(ctx context.Context) (GCReport, error) {
	start := time.Now()
	rep, err := rt.collectGarbage(ctx)
	rt.collectorMetrics.gcPass(time.Since(start), rep, err)
	return rep, err
}

func (rt *Runtime) collectGarbage(ctx context.Context) (GCReport, error) {
	ctx = withExec(ctx, rt.cfg.Name, CollectorGC)
	var rep GCReport
	now := rt.now()
	recyclable := map[string]bool{}
	finishedAt := map[string]int64{} // recyclable instance -> its finish time
	toReport := map[string]bool{}    // recyclable instances that may have a result for a caller
	claims := map[string]string{}    // recyclable instance -> the provenance batch that claimed it
	for s := 0; s < rt.cfg.IndexShards; s++ {
		rows, err := rt.st.Scan(ctx, "f|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{store.Attr(attrFinishTime), store.Attr(attrHolder), store.Attr(attrExportBatch), store.Attr(attrCaller)}})
		if err != nil {
			return rep, err
		}
		// A finish time must not precede the finish: the instances found finished before the
		// scan returned, which may be long after the pass began (a paused collector).
		scanned := rt.now()
		for _, row := range rows {
			fin, ok := row.Attrs[attrFinishTime].(int64)
			if !ok {
				if _, err := rt.st.Update(ctx, row.Key, store.And(store.RowExists(), store.NotExists(store.Attr(attrFinishTime))),
					store.Update{store.SetAttr(store.Attr(attrFinishTime), scanned)}); err != nil {
					return rep, err
				}
				rep.Stamped++
				continue
			}
			if time.Duration(now-fin) <= rt.cfg.GCBound {
				continue
			}
			v, err := rt.judge(ctx, row.Key.Sort, row.Attrs, now)
			if err != nil {
				return rep, err
			}
			if v != entryRecyclable {
				rep.Lag = max(rep.Lag, time.Duration(now-fin)-rt.cfg.GCBound)
			}
			switch v {
			case entryHeld:
				rep.Held++
			case entryAbandoned:
				rep.Abandoned++
			case entryAdopted:
				rep.Adopted++
			case entryRecyclable:
				recyclable[row.Key.Sort] = true
				finishedAt[row.Key.Sort] = fin
				// An entry entered at creation for a holder cannot tell: its intent is read.
				toReport[row.Key.Sort] = row.Attrs[attrCaller] != nil || row.Attrs[attrHolder] != nil
				claims[row.Key.Sort], _ = row.Attrs[attrExportBatch].(string)
			}
		}
	}
	rep.Recyclable = len(recyclable)

	collected, batches, err := rt.collectLogs(ctx, recyclable, claims, &rep)
	if err != nil {
		return rep, err
	}

	gone := &recyclability{rt: rt, recyclable: recyclable, known: map[string]bool{}}
	for s := 0; s < rt.cfg.IndexShards; s++ {
		items, err := rt.st.Scan(ctx, "k|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return rep, err
		}
		for _, item := range items {
			rep.Items++
			if err := rt.collectDAAL(ctx, item.Key.Sort, now, gone, &rep); err != nil {
				return rep, err
			}
		}
	}

	var reportable []string
	for _, id := range collected {
		if toReport[id] {
			reportable = append(reportable, id)
		}
	}
	unreported := rt.reportToCallers(ctx, reportable)
	for _, id := range collected {
		if err, ok := unreported[id]; ok {
			rt.log.Warn("garbage collector: cannot call the result back to the caller; keeping the instance", "instance", id, "err", err)
			rep.Unreported++
			rep.Lag = max(rep.Lag, time.Duration(now-finishedAt[id])-rt.cfg.GCBound)
			continue
		}
		// The tombstone is entered in its index first, so that a crash in between leaves an
		// entry for a live intent (forgotten later: the intent is checked), never a tombstone
		// that is never forgotten.
		collected := rt.now()
		if _, err := rt.st.Update(ctx, tombstoneKey(rt.cfg.IndexShards, id, collected), store.Always(),
			store.Update{store.SetAttr(store.Attr(attrKind), "tombstone")}); err != nil {
			return rep, err
		}
		if _, err := rt.st.Update(ctx, intentKey(id), store.Always(), tombstone(collected)); err != nil {
			return rep, err
		}
		if _, err := rt.st.Delete(ctx, finishedKey(rt.cfg.IndexShards, id), store.Always()); err != nil {
			return rep, err
		}
		rep.IntentsRemoved++
	}
	if err := rt.forgetBatches(ctx, batches); err != nil {
		return rep, err
	}
	if err := rt.expireKeys(ctx, now, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// callbacksAtOnce bounds the requests a garbage collector pass has in flight when it reports to
// callers: a pass may collect thousands of called instances.
const callbacksAtOnce = 16

// A callback batch carries at most this many results, and results of at most this many bytes
// together unless it carries one: hosts take request bodies of 1 MiB (httphost).
const (
	callbackBatchResults = 32
	callbackBatchBytes   = 512 << 10
)

// reportToCallers calls the results of the instances in ids that were called synchronously back
// into their callers' invoke logs, where the callers' re-executions find them once the intents
// are gone (the callee's runtime no longer does it before marking the instance done): one
// request per batch of results to the same caller SSF, several at a time. It returns the
// instances whose report failed, with why; their intents are kept for the next pass.
func (rt *Runtime) reportToCallers(ctx context.Context, ids []string) map[string]error {
	failed := map[string]error{}
	byCaller := map[string][]CalleeResult{}
	var mu sync.Mutex
	fail := func(err error, ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			failed[id] = err
		}
	}
	rt.atOnce(len(ids), func(i int) {
		r, ok, err := rt.toReport(ctx, ids[i])
		if err != nil {
			fail(err, ids[i])
			return
		}
		if ok {
			mu.Lock()
			byCaller[r.Caller.SSF] = append(byCaller[r.Caller.SSF], r)
			mu.Unlock()
		}
	})
	var batches [][]CalleeResult
	for _, caller := range slices.Sorted(maps.Keys(byCaller)) {
		rs := byCaller[caller]
		slices.SortFunc(rs, func(a, b CalleeResult) int { return strings.Compare(a.CalleeID, b.CalleeID) })
		batches = append(batches, callbackBatches(rs)...)
	}
	rt.atOnce(len(batches), func(i int) {
		b := batches[i]
		if err := rt.sendCallback(ctx, b[0].Caller.SSF, Request{Kind: KindCallback, InstanceID: b[0].CalleeID, Results: b}); err != nil {
			ids := make([]string, len(b))
			for j, r := range b {
				ids[j] = r.CalleeID
			}
			fail(err, ids...)
		}
	})
	return failed
}

// callbackBatches splits results to one caller into batches within the batch bounds.
func callbackBatches(rs []CalleeResult) [][]CalleeResult {
	var batches [][]CalleeResult
	var cur []CalleeResult
	size := 0
	for _, r := range rs {
		n := len(r.Result.Output) + len(r.Result.Error)
		if len(cur) > 0 && (len(cur) == callbackBatchResults || size+n > callbackBatchBytes) {
			batches, cur, size = append(batches, cur), nil, 0
		}
		cur, size = append(cur, r), size+n
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// atOnce runs do(0), ..., do(n-1), callbacksAtOnce at a time (one at a time under a
// one-at-a-time fault injector).
func (rt *Runtime) atOnce(n int, do func(i int)) {
	if n < 2 || rt.oneAtATime() {
		for i := range n {
			do(i)
		}
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, callbacksAtOnce)
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			do(i)
		}()
	}
	wg.Wait()
}

// toReport returns what a collected instance reports to its caller: the result of a done
// intent called synchronously. Anything else has nothing to report: no intent (its creation
// never landed), a tombstone (reported before it was made), an asynchronous or callerless
// instance.
func (rt *Runtime) toReport(ctx context.Context, id string) (CalleeResult, bool, error) {
	a, found, err := rt.st.Get(ctx, intentKey(id))
	if err != nil || !found {
		return CalleeResult{}, false, err
	}
	in, err := decodeIntent(id, a)
	if err != nil {
		return CalleeResult{}, false, err
	}
	if in.caller == nil || in.async || !in.done || !in.hasResult || in.collected != 0 {
		return CalleeResult{}, false, nil
	}
	return CalleeResult{CalleeID: id, Callee: rt.cfg.Name, Caller: *in.caller, Result: in.result}, true, nil
}

// tombstone turns an intent into the record that its instance was collected at now: done,
// with its result and nothing else kept.
func tombstone(now int64) store.Update {
	upd := store.Update{store.SetAttr(store.Attr(attrDone), true), store.SetAttr(store.Attr(attrCollected), now)}
	for _, a := range []string{attrArgs, attrCaller, attrCallerID, attrCallerStep, attrTxID, attrTxStart, attrBuiltin, attrHolder, attrVoid} {
		upd = append(upd, store.RemoveAttr(store.Attr(a)))
	}
	return upd
}

// keyBatch is how many entries one pass reads at a time from each shard of a key index.
const keyBatch = 100

// expireKeys turns tombstones collected more than KeyRetention ago into expired keys, oldest
// first, and removes expired keys older than ExpiredKeyRetention. Both indexes are sorted by
// time, so a pass reads only the entries that are due.
func (rt *Runtime) expireKeys(ctx context.Context, now int64, rep *GCReport) error {
	if err := rt.scanDue(ctx, "c|", now, rt.cfg.KeyRetention, func(id string, collected int64) error {
		expired, err := rt.expireKey(ctx, id, collected)
		if expired {
			rep.KeysExpired++
		}
		return err
	}); err != nil {
		return err
	}
	return rt.scanDue(ctx, "e|", now, rt.cfg.ExpiredKeyRetention, func(id string, expiredAt int64) error {
		_, err := rt.st.Delete(ctx, intentKey(id), store.Equal(store.Attr(attrExpired), expiredAt))
		if err == nil {
			rep.KeysForgotten++
		}
		return err
	})
}

// scanDue calls due for every entry of the time-sorted index prefix|SHARD that is older than
// age, oldest first, and deletes the entry after due returned.
func (rt *Runtime) scanDue(ctx context.Context, prefix string, now int64, age time.Duration, due func(id string, at int64) error) error {
	for s := 0; s < rt.cfg.IndexShards; s++ {
		for {
			rows, err := rt.st.Scan(ctx, prefix+strconv.Itoa(s), store.ScanOptions{Limit: keyBatch, Projection: []store.Path{}})
			if err != nil {
				return err
			}
			for _, row := range rows {
				atText, id, ok := strings.Cut(row.Key.Sort, "|")
				at, err := strconv.ParseInt(atText, 10, 64)
				if !ok || err != nil {
					return fmt.Errorf("%w: key index entry %q", ErrCorrupt, row.Key.Sort)
				}
				if time.Duration(now-at) <= age {
					return nil // the rest are younger
				}
				if err := due(id, at); err != nil {
					return err
				}
				if _, err := rt.st.Delete(ctx, row.Key, store.Always()); err != nil {
					return err
				}
			}
			if len(rows) < keyBatch {
				break
			}
		}
	}
	return nil
}

// expireKey turns the instance's tombstone collected at collected (not a later incarnation's
// intent, nor a later tombstone) into an expired key: the result and whatever a straggler left
// in the instance's partition are removed; the id, the input digest and the times stay, so a
// request for the id is still refused (ErrKeyExpired) instead of run. The expired key enters
// its index first: a crash in between leaves an entry for a tombstone, which is checked.
func (rt *Runtime) expireKey(ctx context.Context, id string, collected int64) (bool, error) {
	a, found, err := rt.st.Get(ctx, intentKey(id))
	if err != nil || !found || a[attrCollected] != collected || a[attrExpired] != nil {
		return false, err
	}
	rows, err := rt.st.Scan(ctx, instancePartition(id), store.ScanOptions{Projection: []store.Path{}})
	if err != nil {
		return false, err
	}
	for _, row := range rows {
		if row.Key.Sort == intentSort {
			continue
		}
		if _, err := rt.st.Delete(ctx, row.Key, store.Always()); err != nil {
			return false, err
		}
	}
	expiredAt := rt.now()
	if _, err := rt.st.Update(ctx, expiredKeyIndex(rt.cfg.IndexShards, id, expiredAt), store.Always(),
		store.Update{store.SetAttr(store.Attr(attrKind), "expired")}); err != nil {
		return false, err
	}
	r, err := rt.st.Update(ctx, intentKey(id), store.Equal(store.Attr(attrCollected), collected),
		store.Update{store.SetAttr(store.Attr(attrExpired), expiredAt), store.RemoveAttr(store.Attr(attrResult))})
	return err == nil && r.Applied, err
}

// collectEndedTx removes the record of the transaction that the end instance id ended here.
func (rt *Runtime) collectEndedTx(ctx context.Context, id string, rep *GCReport) error {
	a, found, err := rt.st.Get(ctx, intentKey(id))
	if err != nil || !found {
		return err
	}
	in, err := decodeIntent(id, a)
	if err != nil {
		return err
	}
	if tx := in.endsTx(); tx != "" {
		return rt.collectTx(ctx, tx, rep)
	}
	return nil
}

// collectTx removes what a finished transaction left in this SSF: its record. The instance that
// ended it here is recyclable, so none of the transaction's executions can still run (and write
// the record again): each began before the end did, and T has passed since the end finished.
// Its uncommitted values went with the locks, at the end.
func (rt *Runtime) collectTx(ctx context.Context, txID string, rep *GCReport) error {
	record, err := rt.st.Scan(ctx, txPartition(txID), store.ScanOptions{Projection: []store.Path{}})
	if err != nil {
		return err
	}
	for _, r := range record {
		if _, err := rt.st.Delete(ctx, r.Key, store.Always()); err != nil {
			return err
		}
	}
	if len(record) > 0 { // none: removed by an earlier pass that died before the instance's logs
		rep.TxsRemoved++
	}
	return nil
}

// entryVerdict is what the garbage collector does with a finished-index entry stamped more
// than T ago.
type entryVerdict int

const (
	entryRecyclable entryVerdict = iota
	entryHeld                    // kept: its holder may still send the request
	entryAbandoned               // its holder closed unfinished: recorded as failed now
	entryAdopted                 // its holder closed unfinished, but it holds locks: handed to the intent collector now
)

// judge decides an entry. An ordinary entry is a done intent, held only while its holder may
// re-send the request. An entry naming a holder was written when the intent was created
// (holderRetries): the instance may be unfinished, and only its holder knows whether it may
// still run.
func (rt *Runtime) judge(ctx context.Context, id string, entry store.Attrs, now int64) (entryVerdict, error) {
	holder, heldIndex := entry[attrHolder].(string)
	if !heldIndex {
		if rt.cfg.Hold == nil {
			return entryRecyclable, nil
		}
		a, found, err := rt.st.Get(ctx, intentKey(id))
		if err != nil || !found {
			return entryRecyclable, err
		}
		if holder, _ = a[attrHolder].(string); holder == "" {
			return entryRecyclable, nil
		}
		return rt.askHolder(ctx, id, holder), nil
	}
	if rt.cfg.Hold == nil {
		rt.log.Warn("garbage collector: instance created for a holder, but no Config.Hold to ask it; keeping it", "instance", id, "holder", holder)
		return entryHeld, nil
	}
	if v := rt.askHolder(ctx, id, holder); v == entryHeld {
		return v, nil
	}
	a, found, err := rt.st.Get(ctx, intentKey(id))
	if err != nil || !found || a[attrDone] == true || a[attrVoid] != nil {
		// Absent: its creator died before the intent, and no retry will come; the tombstone
		// this entry gets fences a creation still in flight.
		return entryRecyclable, err
	}
	if a[attrHoldsLocks] == true {
		// The holder closed with the instance unfinished, but it takes locks: only finishing it
		// releases them. The intent collector finishes it once.
		r, err := rt.st.Update(ctx, pendingKey(rt.cfg.IndexShards, id), store.RowAbsent(), store.Update{store.SetAttr(store.Attr(attrLaunched), int64(0))})
		if err != nil || !r.Applied {
			return entryHeld, err
		}
		return entryAdopted, nil
	}
	// The holder closed with the instance unfinished (an activity timed out for good, a
	// workflow terminated or reset): the workflow went on without its result (a saga may have
	// compensated), so it must never take effect later. It is recorded as failed once no
	// execution of it can still run, and collected on a later pass.
	msg := fmt.Sprintf("%v: SSF %s, instance %s: its holder %s closed without its result", ErrAbandoned, rt.cfg.Name, id, holder)
	abandoned, err := rt.recordFailure(ctx, id, a, now, msg)
	if err != nil || !abandoned {
		return entryHeld, err
	}
	rt.log.Warn("instance abandoned: its holder closed without its result", "instance", id, "holder", holder)
	rt.reportFailure(ctx, a, Failure{SSF: rt.cfg.Name, InstanceID: id, Error: msg})
	return entryAbandoned, nil
}

// askHolder asks Config.Hold whether the instance's holder may still send its request.
func (rt *Runtime) askHolder(ctx context.Context, id, holder string) entryVerdict {
	held, err := rt.cfg.Hold(ctx, holder)
	if err != nil {
		rt.log.Warn("garbage collector: cannot tell whether the instance's holder is done; keeping it", "instance", id, "holder", holder, "err", err)
		return entryHeld
	}
	if held {
		return entryHeld
	}
	return entryRecyclable
}

// recyclability answers whether a write-log entry's instance can no longer be running: it is
// recyclable in this pass, or its intent is a tombstone, gone, or a later incarnation's (an
// instance writes only after its intent exists).
type recyclability struct {
	rt         *Runtime
	recyclable map[string]bool
	known      map[string]bool // by logKey instance id and incarnation
}

func (g *recyclability) of(ctx context.Context, id, incarnation string) (bool, error) {
	if g.recyclable[id] {
		return true, nil
	}
	k := id + "#" + incarnation
	if r, ok := g.known[k]; ok {
		return r, nil
	}
	a, found, err := g.rt.st.Get(ctx, intentKey(id))
	if err != nil {
		return false, err
	}
	gone := !found || a[attrCollected] != nil || a[attrVoid] != nil
	if !gone {
		start, _ := a[attrStart].(int64)
		gone = incarnationOf(start) != incarnation
	}
	g.known[k] = gone
	return gone, nil
}

func (rt *Runtime) collectDAAL(ctx context.Context, part string, now int64, gone *recyclability, rep *GCReport) error {
	chain, all, err := rt.scanChain(ctx, rt.st, part, []store.Path{store.Attr(attrNextRow), store.Attr(attrRecentWrites), store.Attr(attrDangleTime)})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			rt.stats.corruptions.inc()
			rt.log.Error("skipping corrupt linked DAAL", "partition", part, "err", err)
			return nil
		}
		return err
	}
	if len(chain) == 0 {
		return nil
	}
	rt.collectorMetrics.daalLength(len(chain))
	// Rows found unreachable became so before the scan returned: their dangle time is taken
	// after it, however long the pass was paused before.
	scanned := rt.now()
	// The last row of the skeleton is the tail, or (if the scan missed rows appended since) a
	// row before it: treating it as the tail only makes the GC more conservative.
	tail := chain[len(chain)-1].id
	reachable := make(map[string]bool, len(chain))
	for _, r := range chain {
		reachable[r.id] = true
	}

	// Step 4 first, on the rows this scan found unreachable. Only rows before the tail count:
	// a row after it may be a successor being linked right now. A row before the tail that is
	// unreachable can never be linked again (only the tail gains a successor), so its dangle
	// time is never set on a row that a new traversal could reach.
	for _, r := range all {
		id := r.Key.Sort
		if reachable[id] || id >= tail {
			continue
		}
		dangled, ok := r.Attrs[attrDangleTime].(int64)
		if !ok {
			if _, err := rt.st.Update(ctx, r.Key, store.And(store.RowExists(), store.NotExists(store.Attr(attrDangleTime))),
				store.Update{store.SetAttr(store.Attr(attrDangleTime), scanned)}); err != nil {
				return err
			}
			rep.Dangling++
			continue
		}
		if time.Duration(now-dangled) > rt.cfg.GCBound {
			deleted, err := rt.st.Delete(ctx, r.Key, store.Equal(store.Attr(attrDangleTime), dangled))
			if err != nil {
				return err
			}
			if deleted {
				rep.RowsDeleted++
			}
		}
	}

	// Step 3: unlink non-head, non-tail rows whose entries are all recyclable. The predecessor
	// is pinned with a condition on its NextRow, so a concurrent change makes this a no-op.
	if len(chain) < 3 {
		return nil // only a head and maybe a tail: nothing to unlink
	}
	prev := chain[0]
	for _, r := range chain[1 : len(chain)-1] {
		collectible, err := rt.allRecyclable(ctx, r.attrs, gone)
		if err != nil {
			return err
		}
		next, _ := r.attrs[attrNextRow].(string)
		if !collectible {
			prev = r
			continue
		}
		res, err := rt.st.Update(ctx, store.Key{Partition: part, Sort: prev.id},
			store.Equal(store.Attr(attrNextRow), r.id),
			store.Update{store.SetAttr(store.Attr(attrNextRow), next)})
		if err != nil {
			return err
		}
		if res.Applied {
			rep.Disconnected++
			continue // prev now points past r
		}
		prev = r
	}
	return nil
}

func (rt *Runtime) allRecyclable(ctx context.Context, a store.Attrs, gone *recyclability) (bool, error) {
	writes, _ := a[attrRecentWrites].(map[string]any)
	for lk := range writes {
		id, incarnation := logKeyInstance(lk)
		ok, err := gone.of(ctx, id, incarnation)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
