package ssf

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// Provenance (Apiary §5) is built from what the protocol logs anyway: the intent row, the
// read-log entries (which also name the item and version read), the invoke-log entries, and a
// record per write queued with the next batch of log entries. A finished instance has them all
// (they are written at the latest with its done mark), so the garbage collector exports them
// just before it deletes them; the sink keeps one record per instance however often that
// export is repeated after crashes.

// exportBatch bounds the instances one export carries (and the rows a pass holds in memory).
const exportBatch = 64

// Exports go in batches, each named and recorded in the table before it is exported, so that
// every sink can keep exactly one copy: an object store names the batch's object after it, a
// database keys rows by instance. A batch row (exportPartition, sort key = the batch's name)
// lists its candidates; each candidate's finished-index entry is claimed for one batch for good
// (attrExportBatch, set only if absent), and a batch's members are the candidates it claimed.
// Members are fixed once every candidate was tried, so a batch exported again (after a crash,
// or by a concurrent collector) carries the same records under the same name. Logs are deleted
// only once their batch is marked exported, so a repeated export never sees them half gone.
const exportPartition = "b|export"

// collectLogs deletes the logs of the recyclable instances, exporting their provenance records
// first when the SSF captures provenance, and returns the instances whose logs it deleted: an
// instance that another collector's batch claimed and has not exported yet is left to it.
func (rt *Runtime) collectLogs(ctx context.Context, recyclable map[string]bool, claims map[string]string, rep *GCReport) (collected []string, finished []string, err error) {
	ids := make([]string, 0, len(recyclable))
	for id := range recyclable {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if !rt.capturing() {
		return ids, nil, rt.deleteLogs(ctx, ids, rep)
	}
	exported := map[string]bool{} // batches known exported
	// Finish the batches earlier passes (or a concurrent one) recorded and did not export.
	pending, err := rt.st.Scan(ctx, exportPartition, store.ScanOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, b := range pending {
		if b.Attrs[attrExported] != true {
			members, err := rt.claimBatch(ctx, b.Key.Sort, candidatesOf(b.Attrs))
			if err != nil {
				return nil, nil, err
			}
			if err := rt.exportBatch(ctx, b.Key.Sort, members, rep); err != nil {
				return nil, nil, err
			}
		}
		exported[b.Key.Sort] = true
		finished = append(finished, b.Key.Sort)
	}
	var unclaimed []string
	for _, id := range ids {
		if claims[id] == "" {
			unclaimed = append(unclaimed, id)
		}
	}
	for len(unclaimed) > 0 {
		n := min(len(unclaimed), exportBatch)
		name := uuid.NewString()
		cands, _ := json.Marshal(unclaimed[:n])
		if _, err := rt.st.Update(ctx, store.Key{Partition: exportPartition, Sort: name}, store.Always(),
			store.Update{store.SetAttr(store.Attr(attrCandidates), cands)}); err != nil {
			return nil, nil, err
		}
		members, err := rt.claimBatch(ctx, name, unclaimed[:n])
		if err != nil {
			return nil, nil, err
		}
		if err := rt.exportBatch(ctx, name, members, rep); err != nil {
			return nil, nil, err
		}
		for _, id := range unclaimed[:n] {
			if !members[id] {
				delete(claims, id) // claimed by another batch since the scan: asked below
			} else {
				claims[id] = name
			}
		}
		exported[name] = true
		finished = append(finished, name)
		unclaimed = unclaimed[n:]
	}
	for _, id := range ids {
		b := claims[id]
		if b == "" { // lost its claim to a batch recorded after this pass began: find which
			a, found, err := rt.st.Get(ctx, finishedKey(rt.cfg.IndexShards, id))
			if err != nil {
				return nil, nil, err
			}
			if b, _ = a[attrExportBatch].(string); !found || b == "" {
				continue
			}
		}
		if !exported[b] {
			row, found, err := rt.st.Get(ctx, store.Key{Partition: exportPartition, Sort: b})
			if err != nil {
				return nil, nil, err
			}
			if found && row[attrExported] != true {
				continue // its batch is being exported by another collector, which collects it
			}
		}
		collected = append(collected, id)
	}
	return collected, finished, rt.deleteLogs(ctx, collected, rep)
}

// claimBatch claims the candidates for batch name and returns its members: those it claimed,
// now or before.
func (rt *Runtime) claimBatch(ctx context.Context, name string, candidates []string) (map[string]bool, error) {
	members := map[string]bool{}
	for _, id := range candidates {
		r, err := rt.st.Update(ctx, finishedKey(rt.cfg.IndexShards, id),
			store.And(store.RowExists(), store.Or(store.NotExists(store.Attr(attrExportBatch)), store.Equal(store.Attr(attrExportBatch), name))),
			store.Update{store.SetAttr(store.Attr(attrExportBatch), name)})
		if err != nil {
			return nil, err
		}
		if r.Applied {
			members[id] = true
		}
	}
	return members, nil
}

// exportBatch exports the records of a batch's members under its name and marks it exported.
func (rt *Runtime) exportBatch(ctx context.Context, name string, members map[string]bool, rep *GCReport) error {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var recs []provenance.Record
	for _, id := range ids {
		rows, err := rt.st.Scan(ctx, instancePartition(id), store.ScanOptions{})
		if err != nil {
			return err
		}
		rec, ok, err := rt.record(id, rows)
		if err != nil {
			return err
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	// A concurrent collector may have exported this batch since, and then deleted its members'
	// index entries and logs (it deletes only after marking the batch exported): what this one
	// claimed and read may then be short of the batch, and must not replace its export. Read
	// before that mark, it is the whole batch.
	row, found, err := rt.st.Get(ctx, store.Key{Partition: exportPartition, Sort: name})
	if err != nil {
		return err
	}
	if !found || row[attrExported] == true {
		return nil
	}
	if err := rt.export(ctx, name, recs); err != nil {
		return err
	}
	rep.Exported += len(recs)
	_, err = rt.st.Update(ctx, store.Key{Partition: exportPartition, Sort: name}, store.RowExists(),
		store.Update{store.SetAttr(store.Attr(attrExported), true)})
	return err
}

func candidatesOf(a store.Attrs) []string {
	var ids []string
	b, _ := a[attrCandidates].([]byte)
	_ = json.Unmarshal(b, &ids) // written by collectLogs; an unreadable list exports nothing
	return ids
}

// forgetBatches deletes the rows of exported batches whose members are all collected.
func (rt *Runtime) forgetBatches(ctx context.Context, names []string) error {
	for _, name := range names {
		row, found, err := rt.st.Get(ctx, store.Key{Partition: exportPartition, Sort: name})
		if err != nil || !found {
			return err
		}
		done := true
		for _, id := range candidatesOf(row) {
			a, found, err := rt.st.Get(ctx, finishedKey(rt.cfg.IndexShards, id))
			if err != nil {
				return err
			}
			if found && a[attrExportBatch] == name {
				done = false
				break
			}
		}
		if done {
			if _, err := rt.st.Delete(ctx, store.Key{Partition: exportPartition, Sort: name}, store.Equal(store.Attr(attrExported), true)); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteLogs deletes the instances' log rows (all but their intents).
func (rt *Runtime) deleteLogs(ctx context.Context, ids []string, rep *GCReport) error {
	for _, id := range ids {
		rows, err := rt.st.Scan(ctx, instancePartition(id), store.ScanOptions{Projection: []store.Path{store.Attr(attrEndsTx), store.Attr(attrBuiltin)}})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.Key.Sort == intentSort {
				// A transaction's end here: its record goes with the end's logs (the intent stays
				// until they are gone, so a pass that dies in between finds it again).
				if row.Attrs[attrBuiltin] == builtinTxEnd {
					if err := rt.collectEndedTx(ctx, id, rep); err != nil {
						return err
					}
				}
				continue
			}
			// A log entry naming a transaction whose record an owner listed to end it, written by
			// runtimes before owners ended from what they noted in memory: the record goes first.
			if tx, ok := row.Attrs[attrEndsTx].(string); ok {
				if err := rt.collectTx(ctx, tx, rep); err != nil {
					return err
				}
			}
			if _, err := rt.st.Delete(ctx, row.Key, store.Always()); err != nil {
				return err
			}
			rep.LogRowsDeleted++
		}
	}
	return nil
}

// export hands a batch's records to the sink, with fault points around it like a store
// request's. An empty batch is exported too: a sink may have to record that it was.
func (rt *Runtime) export(ctx context.Context, batch string, recs []provenance.Record) error {
	key := store.Key{Partition: exportPartition, Sort: batch}
	if err := rt.inject(ctx, "export", key, false); err != nil {
		return err
	}
	start := time.Now()
	if err := rt.cfg.ProvenanceSink.Export(ctx, batch, recs); err != nil {
		rt.collectorMetrics.exportFailed(ctx)
		return fmt.Errorf("SSF %s: exporting provenance of %d instances (kept until the sink takes them): %w", rt.cfg.Name, len(recs), err)
	}
	rt.collectorMetrics.exported(ctx, len(recs), time.Since(start))
	return rt.inject(ctx, "export", key, true)
}

// record builds an instance's provenance record from its partition's rows; ok is false when
// there is nothing to export (no intent: its creation never landed; or a tombstone: exported
// before it was made).
func (rt *Runtime) record(id string, rows []store.Row) (rec provenance.Record, ok bool, err error) {
	return rt.buildRecord(id, rows, true)
}

// buildRecord is record, for an unfinished instance too unless finished is set (its outcome
// then reads "pending").
func (rt *Runtime) buildRecord(id string, rows []store.Row, finished bool) (rec provenance.Record, ok bool, err error) {
	var intentAttrs store.Attrs
	for _, r := range rows {
		if r.Key.Sort == intentSort {
			intentAttrs = r.Attrs
		}
	}
	if intentAttrs == nil || intentAttrs[attrCollected] != nil || intentAttrs[attrVoid] != nil || finished && intentAttrs[attrDone] != true {
		return rec, false, nil
	}
	in, err := decodeIntent(id, intentAttrs)
	if err != nil {
		return rec, false, err
	}
	inst := provenance.Instance{SSF: rt.cfg.Name, ID: id, Incarnation: in.incarnation()}
	inv := provenance.Invocation{Instance: inst, Async: in.async, Builtin: in.builtin, EndsTx: in.endsTx(),
		Started: in.start, InputDigest: inputDigest(in.args), Outcome: "ok", Error: in.result.Error}
	inv.Finished, _ = intentAttrs[attrFinished].(int64)
	if inv.Finished == 0 {
		// Decided by a collector (given up, abandoned): its last execution is the closest time.
		last, _ := intentAttrs[attrLastExec].(int64)
		inv.Finished = max(in.start, last)
	}
	inv.Holder, _ = intentAttrs[attrHolder].(string)
	if in.caller != nil {
		inv.CallerSSF, inv.CallerID, inv.CallerStep = in.caller.SSF, in.caller.InstanceID, in.caller.Step
	}
	if in.tx != nil {
		inv.TxID = in.tx.ID
	}
	if parts := strings.Split(in.trace, "-"); len(parts) == 4 {
		inv.TraceID = parts[1]
	} else {
		inv.TraceID, _ = intentAttrs[attrTraceID].(string)
	}
	switch {
	case !in.done:
		inv.Outcome = "pending"
	case in.result.TxAborted:
		inv.Outcome = "tx_aborted"
	case in.result.Error != "":
		inv.Outcome = "error"
	}
	if in.result.Output != nil {
		inv.OutputDigest = inputDigest(in.result.Output)
	}
	if rt.cfg.Provenance == provenance.CaptureFull {
		inv.Input, inv.Output = in.args, in.result.Output
	}
	rec.Invocation = inv
	for _, r := range rows {
		kind, step, isLog := strings.Cut(r.Key.Sort, "|")
		if !isLog {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(step, "%d", &n); err != nil {
			return rec, false, fmt.Errorf("%w: log row %s of instance %s", ErrCorrupt, r.Key.Sort, id)
		}
		at, _ := r.Attrs[attrAt].(int64)
		switch kind {
		case "v":
			callee, _ := r.Attrs[attrCallee].(string)
			calleeID, _ := r.Attrs[attrCalleeID].(string)
			rec.Calls = append(rec.Calls, provenance.Call{Step: n, Callee: callee, CalleeID: calleeID, At: at})
		case "r", "w":
			if k, _ := r.Attrs[attrKind].(string); k == kindSQL || k == kindSQLQuery {
				logged, _ := r.Attrs[attrValue].([]byte)
				rec.Events = append(rec.Events, sqlEvent(n, k, logged, at, rt.cfg.Provenance == provenance.CaptureFull))
				continue
			}
			table, isItem := r.Attrs[attrItemTable].(string)
			if !isItem {
				continue // a logged time, random number, external call or transaction step
			}
			ev := provenance.DataEvent{Step: n, Kind: provenance.EventRead, Table: table, At: at}
			ev.Key, _ = r.Attrs[attrItemKey].(string)
			if v, ok := r.Attrs[attrItemVersion].(int64); ok {
				ev.Version = &v
			}
			ev.Shadow, _ = r.Attrs[attrShadow].(bool)
			if kind == "w" {
				ev.Kind = provenance.EventWrite
				ev.Applied, _ = r.Attrs[attrApplied].(bool)
				ev.Digest, _ = r.Attrs[attrDigest].(string)
				ev.Value, _ = r.Attrs[attrWritten].([]byte)
			}
			rec.Events = append(rec.Events, ev)
		}
	}
	sort.Slice(rec.Events, func(i, j int) bool { return rec.Events[i].Step < rec.Events[j].Step })
	sort.Slice(rec.Calls, func(i, j int) bool { return rec.Calls[i].Step < rec.Calls[j].Step })
	return rec, true, nil
}
