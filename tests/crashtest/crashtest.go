// Package crashtest is ssfkit's crash-injection suite. It runs the bank example (three SSFs:
// nested synchronous calls, an asynchronous call that makes a nested synchronous call, reads,
// writes, conditional writes, logged time) while killing executions at injection points: before
// and after every store operation (after = the effect happened but the reply was lost), around
// every call to another SSF and every callback, and before an intent is marked done. Every
// asynchronous start is delivered twice (redelivered, or duplicated concurrently). The intent
// collector then re-runs what was left unfinished, and the suite checks that the final state and
// every request's result equal those of one clean run, that the application's invariants hold,
// and that the garbage collector, run past the bound T, removes every log without changing state,
// having exported every instance's provenance exactly once (the SSFs capture it in full): the
// exported record of every request equals a clean run's, however its executions crashed and
// however the garbage collector's passes crashed around the export.
//
// Any store driver can run it: Run takes a factory for empty tables.
package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/provquery"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Options tune the suite's cost for slower backends: Stride, Schedules and Transfers. The store
// matrix's rows carry them (testtables.Backends).
type Options = testtables.CrashOptions

// Run runs the whole suite against tables from newStore.
func Run(t suite.T, newStore testtables.Factory, opts Options) {
	if opts.Stride < 1 {
		opts.Stride = 1
	}
	if opts.Transfers < 1 {
		opts.Transfers = 24
	}
	suite.Run(t, "EveryPoint", func(t suite.T) { everyPoint(t, newStore, opts.Stride) })
	suite.Run(t, "RandomSchedules", func(t suite.T) { randomSchedules(t, newStore, opts.Schedules) })
	suite.Run(t, "ConcurrentInvariants", func(t suite.T) { concurrentInvariants(t, newStore, opts.Transfers, opts.ConcurrentProvenance) })
}

const (
	lifetime = time.Hour
	gcBound  = 2 * time.Hour
)

type world struct {
	provDB  string            // the SQLite provenance sink the SSFs export to
	batches *crashkit.Batches // what an object store would have kept of the same exports
	host    *local.Host
	rts     map[string]*ssf.Runtime
	inj     *faults.Injector
	clock   *testclock.Manual
	// pipelined submits every request before draining, so re-executions overlap later
	// requests (a crashed write may find its log entry in a row that has since filled up).
	pipelined bool
}

// newWorld makes the bank's SSFs on tables from newStore; with capture, they record their
// provenance in full and export it to an SQLite sink.
func newWorld(t suite.T, newStore testtables.Factory, inj *faults.Injector, sequential, capture bool) *world {
	w := &world{host: local.NewHost(), rts: map[string]*ssf.Runtime{}, inj: inj, clock: testclock.New(time.Unix(1_700_000_000, 0))}
	w.host.Sequential = sequential
	// Every asynchronous start is delivered twice: redelivered after the first copy ran (or
	// crashed) on a sequential host, duplicated concurrently on a concurrent one.
	w.host.SpawnCopies = 2
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	level, sink := provenance.CaptureOff, provenance.Sink(nil)
	if capture {
		w.provDB = filepath.Join(t.TempDir(), "provenance.db")
		db, err := sqlitesink.Open(t.Context(), w.provDB, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		w.batches = crashkit.NewBatches(db)
		sink, level = w.batches, provenance.CaptureFull
	}
	for name, h := range bank.Handlers() {
		rt, err := w.host.Add(ssf.Config{
			Name: name, Store: newStore(t, name), Handler: h, Provenance: level, ProvenanceSink: sink,
			RowCapacity: 2, Lifetime: lifetime, GCBound: gcBound, RelaunchDelay: time.Nanosecond,
			Clock: w.clock, Faults: inj, Logger: quiet,
			MaxAttempts: -1, // injected crashes are not deterministic failures: every instance must finish
		})
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	t.Cleanup(w.host.Close)
	return w
}

// opening has a vault near the int64 limit, so that a deposit can overflow.
var opening = map[string]int64{"alice": 100, "bob": 100, "carol": 100, "vault": math.MaxInt64 - 50}

type outcome struct {
	receipts map[string]bank.Receipt
	items    bank.Items
	crashes  []ssf.FaultPoint
	points   int
}

// run opens the accounts, submits the transfers (one at a time when the host is sequential,
// all at once otherwise) with crash injection on, then lets the intent collectors finish
// everything and returns the results and the final state.
func (w *world) run(t suite.T, transfers []bank.Transfer) outcome {
	ctx := context.Background()
	for a, b := range opening {
		if _, err := w.host.Invoke(ctx, bank.Accounts, "open-"+a, bank.AccountOp{Op: "open", Account: a, Amount: b}); err != nil {
			t.Fatal(err)
		}
	}
	w.inj.Enable(true)
	if w.host.Sequential {
		for i, tr := range transfers {
			crashkit.Submit(t, w.host, w.rts[bank.Teller], transferID(i), tr)
			if !w.pipelined {
				crashkit.Drain(t, w.host, w.clock, w.rts) // the client waits for its result, so requests apply in order
			}
		}
	} else {
		var wg sync.WaitGroup
		for i, tr := range transfers {
			wg.Add(1)
			go func() { defer wg.Done(); crashkit.Submit(t, w.host, w.rts[bank.Teller], transferID(i), tr) }()
		}
		wg.Wait()
	}
	crashkit.Drain(t, w.host, w.clock, w.rts)
	w.inj.Enable(false)
	out := outcome{receipts: map[string]bank.Receipt{}, crashes: w.inj.Crashes(), points: w.inj.Points()}
	for i := range transfers {
		st, err := w.rts[bank.Teller].Intent(ctx, transferID(i))
		if err != nil || !st.Done {
			t.Fatalf("transfer %d not finished after the collectors ran (err %v)", i, err)
		}
		var r bank.Receipt
		if err := json.Unmarshal(st.Result.Output, &r); err != nil {
			t.Fatalf("transfer %d: result %+v: %v", i, st.Result, err)
		}
		out.receipts[transferID(i)] = r
	}
	items, err := bank.Snapshot(ctx, w.rts)
	if err != nil {
		t.Fatal(err)
	}
	out.items = items
	for name, rt := range w.rts {
		if c := rt.Stats().Corruptions; c != 0 {
			t.Fatalf("%s detected %d corruptions", name, c)
		}
	}
	return out
}

// collectAll runs the garbage collectors past T, first with passes crashing at random points
// (a collector needs only at-least-once execution), then cleanly until everything collectible
// is gone, and checks that state is unchanged and logs and rows were reclaimed, and that the
// provenance exported is whole. It returns each request's provenance tree in canonical form.
func (w *world) collectAll(t suite.T, o outcome, seed int64) map[string]string {
	ctx := context.Background()
	w.inj.Rearm(seed, 0.05, 30)
	w.inj.Enable(true)
	gcPasses := func(n int) {
		for pass := 0; pass < n; pass++ {
			w.clock.Advance(gcBound + time.Second)
			for _, rt := range w.rts {
				if _, err := rt.CollectGarbage(ctx); err != nil && !errors.Is(err, ssf.ErrCrashed) {
					t.Fatal(err)
				}
			}
		}
	}
	before := len(w.inj.Crashes())
	gcPasses(4) // with crashes
	w.inj.Enable(false)
	if crashed := len(w.inj.Crashes()) - before; crashed == 0 {
		t.Fatalf("no garbage-collector pass crashed; the crash phase tested nothing")
	}
	// Pass 1 stamps finish times, 2 recycles and unlinks, 3 dangles, 4 deletes.
	gcPasses(4)
	after, err := bank.Snapshot(ctx, w.rts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, o.items) {
		t.Fatalf("garbage collection changed state:\nbefore %v\nafter  %v", o.items.Comparable(), after.Comparable())
	}
	for id := range o.receipts {
		if st, _ := w.rts[bank.Teller].Intent(ctx, id); st.Exists {
			t.Fatalf("intent %s survived garbage collection", id)
		}
	}
	for name, rt := range w.rts {
		items, err := rt.Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range items {
			table, key, _ := cut(k)
			shape, err := rt.DAAL(ctx, table, key)
			if err != nil {
				t.Fatal(err)
			}
			if shape.Reachable > 2 || shape.Stored > 2 {
				t.Fatalf("%s %s: linked DAAL still has %d reachable / %d stored rows after GC", name, k, shape.Reachable, shape.Stored)
			}
		}
	}
	if w.provDB == "" {
		return nil
	}
	return w.provenance(t, o)
}

// provenance checks the exported records against the final state and returns each request's
// tree in canonical form: what it did, without the instance ids and times that differ between
// two correct runs.
func (w *world) provenance(t suite.T, o outcome) map[string]string {
	ctx := context.Background()
	db, err := provquery.Open(ctx, w.provDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := provquery.Check(ctx, db); err != nil {
		t.Fatalf("%v\ncrashes: %v", err, o.crashes)
	}
	if err := w.batches.Check(); err != nil {
		t.Fatalf("%v\ncrashes: %v", err, o.crashes)
	}
	// The last version of every item is its value now.
	for name, items := range o.items {
		for k, v := range items {
			table, key, _ := cut(k)
			hist, err := provquery.History(ctx, db, name, table, key)
			if err != nil {
				t.Fatalf("%s %s: %v", name, k, err)
			}
			if last := hist[len(hist)-1]; !bytes.Equal(last.Value, v) {
				t.Fatalf("%s %s: the last exported version (%d, by %s) holds %s, the item %s\ncrashes: %v", name, k, last.Version, last.Writer, last.Value, v, o.crashes)
			}
		}
	}
	trees := map[string]string{}
	for id := range o.receipts {
		n, err := provquery.Tree(ctx, db, id)
		if err != nil {
			t.Fatalf("request %s: %v\ncrashes: %v", id, err, o.crashes)
		}
		var b strings.Builder
		canonical(&b, n, "")
		trees[id] = b.String()
	}
	return trees
}

func canonical(b *strings.Builder, n *provquery.Node, indent string) {
	// Inputs carry the teller's time stamp, which differs between correct runs (as the stamps
	// items do, whose values are left out too); results are compared as receipts.
	fmt.Fprintf(b, "%s%s %s %q tx=%t ends-tx=%t\n", indent, n.SSF, n.Outcome, n.Error, n.TxID != "", n.EndsTx != "")
	children := map[string]*provquery.Node{}
	for _, c := range n.Children {
		children[c.ID] = c
	}
	for _, s := range n.Steps {
		switch s.Kind {
		case "call":
			fmt.Fprintf(b, "%s  %d call %s\n", indent, s.Step, s.Callee)
			if c := children[s.CalleeID]; c != nil {
				canonical(b, c, indent+"    ")
			} else {
				fmt.Fprintf(b, "%s    (no record)\n", indent)
			}
		default:
			v := "-"
			if s.Version != nil {
				v = strconv.FormatInt(*s.Version, 10)
			}
			value := s.Value
			if s.Table == "stamps" {
				value = nil
			}
			fmt.Fprintf(b, "%s  %d %s %s/%s v%s applied=%t %s\n", indent, s.Step, s.Kind, s.Table, s.Key, v, s.Applied, value)
		}
	}
}

func compareProvenance(t suite.T, what string, clean, got map[string]string) {
	t.Helper()
	for id, c := range clean {
		if got[id] != c {
			t.Fatalf("%s: the provenance of request %s differs from a clean run's\nclean:\n%s\ngot:\n%s", what, id, c, got[id])
		}
	}
}

func cut(k string) (string, string, bool) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

func transferID(i int) string { return fmt.Sprintf("transfer-%03d", i) }

var fixedTransfers = []bank.Transfer{
	{From: "alice", To: "bob", Amount: 30},
	{From: "bob", To: "carol", Amount: 500}, // insufficient funds
	{From: "carol", To: "alice", Amount: 50},
	// Refused before any effect, with the reason in the receipt and the ledger: by the
	// teller's check of the payee, and by the withdraw.
	{From: "bob", To: "vault", Amount: 60},  // the vault's balance would overflow
	{From: "dave", To: "alice", Amount: 20}, // no such payer
}

func compare(t suite.T, what string, clean, got outcome) {
	t.Helper()
	if !reflect.DeepEqual(clean.receipts, got.receipts) {
		t.Fatalf("%s: receipts differ from a clean run\nclean %+v\ngot   %+v\ncrashes: %v", what, clean.receipts, got.receipts, got.crashes)
	}
	if c, g := clean.items.Comparable(), got.items.Comparable(); !reflect.DeepEqual(c, g) {
		t.Fatalf("%s: final state differs from a clean run\nclean %v\ngot   %v\ncrashes: %v", what, c, g, got.crashes)
	}
}

func checkInvariants(t suite.T, what string, transfers []bank.Transfer, o outcome) {
	t.Helper()
	byID := map[string]bank.Transfer{}
	for i, tr := range transfers {
		byID[transferID(i)] = tr
	}
	if err := bank.Check(opening, o.receipts, byID, o.items); err != nil {
		t.Fatalf("%s: invariants violated: %v\ncrashes: %v", what, err, o.crashes)
	}
}

// everyPoint crashes a run once at each injection point of the clean run in turn.
func everyPoint(t suite.T, newStore testtables.Factory, stride int) {
	// The points are counted without capture; a run that captures passes more of them (its
	// records' batches), so each of these points is reached in both kinds of run.
	plain := newWorld(t, newStore, faults.At(0), true, false).run(t, fixedTransfers)
	points := plain.points
	cleanWorld := newWorld(t, newStore, faults.At(0), true, true)
	clean := cleanWorld.run(t, fixedTransfers)
	checkInvariants(t, "clean run", fixedTransfers, clean)
	compare(t, "a clean run that captures provenance", plain, clean)
	cleanProvenance := cleanWorld.provenanceAfterGC(t, clean)
	t.Logf("clean run passes %d injection points (%d capturing provenance); crashing at every %d", points, clean.points, stride)
	for k := 1; k <= points; k += stride {
		// The collectors run, and the provenance is checked, at every 25th point (the
		// provenance of every schedule is checked too).
		collect := k%25 == 1 || k == points
		w := newWorld(t, newStore, faults.At(k), true, collect)
		got := w.run(t, fixedTransfers)
		what := fmt.Sprintf("crash at point %d/%d (%v)", k, points, got.crashes)
		if len(got.crashes) != 1 {
			t.Fatalf("%s: expected exactly one crash", what)
		}
		compare(t, what, clean, got)
		checkInvariants(t, what, fixedTransfers, got)
		if collect {
			compareProvenance(t, what, cleanProvenance, w.collectAll(t, got, int64(k)))
		}
	}
}

// randomSchedules runs random transfers with several crashes at random points, seeded.
func randomSchedules(t suite.T, newStore testtables.Factory, schedules int) {
	base := crashkit.Seed(t)
	for s := 0; s < schedules; s++ {
		seed := base + int64(s)
		rng := rand.New(rand.NewSource(seed))
		names := []string{"alice", "bob", "carol"}
		transfers := make([]bank.Transfer, 4+rng.Intn(4))
		for i := range transfers {
			from := rng.Intn(3)
			transfers[i] = bank.Transfer{From: names[from], To: names[(from+1+rng.Intn(2))%3], Amount: 1 + rng.Int63n(120)}
		}
		cleanWorld := newWorld(t, newStore, faults.At(0), true, true)
		clean := cleanWorld.run(t, transfers)
		cleanProvenance := cleanWorld.provenanceAfterGC(t, clean)
		inj := faults.Random(seed, 0.02, 12)
		w := newWorld(t, newStore, inj, true, true)
		got := w.run(t, transfers)
		what := fmt.Sprintf("schedule with seed %d (rerun: SSFKIT_SEED=%d, %d crashes)", seed, seed, len(got.crashes))
		compare(t, what, clean, got)
		checkInvariants(t, what, transfers, got)
		compareProvenance(t, what, cleanProvenance, w.collectAll(t, got, seed))

		inj = faults.Random(seed, 0.03, 12)
		w = newWorld(t, newStore, inj, true, false)
		w.pipelined = true
		got = w.run(t, transfers)
		checkInvariants(t, "pipelined "+what, transfers, got)
		w.collectAll(t, got, seed)
	}
}

// concurrentInvariants submits transfers concurrently with random crashes; the order, and so
// the outcome, varies, but the invariants must hold.
func concurrentInvariants(t suite.T, newStore testtables.Factory, n int, capture bool) {
	seed := crashkit.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	names := []string{"alice", "bob", "carol"}
	transfers := make([]bank.Transfer, n)
	for i := range transfers {
		from := rng.Intn(3)
		transfers[i] = bank.Transfer{From: names[from], To: names[(from+1+rng.Intn(2))%3], Amount: 1 + rng.Int63n(60)}
	}
	inj := faults.Random(seed, 0.01, 20)
	w := newWorld(t, newStore, inj, false, capture)
	got := w.run(t, transfers)
	checkInvariants(t, fmt.Sprintf("concurrent run with seed %d (rerun: SSFKIT_SEED=%d)", seed, seed), transfers, got)
	if capture {
		w.provenanceAfterGC(t, got)
	}
	t.Logf("concurrent run: %d transfers, %d crashes injected", len(transfers), len(got.crashes))
}

// provenanceAfterGC runs clean garbage-collector passes until every instance is exported and
// collected, and returns the requests' provenance as collectAll does.
func (w *world) provenanceAfterGC(t suite.T, o outcome) map[string]string {
	ctx := context.Background()
	for pass := 0; pass < 2; pass++ { // stamp, then export and collect
		w.clock.Advance(gcBound + time.Second)
		for _, rt := range w.rts {
			if _, err := rt.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w.provenance(t, o)
}
