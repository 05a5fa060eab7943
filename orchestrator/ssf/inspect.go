package ssf

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// Pending returns how many instances the intent collector has yet to finish, from the
// unfinished-intent index (instances whose holder retries them are not in it: holderRetries).
func (rt *Runtime) Pending(ctx context.Context) (int, error) {
	n := 0
	for s := 0; s < rt.cfg.IndexShards; s++ {
		rows, err := rt.cfg.Store.Scan(ctx, "p|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return 0, err
		}
		n += len(rows)
	}
	return n, nil
}

// IntentStatus is what the intent table says about an instance.
type IntentStatus struct {
	Exists bool   // the intent is registered (the request was accepted) and not collected
	Done   bool   // the instance finished; Result is its outcome
	Result Result //
	// Collected: the instance finished and was garbage-collected: its logs are gone, and only
	// its id and result are remembered (Config.KeyRetention). Exists is false, Done true.
	Collected bool
	// Expired: the collected instance's result was dropped after KeyRetention; its id is still
	// refused (ErrKeyExpired) until ExpiredKeyRetention passed. Collected is set too.
	Expired bool
	// For an unfinished instance: how often the intent collector launched it, and why its
	// latest execution was abandoned, if it recorded why.
	Launches  int
	LastError string
	// Started is when the intent was created (zero once collected).
	Started time.Time
}

// Intent returns the status of an instance. An instance whose intent was garbage-collected
// reads as unknown, with Collected set while its tombstone is kept.
func (rt *Runtime) Intent(ctx context.Context, instanceID string) (IntentStatus, error) {
	return intentStatus(ctx, rt.cfg.Store, rt.cfg.IndexShards, instanceID)
}

// Inspect returns the status of an instance of the SSF whose table tbl is, outside any
// runtime (the ssfkit instance command); the table must use the default index shards.
func Inspect(ctx context.Context, tbl *store.Table, instanceID string) (IntentStatus, error) {
	return intentStatus(ctx, tbl, DefaultIndexShards, instanceID)
}

func intentStatus(ctx context.Context, tbl *store.Table, shards int, instanceID string) (IntentStatus, error) {
	a, found, err := tbl.Get(ctx, intentKey(instanceID))
	if err != nil || !found || a[attrVoid] != nil {
		return IntentStatus{}, err
	}
	in, err := decodeIntent(instanceID, a)
	if err != nil {
		return IntentStatus{}, err
	}
	if in.collected != 0 {
		return IntentStatus{Done: true, Result: in.result, Collected: true, Expired: in.expired != 0}, nil
	}
	st := IntentStatus{Exists: true, Done: in.done, Result: in.result, Started: time.Unix(0, in.start)}
	if !in.done {
		st.LastError, _ = a[attrLastError].(string)
		entry, found, err := tbl.Get(ctx, pendingKey(shards, instanceID))
		if err != nil {
			return st, err
		}
		if found {
			n, _ := entry[attrAttempts].(int64)
			st.Launches = int(n)
		}
	}
	return st, nil
}

// Items returns the current value of every item this SSF has written, keyed "table/key". It
// reads outside any instance (not exactly-once): for inspection, tests and invariant checks.
func (rt *Runtime) Items(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	for s := 0; s < rt.cfg.IndexShards; s++ {
		dir, err := rt.cfg.Store.Scan(ctx, "k|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return nil, err
		}
		for _, d := range dir {
			rest, isItem := strings.CutPrefix(d.Key.Sort, "d|")
			table, key, ok := strings.Cut(rest, "|")
			if !isItem || !ok {
				continue // a transaction's shadow
			}
			v, _, err := rt.readValue(ctx, table, key)
			if err != nil {
				return nil, err
			}
			out[table+"/"+key] = v
		}
	}
	return out, nil
}

// DAALShape describes one item's linked DAAL.
type DAALShape struct {
	Reachable int // rows linked from the head (the list an operation traverses)
	Stored    int // rows stored, including unlinked ones awaiting deletion
}

// DAAL returns the shape of an item's linked DAAL.
func (rt *Runtime) DAAL(ctx context.Context, table, key string) (DAALShape, error) {
	chain, all, err := rt.scanChain(ctx, rt.st, dataPartition(table, key), []store.Path{store.Attr(attrNextRow)})
	return DAALShape{Reachable: len(chain), Stored: len(all)}, err
}

// Locks returns the holder of every item lock currently held, keyed "table/key" (inspection,
// like Items: an item left locked after its transaction ended is a bug).
func (rt *Runtime) Locks(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for s := 0; s < rt.cfg.IndexShards; s++ {
		dir, err := rt.cfg.Store.Scan(ctx, "k|"+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{}})
		if err != nil {
			return nil, err
		}
		for _, d := range dir {
			rest, isItem := strings.CutPrefix(d.Key.Sort, "d|")
			if !isItem {
				continue
			}
			rows, err := rt.cfg.Store.Scan(ctx, d.Key.Sort, store.ScanOptions{Reverse: true, Limit: 1,
				Projection: []store.Path{store.Attr(attrLockOwner)}})
			if err != nil {
				return nil, err
			}
			if len(rows) > 0 {
				if owner, ok := rows[0].Attrs[attrLockOwner].(string); ok {
					out[strings.Replace(rest, "|", "/", 1)] = owner
				}
			}
		}
	}
	return out, nil
}

// InstanceSummary is one instance as the indexes list it (ListInstances).
type InstanceSummary struct {
	ID     string
	Status IntentStatus
}

// ListInstances returns the instances the indexes hold, newest first: the unfinished ones
// and the finished ones not yet collected, at most max of each. It reads outside any instance,
// for inspection (ssfkit dev's console).
func (rt *Runtime) ListInstances(ctx context.Context, max int) ([]InstanceSummary, error) {
	var out []InstanceSummary
	for _, index := range []string{"p|", "f|"} {
		var ids []string
		for s := 0; s < rt.cfg.IndexShards; s++ {
			rows, err := rt.cfg.Store.Scan(ctx, index+strconv.Itoa(s), store.ScanOptions{Projection: []store.Path{}})
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				ids = append(ids, r.Key.Sort)
			}
		}
		var found []InstanceSummary
		for _, id := range ids {
			st, err := intentStatus(ctx, rt.cfg.Store, rt.cfg.IndexShards, id)
			if err != nil {
				return nil, err
			}
			if st.Exists && (index == "p|") != st.Done { // an entry between indexes is listed once
				found = append(found, InstanceSummary{ID: id, Status: st})
			}
		}
		sort.Slice(found, func(i, j int) bool { return found[i].Status.Started.After(found[j].Status.Started) })
		out = append(out, found[:min(len(found), max)]...)
	}
	return out, nil
}

// Steps returns what an instance did so far, from its logs while the garbage collector keeps
// them (finished or not): its provenance record, whose data events and calls carry their
// items, versions and times when the SSF captures provenance. found is false once the logs are
// collected (or the instance is unknown).
func (rt *Runtime) Steps(ctx context.Context, instanceID string) (rec provenance.Record, found bool, err error) {
	rows, err := rt.cfg.Store.Scan(ctx, instancePartition(instanceID), store.ScanOptions{})
	if err != nil {
		return rec, false, err
	}
	return rt.buildRecord(instanceID, rows, false)
}
