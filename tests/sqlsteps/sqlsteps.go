// Package sqlsteps is the adversarial suite of SQL steps (ssf.RunSQL, ssf.QuerySQL) on the
// relational stores: a payments SSF whose transfers run as SQL on the application's own tables
// (accounts, a ledger without a unique key), between item reads and writes, and which calls an
// auditor SSF whose own SQL step writes an audit table (a table without a unique key too), is
// crashed at every injection point, run as overlapping duplicate executions with random
// crashes, and paused at every point of an execution while another finishes the instance and
// the garbage collector reclaims its logs. Every run must end with the state of one clean run:
// the same balances, one ledger and audit row per transfer that moved money, the same items and
// results.
package sqlsteps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

const (
	payments = "payments"
	auditor  = "auditor"
	lifetime = time.Hour
	gcBound  = 2 * time.Hour
)

// Transfer moves Amount (plus the fee item's value) from From to To.
type Transfer struct {
	From, To string
	Amount   int64
}

// Receipt is a transfer's result.
type Receipt struct {
	Balance int64  `json:"balance"`           // From's balance after the transfer
	Refused string `json:"refused,omitempty"` // why no money moved
}

// tables are one world's SQL table names.
type tables struct{ accounts, ledger, audit string }

// handler is the payments SSF: a read-only query, an item read, a transfer as one SQL step
// (which may fail, and the failure is logged), an item write, and a call to the auditor.
func handler(tb tables) ssf.Handler {
	return ssf.Typed(func(env *ssf.Env, in Transfer) (Receipt, error) {
		if in.From == "" { // the setup request
			return Receipt{}, env.Write("config", "fee", fee)
		}
		balance, err := ssf.QuerySQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
			var b int64
			err := tx.QueryRow(ctx, `SELECT balance FROM `+tb.accounts+` WHERE id = $1`, in.From).Scan(&b)
			return b, err
		})
		if err != nil {
			return Receipt{}, err
		}
		var fee int64
		if _, err := env.ReadInto("config", "fee", &fee); err != nil {
			return Receipt{}, err
		}
		if balance < in.Amount {
			return Receipt{Balance: balance, Refused: "insufficient funds"}, env.Write("refusals", env.InstanceID(), balance)
		}
		after, err := ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
			n, err := tx.Exec(ctx, `UPDATE `+tb.accounts+` SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, in.Amount+fee, in.From)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				return 0, errors.New("balance changed: insufficient funds")
			}
			if _, err := tx.Exec(ctx, `UPDATE `+tb.accounts+` SET balance = balance + $1 WHERE id = $2`, in.Amount, in.To); err != nil {
				return 0, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+tb.ledger+` (instance, amount) VALUES ($1, $2)`, env.InstanceID(), in.Amount); err != nil {
				return 0, err
			}
			var b int64
			err = tx.QueryRow(ctx, `SELECT balance FROM `+tb.accounts+` WHERE id = $1`, in.From).Scan(&b)
			return b, err
		})
		var failed *ssf.SQLStepError
		if errors.As(err, &failed) {
			return Receipt{Balance: balance, Refused: failed.Message}, env.Write("refusals", env.InstanceID(), balance)
		}
		if err != nil {
			return Receipt{}, err
		}
		if err := env.Write("receipts", env.InstanceID(), after); err != nil {
			return Receipt{}, err
		}
		// The audit row is another SSF's SQL step, called synchronously.
		if _, err := env.SyncInvoke(auditor, Audit{Transfer: env.InstanceID(), Fee: fee}); err != nil {
			return Receipt{}, err
		}
		return Receipt{Balance: after}, nil
	})
}

// Audit is the auditor's input.
type Audit struct {
	Transfer string `json:"transfer"`
	Fee      int64  `json:"fee"`
}

// auditHandler is the auditor SSF: one SQL step on its own store, in the same database.
func auditHandler(tb tables) ssf.Handler {
	return ssf.Typed(func(env *ssf.Env, in Audit) (bool, error) {
		return ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (bool, error) {
			_, err := tx.Exec(ctx, `INSERT INTO `+tb.audit+` (instance, fee) VALUES ($1, $2)`, in.Transfer, in.Fee)
			return err == nil, err
		})
	})
}

// The workload: transfers that move money, one its source cannot cover (refused after the
// query), and two its source covers without the fee (the SQL step fails, and its failure is
// logged).
var workload = []Transfer{
	{"alice", "bob", 10},   // alice 88, bob 70
	{"bob", "carol", 1000}, // refused by the query
	{"carol", "alice", 39}, // carol 40 < 39 + fee: the transfer step fails
	{"bob", "carol", 30},   // bob 38, carol 70
	{"alice", "carol", 50}, // alice 36, carol 120
	{"carol", "bob", 100},  // carol 18, bob 138
	{"alice", "bob", 35},   // alice 36 < 35 + fee: the transfer step fails
	{"bob", "alice", 60},   // bob 76, alice 96
}

var opening = map[string]int64{"alice": 100, "bob": 60, "carol": 40}

const fee = 2

// world is the payments and auditor SSFs on fresh tables, and fresh SQL tables.
type world struct {
	host  *local.Host
	rt    *ssf.Runtime // payments
	rts   map[string]*ssf.Runtime
	sql   store.SQLTransactor
	tb    tables
	clock *testclock.Manual
}

func newWorld(t suite.T, newStore testtables.Factory, faults ssf.FaultInjector) *world {
	return newCapturingWorld(t, newStore, faults, nil)
}

// newCapturingWorld is newWorld with the SSFs capturing their provenance in full into sink
// (nil: no capture).
func newCapturingWorld(t suite.T, newStore testtables.Factory, faults ssf.FaultInjector, sink provenance.Sink) *world {
	table := newStore(t, payments)
	tr, ok := table.Driver().(store.SQLTransactor)
	if !ok {
		t.Fatalf("%s is not a relational store", table.Name())
	}
	suffix := testtables.Name("t")
	w := &world{host: local.NewHost(), sql: tr, clock: testclock.New(time.Unix(1_700_000_000, 0)),
		tb: tables{accounts: "accounts_" + suffix, ledger: "ledger_" + suffix, audit: "audit_" + suffix}}
	w.exec(t, `CREATE TABLE `+w.tb.accounts+` (id text PRIMARY KEY, balance bigint NOT NULL)`,
		// No unique key: a transfer applied twice shows as two rows.
		`CREATE TABLE `+w.tb.ledger+` (instance text NOT NULL, amount bigint NOT NULL)`,
		`CREATE TABLE `+w.tb.audit+` (instance text NOT NULL, fee bigint NOT NULL)`)
	for id, b := range opening {
		w.exec(t, fmt.Sprintf(`INSERT INTO %s (id, balance) VALUES ('%s', %d)`, w.tb.accounts, id, b))
	}
	w.rts = map[string]*ssf.Runtime{}
	for name, h := range map[string]ssf.Handler{payments: handler(w.tb), auditor: auditHandler(w.tb)} {
		st := table
		if name != payments {
			st = newStore(t, name)
		}
		level := provenance.CaptureOff
		if sink != nil {
			level = provenance.CaptureFull
		}
		rt, err := w.host.Add(ssf.Config{
			Name: name, Store: st, Handler: h, RowCapacity: 2, Provenance: level, ProvenanceSink: sink,
			Lifetime: lifetime, GCBound: gcBound, RelaunchDelay: time.Nanosecond, Clock: w.clock, Faults: faults,
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			MaxAttempts: -1, // injected crashes are not deterministic failures: every instance must finish
		})
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	w.rt = w.rts[payments]
	t.Cleanup(func() {
		w.host.Close()
		w.exec(t, `DROP TABLE `+w.tb.accounts, `DROP TABLE `+w.tb.ledger, `DROP TABLE `+w.tb.audit)
	})
	// The fee is an item, read by an ordinary logged read.
	if _, err := w.host.Invoke(context.Background(), payments, "setup", Transfer{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) exec(t suite.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	err := w.sql.TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
		for _, s := range stmts {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// state is everything a run leaves: the SQL tables, the items and the results.
type state struct {
	Accounts map[string]int64
	Ledger   []string // "instance amount", sorted
	Audit    []string
	Items    map[string]string
	Results  map[string]string
}

func (w *world) state(t suite.T, ids []string) state {
	t.Helper()
	ctx := context.Background()
	s := state{Accounts: map[string]int64{}, Items: map[string]string{}, Results: map[string]string{}}
	err := w.sql.TransactSQL(ctx, true, func(_ store.Driver, c store.SQLConn) error {
		// Every table here is (text, bigint).
		each := func(table string, row func(id string, n int64)) error {
			rows, err := c.Query(ctx, `SELECT * FROM `+table)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				var n int64
				if err := rows.Scan(&id, &n); err != nil {
					return err
				}
				row(id, n)
			}
			return rows.Close()
		}
		if err := each(w.tb.accounts, func(id string, b int64) { s.Accounts[id] = b }); err != nil {
			return err
		}
		for table, into := range map[string]*[]string{w.tb.ledger: &s.Ledger, w.tb.audit: &s.Audit} {
			if err := each(table, func(id string, n int64) { *into = append(*into, fmt.Sprintf("%s %d", id, n)) }); err != nil {
				return err
			}
			sort.Strings(*into)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, err := w.rt.Intent(ctx, id)
		if err != nil || !st.Done {
			t.Fatalf("transfer %s not finished (err %v)", id, err)
		}
		s.Results[id] = fmt.Sprintf("%s|%s", st.Result.Output, st.Result.Error)
	}
	items, err := w.rt.Items(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range items {
		s.Items[k] = string(v)
	}
	for name, rt := range w.rts {
		if c := rt.Stats().Corruptions; c != 0 {
			t.Fatalf("%s detected %d corruptions", name, c)
		}
	}
	return s
}

// diff describes how got differs from want, "" when equal.
func (s state) diff(want state) string {
	a, _ := json.MarshalIndent(s, "", " ")
	b, _ := json.MarshalIndent(want, "", " ")
	if string(a) == string(b) {
		return ""
	}
	return fmt.Sprintf("got\n%s\nwant (one clean run)\n%s", a, b)
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("transfer-%02d", i)
	}
	return out
}

// runSequential submits the transfers one at a time, each finished (by the intent collector
// after crashes) before the next, so the end state is that of one order.
func (w *world) runSequential(t suite.T, transfers []Transfer) {
	for i, tr := range transfers {
		crashkit.Submit(t, w.host, w.rt, ids(len(transfers))[i], tr)
		crashkit.Drain(t, w.host, w.clock, w.rts)
	}
}

// Options size the suite for a backend.
type Options struct {
	Stride int // crash at every Stride-th point
	Rounds int // rounds of overlapping duplicates
}

// Run runs the suite against tables from newStore, which must be relational.
func Run(t suite.T, newStore testtables.Factory, opts Options) {
	transfers := workload
	clean := newWorld(t, newStore, nil)
	clean.runSequential(t, transfers)
	want := clean.state(t, ids(len(transfers)))
	if len(want.Ledger) != 5 || len(want.Items) != 9 {
		t.Fatalf("a clean run moved money %d times and wrote %d items, want 5 and 9 (5 receipts, 3 refusals, the fee):\n%s", len(want.Ledger), len(want.Items), want.diff(state{}))
	}
	suite.Run(t, "EveryCrashPoint", func(t suite.T) { everyCrashPoint(t, newStore, transfers, want, opts.Stride) })
	suite.Run(t, "OverlappingDuplicates", func(t suite.T) { overlapping(t, newStore, transfers, want, opts.Rounds) })
	suite.Run(t, "PausedPastTheBound", func(t suite.T) { paused(t, newStore, transfers, want, opts.Stride) })
}

// everyCrashPoint crashes the k-th injection point of a run, for every k (by stride).
func everyCrashPoint(t suite.T, newStore testtables.Factory, transfers []Transfer, want state, stride int) {
	counter := faults.At(0)
	w := newWorld(t, newStore, counter)
	counter.Enable(true)
	w.runSequential(t, transfers)
	points := counter.Points()
	t.Logf("%d injection points in a clean run; crashing every %d", points, stride)
	for k := 1; k <= points; k += stride {
		inj := faults.At(k)
		w := newWorld(t, newStore, inj)
		inj.Enable(true)
		w.runSequential(t, transfers)
		inj.Enable(false)
		if d := w.state(t, ids(len(transfers))).diff(want); d != "" {
			t.Fatalf("crash at point %d (%+v): %s", k, inj.Crashes(), d)
		}
	}
}

// overlapping delivers every transfer three times at once, with random crashes, so that
// executions of one instance overlap anywhere, and lets the collector finish what crashed.
func overlapping(t suite.T, newStore testtables.Factory, transfers []Transfer, want state, rounds int) {
	seed := crashkit.Seed(t)
	for round := range rounds {
		inj := faults.Random(seed+int64(round), 0.05, -1)
		w := newWorld(t, newStore, inj)
		inj.Enable(true)
		for i, tr := range transfers {
			id := ids(len(transfers))[i]
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { crashkit.Submit(t, w.host, w.rt, id, tr) })
			}
			wg.Wait()
			crashkit.Drain(t, w.host, w.clock, w.rts)
		}
		inj.Enable(false)
		if d := w.state(t, ids(len(transfers))).diff(want); d != "" {
			t.Fatalf("round %d (seed %d, crashes at %+v): %s", round, seed+int64(round), inj.Crashes(), d)
		}
	}
}

// paused stops the first execution of each transfer at its k-th point, for every k, while a
// duplicate runs; when the duplicate finishes without it, the clock passes the execution's
// lifetime and the garbage collector's bound, the collector reclaims the instance's logs, and
// only then the paused execution resumes, and must be fenced off. When the duplicate waits for
// the paused execution (it holds a row lock or SQLite's connection), the paused one resumes
// first. Either way the end state is one clean run's.
func paused(t suite.T, newStore testtables.Factory, transfers []Transfer, want state, stride int) {
	// The points of one transfer's execution, which every k below is taken from.
	counter := faults.At(0)
	w := newWorld(t, newStore, counter)
	counter.Enable(true)
	crashkit.Submit(t, w.host, w.rt, "probe", transfers[0])
	per := counter.Points()
	reclaimed := 0
	for k := 1; k <= per; k += stride {
		pause := newPauseAt(k)
		w := newWorld(t, newStore, pause)
		ctx := context.Background()
		for i, tr := range transfers {
			id := ids(len(transfers))[i]
			pause.arm()
			first := make(chan error, 1)
			var firstResult ssf.Result
			go func() { r, err := w.host.Invoke(ctx, payments, id, tr); firstResult = r; first <- err }()
			select {
			case <-pause.reached:
			case err := <-first: // the execution ended before its k-th point
				pause.disarm()
				if err != nil {
					crashkit.Drain(t, w.host, w.clock, w.rts)
				}
				continue
			}
			second := make(chan error, 1)
			go func() { _, err := w.host.Invoke(ctx, payments, id, tr); second <- err }()
			select {
			case err := <-second:
				if err != nil {
					t.Fatalf("transfer %s: the duplicate of a paused execution failed: %v", id, err)
				}
				// The instance finished without the paused execution: outlive every bound.
				w.clock.Advance(lifetime + gcBound + time.Minute)
				for _, rt := range w.rts {
					if _, err := rt.CollectGarbage(ctx); err != nil {
						t.Fatal(err)
					}
				}
				w.clock.Advance(gcBound + time.Minute)
				for _, rt := range w.rts {
					r, err := rt.CollectGarbage(ctx)
					if err != nil {
						t.Fatal(err)
					}
					reclaimed += r.IntentsRemoved
				}
				pause.release()
				// Fenced off, or (paused before it saw the instance) answered from the result.
				if err := <-first; err == nil {
					st, err := w.rt.Intent(ctx, id)
					if err != nil || string(st.Result.Output) != string(firstResult.Output) {
						t.Fatalf("transfer %s: an execution paused past its lifetime at point %d returned %s, not the instance's result %s (%v)", id, k, firstResult.Output, st.Result.Output, err)
					}
				}
			case <-time.After(250 * time.Millisecond):
				// The duplicate waits for the paused execution's locks.
				pause.release()
				<-first
				if err := <-second; err != nil {
					crashkit.Drain(t, w.host, w.clock, w.rts)
				}
			}
			crashkit.Drain(t, w.host, w.clock, w.rts)
		}
		if d := w.state(t, ids(len(transfers))).diff(want); d != "" {
			t.Fatalf("paused at point %d of each transfer: %s", k, d)
		}
	}
	if reclaimed == 0 {
		t.Fatalf("no paused execution outlived a garbage collection: the test exercised no fence")
	}
	t.Logf("%d points per execution; %d instances reclaimed while an execution of theirs was paused", per, reclaimed)
}

// pauseAt blocks an execution at the k-th injection point it passes once armed, until released.
type pauseAt struct {
	k       int64
	n       atomic.Int64
	armed   atomic.Bool
	reached chan struct{}
	resume  chan struct{}
}

func newPauseAt(k int) *pauseAt { return &pauseAt{k: int64(k)} }

func (p *pauseAt) arm() {
	p.reached, p.resume = make(chan struct{}), make(chan struct{})
	p.n.Store(0)
	p.armed.Store(true)
}

func (p *pauseAt) disarm()  { p.armed.Store(false) }
func (p *pauseAt) release() { close(p.resume) }

// Inject implements ssf.FaultInjector.
func (p *pauseAt) Inject(_ context.Context, fp ssf.FaultPoint) error {
	if !p.armed.Load() || fp.Instance == ssf.CollectorIC || fp.Instance == ssf.CollectorGC {
		return nil
	}
	if p.n.Add(1) == p.k {
		p.armed.Store(false)
		close(p.reached)
		<-p.resume
	}
	return nil
}
