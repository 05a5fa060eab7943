package ssf_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/provquery"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// report asks accounts for a balance and publishes it, once: the second report's conditional
// write fails, and its record says so.
func report(env *ssf.Env, in json.RawMessage) (any, error) {
	bal, err := env.SyncInvoke("accounts", map[string]any{"account": "a", "delta": 0})
	if err != nil {
		return nil, err
	}
	return env.CondWrite("reports", "latest", bal, store.MustParseCond("not exists($)"))
}

// provenanceWorld runs the transactional bank and a reporter with provenance captured at a
// different level per SSF, and exports everything.
type provenanceWorld struct {
	host    *local.Host
	rts     map[string]*ssf.Runtime
	clock   *testclock.Manual
	path    string // the provenance database the SSFs export to
	batches *crashkit.Batches
	marks   map[string]time.Time // the clock after each request
}

// newProvenanceWorld builds the world; faults, if not nil, crashes its executions.
func newProvenanceWorld(t *testing.T, faults ssf.FaultInjector, tables func() *store.Table) *provenanceWorld {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "provenance.db")
	sink, err := sqlitesink.Open(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	batches := crashkit.NewBatches(sink)
	w := &provenanceWorld{batches: batches, host: local.NewHost(), rts: map[string]*ssf.Runtime{}, clock: testclock.New(time.Unix(1_700_000_000, 0)),
		path: path, marks: map[string]time.Time{}}
	t.Cleanup(w.host.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, c := range map[string]struct {
		fn      ssf.Handler
		capture provenance.Capture
	}{
		"accounts": {accounts, provenance.CaptureMetadata},
		"teller":   {teller, provenance.CaptureMetadata},
		"reporter": {report, provenance.CaptureFull},
		"quiet":    {func(env *ssf.Env, in json.RawMessage) (any, error) { return nil, env.Write("t", "k", in) }, provenance.CaptureOff},
	} {
		rt, err := w.host.Add(ssf.Config{Name: name, Store: tables(), Handler: c.fn, RowCapacity: 2, RelaunchDelay: time.Nanosecond,
			Lifetime: lifetime, GCBound: bound, Clock: w.clock, Logger: quiet, Provenance: c.capture, ProvenanceSink: batches, Faults: faults})
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	return w
}

func (w *provenanceWorld) invoke(t *testing.T, name, id string, in any) ssf.Result {
	t.Helper()
	w.clock.Advance(time.Second)
	r, err := w.host.Invoke(context.Background(), name, id, in)
	if err != nil {
		t.Fatal(err)
	}
	w.marks[id] = w.clock.Now()
	return r
}

// export runs the garbage collectors past T until every instance is exported and collected, and
// opens the provenance database for queries, checked for consistency (provquery.Check).
func (w *provenanceWorld) export(t *testing.T) *sql.DB {
	for pass := 0; pass < 2; pass++ {
		w.clock.Advance(bound + time.Second)
		for _, rt := range w.rts {
			if _, err := rt.CollectGarbage(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.batches.Check(); err != nil {
		t.Fatal(err)
	}
	db, err := provquery.Open(context.Background(), w.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := provquery.Check(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestProvenanceRecordsWhatEveryInstanceDid(t *testing.T) {
	ctx := context.Background()
	w := newProvenanceWorld(t, nil, newTable)
	for _, a := range []string{"a", "b"} {
		w.invoke(t, "accounts", "open-"+a, map[string]any{"account": a, "set": 100})
	}
	w.invoke(t, "teller", "t1", transfer{From: "a", To: "b", Amount: 30})
	w.invoke(t, "reporter", "r1", nil)
	w.invoke(t, "teller", "t2", transfer{From: "a", To: "b", Amount: 500}) // aborts: insufficient funds
	w.invoke(t, "reporter", "r2", nil)                                     // its conditional write fails
	w.invoke(t, "quiet", "q1", 1)
	db := w.export(t)

	// The transfer's tree: the teller's calls into its transaction's participants, which
	// read the committed balances and wrote shadows, and the commit that made them versions.
	tree, err := provquery.Tree(ctx, db, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if tree.SSF != "teller" || tree.Outcome != "ok" || len(tree.MissingChildren) != 0 {
		t.Fatalf("t1: %+v", tree)
	}
	// The teller's end of the transaction commits in the teller, which calls the commit in
	// accounts.
	var participants, commits []*provquery.Node
	var walk func(n *provquery.Node)
	walk = func(n *provquery.Node) {
		switch {
		case n.Builtin == "tx-end" && n.SSF == "accounts":
			commits = append(commits, n)
		case n.TxID != "":
			participants = append(participants, n)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(tree)
	if len(participants) != 2 || len(commits) != 1 {
		t.Fatalf("t1 called %d participants and %d commits, want 2 and 1: %+v", len(participants), len(commits), tree.Children)
	}
	if p := participants[0]; p.Caller != "t1" || p.CallerSSF != "teller" || len(p.Steps) == 0 {
		t.Fatalf("participant %+v does not name its caller", p)
	}
	var shadowWrites int
	for _, p := range participants {
		for _, s := range p.Steps {
			if s.Kind == "write" && (!s.Shadow || s.Version != nil) {
				t.Fatalf("a participant's write in the transaction is not to its shadow: %+v", s)
			}
			if s.Kind == "write" {
				shadowWrites++
			}
			if s.Kind == "read" && (s.Shadow || s.Version == nil || *s.Version != 1) {
				t.Fatalf("a participant's read should see the committed version 1: %+v", s)
			}
		}
	}
	if shadowWrites != 2 {
		t.Fatalf("%d shadow writes, want 2", shadowWrites)
	}
	commit := commits[0]
	if commit.EndsTx != participants[0].TxID {
		t.Fatalf("the commit ends %q, the participants ran in %q", commit.EndsTx, participants[0].TxID)
	}
	var committed []string
	for _, s := range commit.Steps {
		if s.Kind == "write" && s.Applied && s.Version != nil {
			committed = append(committed, s.Key+"@"+itoa(*s.Version))
			if s.Digest == "" || s.Value != nil {
				t.Fatalf("accounts captures metadata: a digest and no value, got %+v", s)
			}
		}
	}
	slices.Sort(committed)
	if !slices.Equal(committed, []string{"a@2", "b@2"}) {
		t.Fatalf("the commit wrote %v, want a@2 and b@2", committed)
	}

	// An item's history: who wrote each version and who read it.
	hist, err := provquery.History(ctx, db, "accounts", "bal", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) < 3 || hist[0].Version != 1 || hist[0].Writer.ID != "open-a" || hist[1].Writer.ID != commit.ID {
		t.Fatalf("history of a: %+v", hist)
	}
	if len(hist[0].Readers) != 1 || hist[0].Readers[0].ID != participants[0].ID && hist[0].Readers[0].ID != participants[1].ID {
		t.Fatalf("version 1 of a should be read by t1's participant: %+v", hist[0].Readers)
	}

	// The state at a time: before the transfer, version 1; after it, version 2.
	for _, c := range []struct {
		at   time.Time
		want int64
	}{{w.marks["open-a"], 1}, {w.marks["t1"], 2}} {
		v, ok, err := provquery.StateAt(ctx, db, "accounts", "bal", "a", c.at)
		if err != nil || !ok || v.Version != c.want {
			t.Fatalf("state of a at %v: %+v %v %v, want version %d", c.at, v, ok, err, c.want)
		}
	}
	if _, ok, _ := provquery.StateAt(ctx, db, "accounts", "bal", "a", time.Unix(0, 0)); ok {
		t.Fatal("a had a state before it was opened")
	}

	// The reporter captures in full: values; its second report's condition failed on the
	// version the first made.
	rep, err := provquery.History(ctx, db, "reporter", "reports", "latest")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 1 || rep[0].Writer.ID != "r1" || rep[0].Value == nil || len(rep[0].Readers) != 1 || rep[0].Readers[0].ID != "r2" || rep[0].Readers[0].Applied {
		t.Fatalf("reports/latest: %+v", rep)
	}

	// Taint: everything downstream of a's first version: t1's transaction and what it wrote,
	// the reporter that read the result, ...
	taint, err := provquery.TaintFromWrite(ctx, db, provquery.Item{SSF: "accounts", Table: "bal", Key: "a", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	var tainted []string
	for _, in := range taint.Instances {
		tainted = append(tainted, in.ID)
	}
	for _, want := range []string{"t1", commit.ID, "r1", "r2"} {
		if !slices.Contains(tainted, want) {
			t.Fatalf("taint from a@1 misses %s: %v", want, taint)
		}
	}
	if slices.Contains(tainted, "open-b") || slices.Contains(tainted, "q1") {
		t.Fatalf("taint from a@1 reaches what came before it or never touched it: %v", tainted)
	}
	if !slices.ContainsFunc(taint.Items, func(i provquery.Item) bool { return i.Key == "b" && i.Version == 2 }) {
		t.Fatalf("taint from a@1 misses b@2, which the same transaction wrote: %v", taint.Items)
	}

	// The aborted transfer's participant is recorded as aborted; the SSF that captures nothing
	// left no record.
	var aborted, quiet int
	db.QueryRowContext(ctx, `SELECT count(*) FROM invocations WHERE outcome = 'tx_aborted'`).Scan(&aborted)
	db.QueryRowContext(ctx, `SELECT count(*) FROM invocations WHERE ssf = 'quiet'`).Scan(&quiet)
	if aborted == 0 || quiet != 0 {
		t.Fatalf("%d aborted invocations (want some), %d of the quiet SSF (want none)", aborted, quiet)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// crashAtSecondWriter crashes the execution right after the first update of a row of partition
// by an instance other than the first to update it once armed (the update took effect, its
// reply is lost): in a transaction, the participant locks and writes, then the end commits.
func crashAtSecondWriter(partition string, armed *atomic.Bool) *crashOnce {
	first := ""
	return &crashOnce{match: func(p ssf.FaultPoint) bool {
		if !armed.Load() || p.Op != "update" || !p.After || p.Key.Partition != partition {
			return false
		}
		if first == "" {
			first = p.Instance
		}
		return p.Instance != first
	}}
}

// A transaction's commit of an item whose execution dies right after the write, before the
// write's provenance record is logged, is recorded by the execution that replays the step, with
// the value the commit made (found in the item's row, as no write has come since).
func TestCommitRecordSurvivesACrashAfterTheWrite(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	crash := crashAtSecondWriter("d|bal|a", &armed)
	// Step by step: with all-or-nothing batches the commit and its record are one request.
	w := newProvenanceWorld(t, crash, func() *store.Table { return stepByStep(newTable()) })
	for _, a := range []string{"a", "b"} {
		w.invoke(t, "accounts", "open-"+a, map[string]any{"account": a, "set": 100})
	}
	armed.Store(true)
	if r, err := w.host.Invoke(ctx, "teller", "t1", transfer{From: "a", To: "b", Amount: 30}); err == nil && r.Error == "" {
		t.Fatalf("t1 finished (%+v) through a crash of its commit", r)
	}
	if !crash.done {
		t.Fatal("the commit never crashed: the test tests nothing")
	}
	w.invoke(t, "teller", "t1", transfer{From: "a", To: "b", Amount: 30}) // the re-run replays the commit of a
	if got := balances(t, w.rts["accounts"]); got["bal/a"] != "70" || got["bal/b"] != "130" {
		t.Fatalf("balances %v after the re-run", got)
	}
	db := w.export(t)
	tree, err := provquery.Tree(ctx, db, "t1")
	if err != nil {
		t.Fatal(err)
	}
	shadow, committed := map[string]string{}, map[string]string{}
	var walk func(n *provquery.Node)
	walk = func(n *provquery.Node) {
		for _, s := range n.Steps {
			switch {
			case s.Kind == "write" && s.Shadow:
				shadow[s.Key] = s.Digest
			case s.Kind == "write" && n.Builtin == "tx-end" && s.Applied && s.Version != nil && *s.Version == 2:
				committed[s.Key] = s.Digest
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(tree)
	if len(shadow) != 2 || committed["a"] != shadow["a"] || committed["b"] != shadow["b"] {
		t.Fatalf("the commit recorded %v, want the values the participants wrote, %v", committed, shadow)
	}
}

// Garbage collectors running at once (a schedule that overlaps its passes) export every instance
// in exactly one batch: what a sink that names objects after batches needs.
func TestConcurrentCollectorsExportEachInstanceOnce(t *testing.T) {
	ctx := context.Background()
	w := newProvenanceWorld(t, nil, newTable)
	for _, a := range []string{"a", "b"} {
		w.invoke(t, "accounts", "open-"+a, map[string]any{"account": a, "set": 1000})
	}
	for i := range 40 {
		w.invoke(t, "teller", "t"+itoa(int64(i)), transfer{From: "a", To: "b", Amount: 1})
	}
	for round := range 3 {
		w.clock.Advance(bound + time.Second)
		var wg sync.WaitGroup
		for range 4 {
			for _, rt := range w.rts {
				wg.Go(func() {
					if _, err := rt.CollectGarbage(ctx); err != nil {
						t.Errorf("round %d: %v", round, err)
					}
				})
			}
		}
		wg.Wait()
	}
	db := w.export(t)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM invocations WHERE ssf = 'teller' AND builtin IS NULL`).Scan(&n); err != nil || n != 40 {
		t.Fatalf("%d transfers exported (%v), want 40", n, err)
	}
}
