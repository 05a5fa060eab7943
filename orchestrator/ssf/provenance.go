package ssf

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

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

// collectLogs deletes the logs of the recyclable instances, exporting their provenance records
// first when the SSF captures provenance: an export that fails stops the pass before anything
// of the batch is deleted, so no record is ever lost (the sink's idempotence absorbs the
// repeat of an export whose reply was lost).
func (rt *Runtime) collectLogs(ctx context.Context, ids []string, rep *GCReport) error {
	for len(ids) > 0 {
		n := min(len(ids), exportBatch)
		batch := ids[:n]
		ids = ids[n:]
		proj := []store.Path{} // keys only
		if rt.capturing() {
			proj = nil
		}
		parts := make([][]store.Row, len(batch))
		var recs []provenance.Record
		for i, id := range batch {
			rows, err := rt.st.Scan(ctx, instancePartition(id), store.ScanOptions{Projection: proj})
			if err != nil {
				return err
			}
			parts[i] = rows
			if !rt.capturing() {
				continue
			}
			rec, ok, err := rt.record(id, rows)
			if err != nil {
				return err
			}
			if ok {
				recs = append(recs, rec)
			}
		}
		if len(recs) > 0 {
			if err := rt.export(ctx, recs); err != nil {
				return err
			}
			rep.Exported += len(recs)
		}
		for _, rows := range parts {
			for _, row := range rows {
				if row.Key.Sort == intentSort {
					continue
				}
				if _, err := rt.st.Delete(ctx, row.Key, store.Always()); err != nil {
					return err
				}
				rep.LogRowsDeleted++
			}
		}
	}
	return nil
}

// export hands records to the sink, with fault points around it like a store request's.
func (rt *Runtime) export(ctx context.Context, recs []provenance.Record) error {
	key := store.Key{Partition: instancePartition(recs[0].Invocation.ID)}
	if err := rt.inject(ctx, "export", key, false); err != nil {
		return err
	}
	start := time.Now()
	if err := rt.cfg.ProvenanceSink.Export(ctx, recs); err != nil {
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
	var intentAttrs store.Attrs
	for _, r := range rows {
		if r.Key.Sort == intentSort {
			intentAttrs = r.Attrs
		}
	}
	if intentAttrs == nil || intentAttrs[attrCollected] != nil || intentAttrs[attrVoid] != nil || intentAttrs[attrDone] != true {
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
	}
	switch {
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
