package txtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// endItems are the items the participant of overlappingEnds writes in each transaction.
var endItems = []string{"x", "y", "z"}

// stamper is a transaction participant: it reads each item (taking its lock) and writes the
// input there.
func stamper(env *ssf.Env, in json.RawMessage) (any, error) {
	for _, k := range endItems {
		if _, err := env.Read("t", k); err != nil {
			return nil, err
		}
		if err := env.Write("t", k, in); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// discardSink takes provenance exports and keeps none: the test reads records from the logs.
type discardSink struct{}

func (discardSink) Export(context.Context, string, []provenance.Record) error { return nil }
func (discardSink) Close() error                                              { return nil }

// requestCounter counts a driver's store transactions and its write requests (an update, a
// batch, a delete), keeping the optional interfaces the runtime's paths depend on visible.
type requestCounter struct {
	store.Driver
	transactions, writes *atomic.Int64
}

func (c requestCounter) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	c.writes.Add(1)
	return c.Driver.Update(ctx, key, cond, upd)
}

// UpdateBatch is one request where the store batches, one per update otherwise.
func (c requestCounter) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if _, ok := c.Driver.(store.Batcher); !ok {
		return store.UpdateEach(ctx, c, ups)
	}
	c.writes.Add(1)
	return store.UpdateBatch(ctx, c.Driver, ups)
}

func (c requestCounter) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	c.writes.Add(1)
	return c.Driver.Delete(ctx, key, cond)
}

func (c requestCounter) GetProjected(ctx context.Context, key store.Key, proj []store.Path) (store.Attrs, bool, error) {
	return store.GetProjected(ctx, c.Driver, key, proj)
}

func (c requestCounter) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(c.Driver, key, attrs)
}

// transactionCounter is a requestCounter over a store with transactions.
type transactionCounter struct{ requestCounter }

func (c transactionCounter) Transact(ctx context.Context, fn func(store.Driver) error) error {
	c.transactions.Add(1)
	return c.Driver.(store.Transactor).Transact(ctx, fn)
}

// atomicCounter is a requestCounter over a store with all-or-nothing batches.
type atomicCounter struct{ requestCounter }

func (c atomicCounter) UpdateBatchAtomic(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	c.writes.Add(1)
	return c.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, ups)
}

// overlappingEnds ends transactions of one participant SSF from outside (as a workflow does,
// ssf.EndTxRequest): first one end alone, which on a store with transactions must be one store
// transaction however many items it commits (its commits go in its done mark's), and on one with
// all-or-nothing batches one write request besides its request's intent (the commits with the
// done mark) and the removal of that intent's pending-index entry; then rounds in
// which two executions of one end instance and a second end instance of the same transaction
// run at once. Every round must commit each item's value once (one version more, one
// provenance write record per item in the end that applied it), release every lock, and give
// every end the same result.
func overlappingEnds(t suite.T, newStore testtables.Factory) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tbl := newStore(t, "stamper")
	var transactions, writes atomic.Int64
	counted := requestCounter{Driver: tbl.Driver(), transactions: &transactions, writes: &writes}
	_, transactional := tbl.Driver().(store.Transactor)
	_, atomicBatches := tbl.Driver().(store.AtomicBatcher)
	switch {
	case transactional:
		tbl = store.NewTable(transactionCounter{counted}, tbl.Name())
	case atomicBatches:
		tbl = store.NewTable(atomicCounter{counted}, tbl.Name())
	default:
		tbl = store.NewTable(counted, tbl.Name())
	}
	host := local.NewHost()
	host.Logger = quiet
	t.Cleanup(host.Close)
	rt, err := host.Add(ssf.Config{Name: "stamper", Store: tbl, Handler: stamper, Lifetime: time.Hour, GCBound: 2 * time.Hour,
		Logger: quiet, Provenance: provenance.CaptureFull, ProvenanceSink: discardSink{}})
	if err != nil {
		t.Fatal(err)
	}
	// An end's request creates its intent first: one batch, or its two rows one by one.
	creation := int64(2)
	if _, ok := counted.Driver.(store.Batcher); ok {
		creation = 1
	}
	rounds := 4
	for r := range rounds {
		tctx := ssf.TxContext{ID: fmt.Sprintf("ends-%d", r), Start: time.Now().UnixNano(), Mode: ssf.TxExecute}
		value := fmt.Sprintf(`{"round":%d}`, r)
		res, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: fmt.Sprintf("stamp-%d", r), Input: json.RawMessage(value), Tx: &tctx})
		if err != nil || res.Err() != nil {
			t.Fatalf("round %d: participant: %v %v", r, err, res.Err())
		}
		tctx.Mode = ssf.TxCommit
		ends := []string{fmt.Sprintf("end-%d", r)}
		if r > 0 {
			ends = append(ends, ends[0], fmt.Sprintf("end-%d-again", r))
		}
		before, writesBefore := transactions.Load(), writes.Load()
		results := make([]ssf.Result, len(ends))
		errs := make([]error, len(ends))
		var wg sync.WaitGroup
		for i, id := range ends {
			req, err := ssf.EndTxRequest(id, "stamper", tctx)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = rt.Handle(ctx, req)
			}()
		}
		wg.Wait()
		for i := range ends {
			if errs[i] != nil || results[i].Err() != nil {
				t.Fatalf("round %d: end %s: %v %v", r, ends[i], errs[i], results[i].Err())
			}
		}
		if n := transactions.Load() - before; r == 0 && transactional && n != 1 {
			t.Fatalf("an end of %d items took %d store transactions, want 1 (its commits in its done mark's)", len(endItems), n)
		}
		if n := writes.Load() - writesBefore; r == 0 && atomicBatches && n != creation+2 {
			t.Fatalf("an end of %d items took %d write requests, want %d: its intent's creation, its commits with its done mark in one all-or-nothing batch, its pending entry's removal", len(endItems), n, creation+2)
		}
		locks, err := rt.Locks(ctx)
		if err != nil || len(locks) != 0 {
			t.Fatalf("round %d: locks left held: %v %v", r, locks, err)
		}
		items, err := rt.Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		records := map[string]int{}
		for _, id := range slices.Compact(slices.Clone(ends)) {
			rec, found, err := rt.Steps(ctx, id)
			if err != nil || !found {
				t.Fatalf("round %d: steps of %s: found %v, %v", r, id, found, err)
			}
			for _, ev := range rec.Events {
				if ev.Kind != "write" {
					continue
				}
				records[ev.Key]++
				if ev.Version == nil || *ev.Version != int64(r+1) || string(ev.Value) != value {
					t.Errorf("round %d: %s's commit of %s recorded version %v value %s, want %d and %s", r, id, ev.Key, ev.Version, ev.Value, r+1, value)
				}
			}
		}
		for _, k := range endItems {
			if got := string(items["t/"+k]); got != value {
				t.Fatalf("round %d: item %s is %s, want %s", r, k, got, value)
			}
			if records[k] != 1 {
				t.Fatalf("round %d: item %s has %d commit records among the ends, want exactly 1: %v", r, k, records[k], records)
			}
		}
	}
}
