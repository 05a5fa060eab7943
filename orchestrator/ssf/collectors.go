package ssf

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// ICReport summarises one intent-collector pass.
type ICReport struct {
	Pending    int // unfinished intents found in the index
	Relaunched int // instances launched again
	Repaired   int // done intents still in the pending index, moved to the finished index
	Orphans    int // index entries whose intent was never created, removed after T
}

// CollectIntents is the intent collector (Beldi §3.3): it launches again every unfinished
// instance whose last launch is older than RelaunchDelay. Re-running an instance that is still
// running is safe (its steps are logged), so the collector needs no coordination; claiming the
// launch with a conditional update only keeps concurrent collectors from doubling the work.
func (rt *Runtime) CollectIntents(ctx context.Context) (ICReport, error) {
	ctx = withExec(ctx, rt.cfg.Name, CollectorIC)
	var rep ICReport
	now := rt.now()
	for s := 0; s < rt.cfg.IndexShards; s++ {
		rows, err := rt.st.Scan(ctx, "p|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{store.Attr(attrLaunched)}})
		if err != nil {
			return rep, err
		}
		for _, row := range rows {
			rep.Pending++
			launched, _ := row.Attrs[attrLaunched].(int64)
			if time.Duration(now-launched) < rt.cfg.RelaunchDelay {
				continue
			}
			id := row.Key.Sort
			a, found, err := rt.st.Get(ctx, intentKey(id))
			if err != nil {
				return rep, err
			}
			switch {
			case !found:
				// The creator died between the index entry and the intent. After T it cannot
				// still be creating it; nobody was told the instance exists.
				if time.Duration(now-launched) > rt.cfg.GCBound {
					if _, err := rt.st.Delete(ctx, row.Key, store.Equal(store.Attr(attrLaunched), launched)); err != nil {
						return rep, err
					}
					rep.Orphans++
				}
				continue
			case a[attrDone] == true:
				if err := rt.moveToFinished(ctx, id); err != nil {
					return rep, err
				}
				rep.Repaired++
				continue
			}
			claim, err := rt.st.Update(ctx, row.Key, store.Equal(store.Attr(attrLaunched), launched),
				store.Update{store.SetAttr(store.Attr(attrLaunched), now)})
			if err != nil {
				return rep, err
			}
			if !claim.Applied {
				continue // another collector launched it, or it finished
			}
			if err := rt.cfg.Transport.Spawn(ctx, rt.cfg.Name, Request{Kind: KindInvoke, InstanceID: id}); err != nil {
				rt.log.Warn("relaunch failed; next pass retries", "instance", id, "err", err)
				continue
			}
			rt.stats.relaunched.Add(1)
			rep.Relaunched++
		}
	}
	return rep, nil
}

// GCReport summarises one garbage-collector pass.
type GCReport struct {
	Stamped        int // finished intents given a finish time
	Recyclable     int // intents finished more than T ago
	Held           int // intents finished more than T ago but kept: their holder may still re-send the request
	LogRowsDeleted int // read- and invoke-log entries removed
	Disconnected   int // DAAL rows unlinked from their list
	Dangling       int // unreachable DAAL rows given a dangle time
	RowsDeleted    int // unreachable DAAL rows deleted T after they dangled
	IntentsRemoved int // intents removed (last)
	Items          int // linked DAALs visited
}

// CollectGarbage is the garbage collector (Beldi §5, Fig. 10). It relies on the bound T
// (GCBound) on an execution's lifetime, and is safe with concurrent SSF executions, intent
// collectors and other garbage collectors; it needs only at-least-once execution:
//
//  1. stamp finish times on newly finished intents; intents finished more than T ago are
//     recyclable: no execution of them is alive, and none will start;
//  2. delete the read and invoke logs of recyclable intents;
//  3. for each item, unlink non-tail rows whose write-log entries all belong to recyclable or
//     removed intents (the head is never unlinked);
//  4. give rows found unreachable a dangle time, and delete them T later, when no traversal
//     that saw them linked can still be running;
//  5. remove the recyclable intents last, so a crash anywhere above leaves them for next time.
func (rt *Runtime) CollectGarbage(ctx context.Context) (GCReport, error) {
	ctx = withExec(ctx, rt.cfg.Name, CollectorGC)
	var rep GCReport
	now := rt.now()
	recyclable := map[string]bool{}
	for s := 0; s < rt.cfg.IndexShards; s++ {
		rows, err := rt.st.Scan(ctx, "f|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{store.Attr(attrFinishTime)}})
		if err != nil {
			return rep, err
		}
		for _, row := range rows {
			fin, ok := row.Attrs[attrFinishTime].(int64)
			if !ok {
				if _, err := rt.st.Update(ctx, row.Key, store.And(store.RowExists(), store.NotExists(store.Attr(attrFinishTime))),
					store.Update{store.SetAttr(store.Attr(attrFinishTime), now)}); err != nil {
					return rep, err
				}
				rep.Stamped++
				continue
			}
			if time.Duration(now-fin) <= rt.cfg.GCBound {
				continue
			}
			held, err := rt.held(ctx, row.Key.Sort)
			if err != nil {
				return rep, err
			}
			if held {
				rep.Held++
				continue
			}
			recyclable[row.Key.Sort] = true
		}
	}
	rep.Recyclable = len(recyclable)

	for id := range recyclable {
		rows, err := rt.st.Scan(ctx, instancePartition(id), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return rep, err
		}
		for _, row := range rows {
			if row.Key.Sort == intentSort {
				continue
			}
			if _, err := rt.st.Delete(ctx, row.Key, store.Always()); err != nil {
				return rep, err
			}
			rep.LogRowsDeleted++
		}
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

	for id := range recyclable {
		if _, err := rt.st.Delete(ctx, intentKey(id), store.Always()); err != nil {
			return rep, err
		}
		if _, err := rt.st.Delete(ctx, finishedKey(rt.cfg.IndexShards, id), store.Always()); err != nil {
			return rep, err
		}
		rep.IntentsRemoved++
	}
	return rep, nil
}

// held reports whether a finished instance's holder may still send its request again.
func (rt *Runtime) held(ctx context.Context, id string) (bool, error) {
	if rt.cfg.Hold == nil {
		return false, nil
	}
	a, found, err := rt.st.Get(ctx, intentKey(id))
	if err != nil || !found {
		return false, err
	}
	holder, _ := a[attrHolder].(string)
	if holder == "" {
		return false, nil
	}
	held, err := rt.cfg.Hold(ctx, holder)
	if err != nil {
		rt.log.Warn("garbage collector: cannot tell whether the instance's holder is done; keeping it", "instance", id, "holder", holder, "err", err)
		return true, nil
	}
	return held, nil
}

// recyclability answers whether a write-log entry's instance can no longer be running: it is
// recyclable in this pass, or its intent is already gone (removed by an earlier pass; an
// instance writes only after its intent exists).
type recyclability struct {
	rt         *Runtime
	recyclable map[string]bool
	known      map[string]bool
}

func (g *recyclability) of(ctx context.Context, id string) (bool, error) {
	if g.recyclable[id] {
		return true, nil
	}
	if r, ok := g.known[id]; ok {
		return r, nil
	}
	_, found, err := g.rt.st.Get(ctx, intentKey(id))
	if err != nil {
		return false, err
	}
	g.known[id] = !found
	return !found, nil
}

func (rt *Runtime) collectDAAL(ctx context.Context, part string, now int64, gone *recyclability, rep *GCReport) error {
	chain, all, err := rt.scanChain(ctx, rt.st, part, []store.Path{store.Attr(attrNextRow), store.Attr(attrRecentWrites), store.Attr(attrDangleTime)})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			rt.stats.corruptions.Add(1)
			rt.log.Error("skipping corrupt linked DAAL", "partition", part, "err", err)
			return nil
		}
		return err
	}
	if len(chain) == 0 {
		return nil
	}
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
				store.Update{store.SetAttr(store.Attr(attrDangleTime), now)}); err != nil {
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
		ok, err := gone.of(ctx, logKeyInstance(lk))
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
