package sharedlog

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// CollectReport says what a Collect pass did.
type CollectReport struct {
	Tenants        int `json:",omitempty"` // tenants collected (CollectTable)
	RecordsDeleted int // trimmed records (and holes) deleted
	Finished       int // multi-color appends a crashed writer left unfinished, finished
	AppendsDeleted int // rows of finished multi-color and exactly-once appends whose records are all trimmed
}

// Add adds o's counts to r's.
func (r *CollectReport) Add(o CollectReport) {
	r.Tenants += o.Tenants
	r.RecordsDeleted += o.RecordsDeleted
	r.Finished += o.Finished
	r.AppendsDeleted += o.AppendsDeleted
}

// CollectTable runs Collect for every tenant with a log in tbl: what an SSF's garbage collector
// does for the logs in the SSF's table, so that trimmed records go without the application
// scheduling anything. opts are the logs' options (HoleTimeout decides when an unfinished
// multi-color append is the collector's to finish).
func CollectTable(ctx context.Context, tbl *store.Table, opts Options) (CollectReport, error) {
	var rep CollectReport
	tenants, err := Tenants(ctx, tbl)
	if err != nil {
		return rep, err
	}
	for _, tenant := range tenants {
		l, err := New(tbl, tenant, opts)
		if err != nil {
			return rep, err
		}
		r, err := l.Collect(ctx)
		rep.Add(r)
		if err != nil {
			return rep, fmt.Errorf("sharedlog: collecting tenant %s: %w", tenant, err)
		}
		rep.Tenants++
	}
	return rep, nil
}

// Tenants lists the tenants with a log in tbl.
func Tenants(ctx context.Context, tbl *store.Table) ([]string, error) {
	rows, err := tbl.Scan(ctx, tenantKey("").Partition, store.ScanOptions{Projection: []store.Path{store.Attr("since")}})
	if err != nil {
		return nil, fmt.Errorf("sharedlog: listing the table's tenants: %w", err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key.Sort
	}
	return out, nil
}

// Collect is the log's garbage collector, for the tenant: it deletes trimmed records, finishes
// multi-color appends whose writer stopped (older than HoleTimeout), and deletes the rows of
// finished ones once all their records are trimmed (until then they answer retries). Run it
// periodically, like the SSFs' collectors.
func (l *Log) Collect(ctx context.Context) (CollectReport, error) {
	var rep CollectReport
	colors, err := l.Colors(ctx)
	if err != nil {
		return rep, err
	}
	trims := map[string]uint64{}
	for _, color := range colors {
		row, err := l.sequencerRow(ctx, color)
		if err != nil {
			return rep, err
		}
		trims[color] = row.trim
		for sn := row.gc + 1; sn <= row.trim; sn++ {
			deleted, err := l.tbl.Delete(ctx, l.recordKey(color, sn), store.Always())
			if err != nil {
				return rep, err
			}
			if deleted {
				rep.RecordsDeleted++
			}
			l.mu.Lock()
			delete(l.cache, recordID{color, sn})
			l.mu.Unlock()
		}
		if row.trim > row.gc {
			if _, err := l.tbl.Update(ctx, l.colorKey(color), store.Compare(store.Attr("gc"), store.Lt, int64(row.trim)),
				store.Update{store.SetAttr(store.Attr("gc"), int64(row.trim))}); err != nil {
				return rep, err
			}
		}
	}
	appends, err := l.tbl.Scan(ctx, "m|"+l.tenant, store.ScanOptions{})
	if err != nil {
		return rep, err
	}
	for _, a := range appends {
		id := a.Key.Sort
		if done, _ := a.Attrs["done"].(bool); !done {
			started, _ := a.Attrs["t"].(int64)
			if time.Since(time.UnixMilli(started)) < l.opts.HoleTimeout {
				continue // its writer may still be at work
			}
			if _, err := l.finish(ctx, id, a.Attrs); err != nil {
				return rep, err
			}
			rep.Finished++
			continue
		}
		if allTrimmed(a.Attrs, trims) {
			if _, err := l.tbl.Delete(ctx, a.Key, store.Always()); err != nil {
				return rep, err
			}
			rep.AppendsDeleted++
			l.mu.Lock()
			delete(l.done, id)
			l.mu.Unlock()
		}
	}
	return rep, nil
}

func allTrimmed(row store.Attrs, trims map[string]uint64) bool {
	n, _ := row["n"].(int64)
	colors, _ := row["colors"].(map[string]any)
	sns, _ := row["sns"].(map[string]any)
	for i := range int(n) {
		color, _ := colors[strconv.Itoa(i)].(string)
		sn, _ := sns[strconv.Itoa(i)].(int64)
		if uint64(sn) > trims[color] {
			return false
		}
	}
	return true
}
