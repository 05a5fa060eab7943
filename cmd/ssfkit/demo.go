package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/local"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

const demoSynopsis = `Runs the bank example (SSFs teller, accounts, audit) on the embedded SQLite
store while killing executions at random points, with the intent and garbage
collectors running on timers, then checks that every transfer was applied
exactly once. Exits with status 1 if an invariant fails.`

// demoTiming is the runtime and collector timing. The defaults make the garbage collector's
// bound T pass within the run, so the demo shows logs being reclaimed; tests shorten them.
type demoTiming struct {
	relaunchDelay, lifetime, gcBound time.Duration
	icEvery, gcEvery                 time.Duration
	// drainTimeout bounds the wait for every request to finish.
	drainTimeout time.Duration
}

var defaultDemoTiming = demoTiming{
	relaunchDelay: 200 * time.Millisecond,
	lifetime:      3 * time.Second,
	gcBound:       4 * time.Second,
	icEvery:       100 * time.Millisecond,
	gcEvery:       time.Second,
	drainTimeout:  60 * time.Second,
}

const (
	openingBalance = 1000
	// maxAmount makes transfers large enough against the opening balance that some are refused.
	maxAmount = 200
)

type demoOptions struct {
	transfers, concurrency, accounts int
	crashRate                        float64
	seed                             uint64
	storeDir                         string
	timing                           demoTiming
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := demoOptions{timing: defaultDemoTiming}
	fs := newFlagSet("demo", demoSynopsis, stderr)
	fs.IntVar(&o.transfers, "transfers", 200, "number of transfers to submit")
	fs.IntVar(&o.concurrency, "concurrency", 8, "number of transfers in flight at once")
	fs.Float64Var(&o.crashRate, "crash-rate", 0.02, "probability of a crash at each injection point, 0 to 1")
	fs.Uint64Var(&o.seed, "seed", 20201104, "seed of the transfers and crash points, to reproduce a run")
	fs.IntVar(&o.accounts, "accounts", 5, "number of accounts, 2 to 1000")
	fs.StringVar(&o.storeDir, "store-dir", "", "keep the SQLite database in `DIR` (default: a temporary directory, removed at exit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return &cliUsageError{err: err}
	}
	return (&demo{opt: o, out: stdout}).run(ctx)
}

func (o demoOptions) validate() error {
	switch {
	case o.transfers < 1 || o.transfers > 100_000:
		return fmt.Errorf("demo: --transfers %d: want 1 to 100000", o.transfers)
	case o.concurrency < 1 || o.concurrency > 1000:
		return fmt.Errorf("demo: --concurrency %d: want 1 to 1000", o.concurrency)
	case o.accounts < 2 || o.accounts > 1000:
		return fmt.Errorf("demo: --accounts %d: want 2 to 1000 (a transfer needs two accounts)", o.accounts)
	case !(o.crashRate >= 0 && o.crashRate <= 1):
		return fmt.Errorf("demo: --crash-rate %v: want a probability from 0 to 1", o.crashRate)
	}
	return nil
}

// demo is one run of the demo.
type demo struct {
	opt   demoOptions
	out   io.Writer
	start time.Time

	app    *bankApp
	teller *ssf.Runtime
	inj    *crashInjector

	accounts  []string
	ids       []string // transfer request ids, in submission order
	transfers map[string]bank.Transfer

	mu        sync.Mutex
	results   map[string]ssf.Result // finished transfers
	accepted  map[string]bool       // accepted, then abandoned: left to the intent collector
	retries   atomic.Int64          // submissions repeated because the request was not accepted
	handedOff atomic.Int64          // accepted transfers whose call failed: the IC finished them

	colMu sync.Mutex
	gc    ssf.GCReport // the fields the summary shows, summed over every round and SSF
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// elapsed is the time since the run started, as a progress-line prefix.
func (d *demo) elapsed() string { return fmt.Sprintf("%5.1fs", time.Since(d.start).Seconds()) }

func (d *demo) run(ctx context.Context) error {
	d.start = time.Now()
	dbPath, cleanup, err := d.storePath()
	if err != nil {
		return err
	}
	defer cleanup()
	tableURL, err := tablePerSSF(sqliteURL(dbPath))
	if err != nil {
		return err
	}
	t := d.opt.timing
	d.inj = newCrashInjector(d.opt.seed, d.opt.crashRate)
	d.app, err = openBankApp(ctx, tableURL, ssf.Config{
		Lifetime: t.lifetime, GCBound: t.gcBound, RelaunchDelay: t.relaunchDelay, Faults: d.inj,
	})
	if err != nil {
		return err
	}
	defer d.app.Close()
	d.teller = d.app.runtimes[bank.Teller]
	d.plan()
	d.header(dbPath)

	if err := d.openAccounts(ctx); err != nil {
		return err
	}
	colCtx, stopCollectors := context.WithCancel(ctx)
	var collectors sync.WaitGroup
	collectors.Go(func() { d.app.host.RunCollectors(colCtx, t.icEvery, t.gcEvery, d.onRound) })
	stop := func() { stopCollectors(); collectors.Wait() }
	defer stop()

	d.printf("\nTransfers\n")
	d.inj.setEnabled(true)
	if err := d.runTransfers(ctx); err != nil {
		return err
	}
	drained := time.Now()
	d.inj.setEnabled(false)
	before, err := bank.Snapshot(ctx, d.app.runtimes)
	if err != nil {
		return err
	}
	shapesBefore, err := d.daalShapes(ctx)
	if err != nil {
		return err
	}

	d.printf("\nGarbage collection (logs go T = %v after their instance finished)\n", t.gcBound)
	reclaimed, err := d.awaitGC(ctx, drained)
	if err != nil {
		return err
	}
	stop()
	after, err := bank.Snapshot(ctx, d.app.runtimes)
	if err != nil {
		return err
	}
	shapesAfter, err := d.daalShapes(ctx)
	if err != nil {
		return err
	}

	d.summary(shapesBefore, shapesAfter, reclaimed)
	d.balances(after)
	if !d.invariants(before, after) {
		return errors.New("demo: invariants violated (see FAIL above)")
	}
	d.printf("\nAll invariants hold (%.1fs).\n", time.Since(d.start).Seconds())
	return nil
}

// storePath returns the database file to create, and a cleanup removing it unless it is kept.
func (d *demo) storePath() (string, func(), error) {
	if d.opt.storeDir == "" {
		dir, err := os.MkdirTemp("", "ssfkit-demo-")
		if err != nil {
			return "", nil, fmt.Errorf("demo: temporary directory for the store: %w", err)
		}
		return filepath.Join(dir, "demo.db"), func() { os.RemoveAll(dir) }, nil
	}
	dir, err := filepath.Abs(d.opt.storeDir)
	if err != nil {
		return "", nil, fmt.Errorf("demo: --store-dir %s: %w", d.opt.storeDir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("demo: --store-dir: %w", err)
	}
	db := filepath.Join(dir, "demo.db")
	if _, err := os.Stat(db); err == nil {
		return "", nil, fmt.Errorf("demo: %s exists from an earlier run; the demo checks its invariants on a fresh store: remove the file or choose another --store-dir", db)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("demo: %w", err)
	}
	return db, func() {}, nil
}

var accountNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}

// plan draws the accounts and transfers from the seed.
func (d *demo) plan() {
	for i := range d.opt.accounts {
		name := fmt.Sprintf("acct%03d", i)
		if i < len(accountNames) {
			name = accountNames[i]
		}
		d.accounts = append(d.accounts, name)
	}
	rng := rand.New(rand.NewPCG(d.opt.seed, 0))
	d.transfers = map[string]bank.Transfer{}
	d.results = map[string]ssf.Result{}
	d.accepted = map[string]bool{}
	width := len(fmt.Sprint(d.opt.transfers))
	for i := range d.opt.transfers {
		from := rng.IntN(len(d.accounts))
		to := (from + 1 + rng.IntN(len(d.accounts)-1)) % len(d.accounts)
		id := fmt.Sprintf("transfer-%0*d", max(width, 4), i+1)
		d.ids = append(d.ids, id)
		d.transfers[id] = bank.Transfer{From: d.accounts[from], To: d.accounts[to], Amount: 1 + rng.Int64N(maxAmount)}
	}
}

func (d *demo) header(dbPath string) {
	t := d.opt.timing
	where := "deleted at exit; keep it with --store-dir DIR"
	if d.opt.storeDir != "" {
		where = "kept"
	}
	d.printf(`ssfkit demo: exactly-once bank transfers, with crashes injected

Three stateful serverless functions: teller takes a transfer, calls accounts to
withdraw and then to deposit, and tells audit asynchronously, which records it
in its ledger. Executions are killed at random steps, and a crash can hit right
after an effect, losing only the reply. The intent collector re-runs what was
cut short; the runtime's logs make every step take effect exactly once.

  store       %s
              (%s)
  workload    %d transfers among %d accounts of %d each, %d in flight
  crashes     %.3g%% at each injection point, at most %d per instance
  seed        %d (rerun: ssfkit demo --seed %d)
  collectors  intents every %v (relaunch after %v),
              garbage every %v (T = %v)
`, sqliteURL(dbPath), where, d.opt.transfers, len(d.accounts), openingBalance, d.opt.concurrency,
		d.opt.crashRate*100, maxCrashesPerInstance, d.opt.seed, d.opt.seed,
		t.icEvery, t.relaunchDelay, t.gcEvery, t.gcBound)
}

// openAccounts opens every account, before crashes are enabled.
func (d *demo) openAccounts(ctx context.Context) error {
	for _, a := range d.accounts {
		res, err := d.app.host.Invoke(ctx, bank.Accounts, "open-"+a, bank.AccountOp{Op: "open", Account: a, Amount: openingBalance})
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return fmt.Errorf("demo: opening account %s: %w", a, err)
		}
	}
	return nil
}

func (d *demo) onRound(r local.CollectorReport) {
	d.colMu.Lock()
	defer d.colMu.Unlock()
	for _, g := range r.GC {
		d.gc.IntentsRemoved += g.IntentsRemoved
		d.gc.LogRowsDeleted += g.LogRowsDeleted
		d.gc.Disconnected += g.Disconnected
		d.gc.RowsDeleted += g.RowsDeleted
	}
}

func (d *demo) gcSoFar() ssf.GCReport {
	d.colMu.Lock()
	defer d.colMu.Unlock()
	return d.gc
}

// stats sums the runtimes' counters.
func (d *demo) stats() ssf.Stats {
	var s ssf.Stats
	for _, rt := range d.app.runtimes {
		r := rt.Stats()
		s.Executions += r.Executions
		s.Reexecutions += r.Reexecutions
		s.Abandoned += r.Abandoned
		s.Callbacks += r.Callbacks
		s.SpuriousCallbacks += r.SpuriousCallbacks
		s.Relaunched += r.Relaunched
		s.Corruptions += r.Corruptions
	}
	return s
}

// runTransfers submits every transfer from opt.concurrency clients and waits until each has
// finished, audit included, printing progress every second.
func (d *demo) runTransfers(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	jobs := make(chan string)
	var clients sync.WaitGroup
	var failed atomic.Pointer[error]
	for range d.opt.concurrency {
		clients.Go(func() {
			for id := range jobs {
				if err := d.submit(ctx, id); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, id := range d.ids {
			select {
			case jobs <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	submitted := make(chan struct{})
	go func() { clients.Wait(); close(submitted) }()
	defer func() { cancel(); <-submitted }() // no client may outlive the run

	began := time.Now()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	nextReport := time.Second
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
		if err := failed.Load(); err != nil {
			return *err
		}
		if err := d.pollAbandoned(ctx); err != nil {
			return err
		}
		pending, err := d.pending(ctx)
		if err != nil {
			return err
		}
		done, all := d.progress()
		select {
		case <-submitted:
			if all && pending.total == 0 {
				d.printf("%s  %s\n  every transfer and its audit record finished\n", d.elapsed(), done)
				return nil
			}
		default:
		}
		if time.Since(began) > d.opt.timing.drainTimeout {
			return d.stuck(pending)
		}
		if time.Since(d.start) >= nextReport {
			d.printf("%s  %s\n", d.elapsed(), done)
			nextReport += time.Second
		}
	}
}

// submit delivers a transfer the way a platform does: retried until the teller accepts it,
// that is, until its intent is registered. If the execution fails after that, the intent
// collector finishes it; the client only polls for the result.
func (d *demo) submit(ctx context.Context, id string) error {
	const maxAttempts = maxCrashesPerInstance + 2 // the injector crashes an instance at most that often
	for attempt := 1; ; attempt++ {
		res, err := d.app.host.Invoke(ctx, bank.Teller, id, d.transfers[id])
		if err == nil {
			d.finished(id, res)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ee := (*ssf.ExecutionError)(nil); !errors.As(err, &ee) {
			return fmt.Errorf("demo: %s: %w", id, err) // a malformed request: retrying cannot help
		}
		st, err := d.teller.Intent(ctx, id)
		if err != nil {
			return fmt.Errorf("demo: status of %s: %w", id, err)
		}
		if st.Done {
			d.finished(id, st.Result)
			return nil
		}
		if st.Exists {
			d.handedOff.Add(1)
			d.mu.Lock()
			d.accepted[id] = true
			d.mu.Unlock()
			return nil
		}
		if attempt == maxAttempts {
			return fmt.Errorf("demo: %s not accepted after %d attempts", id, attempt)
		}
		d.retries.Add(1)
	}
}

func (d *demo) finished(id string, res ssf.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.results[id] = res
	delete(d.accepted, id)
}

// pollAbandoned collects the results of accepted transfers the intent collector finished.
func (d *demo) pollAbandoned(ctx context.Context) error {
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.accepted))
	d.mu.Unlock()
	for _, id := range ids {
		st, err := d.teller.Intent(ctx, id)
		if err != nil {
			return fmt.Errorf("demo: status of %s: %w", id, err)
		}
		if st.Done {
			d.finished(id, st.Result)
		}
	}
	return nil
}

// progress returns a progress line, and whether every transfer has finished.
func (d *demo) progress() (string, bool) {
	d.mu.Lock()
	n := len(d.results)
	d.mu.Unlock()
	w := len(fmt.Sprint(d.opt.transfers))
	return fmt.Sprintf("%*d/%d done  %6d crashes injected  %6d relaunched by the IC",
		w, n, d.opt.transfers, d.inj.snapshot().Total, d.stats().Relaunched), n == d.opt.transfers
}

type pendingCounts struct {
	total int
	bySSF map[string]int
}

func (d *demo) pending(ctx context.Context) (pendingCounts, error) {
	p := pendingCounts{bySSF: map[string]int{}}
	for name, rt := range d.app.runtimes {
		n, err := rt.Pending(ctx)
		if err != nil {
			return p, fmt.Errorf("demo: unfinished instances of %s: %w", name, err)
		}
		p.bySSF[name] = n
		p.total += n
	}
	return p, nil
}

// stuck reports the transfers that did not finish in time.
func (d *demo) stuck(p pendingCounts) error {
	d.mu.Lock()
	var ids []string
	for _, id := range d.ids {
		if _, ok := d.results[id]; !ok {
			ids = append(ids, id)
		}
	}
	d.mu.Unlock()
	more := ""
	if len(ids) > 10 {
		ids, more = ids[:10], fmt.Sprintf(" and %d more", len(ids)-10)
	}
	var per []string
	for _, name := range slices.Sorted(maps.Keys(p.bySSF)) {
		per = append(per, fmt.Sprintf("%s %d", name, p.bySSF[name]))
	}
	return fmt.Errorf("demo: not finished after %v: transfers %s%s; unfinished instances: %s",
		d.opt.timing.drainTimeout, strings.Join(ids, ", "), more, strings.Join(per, ", "))
}

// awaitGC waits, with the collectors running, until the garbage collector has removed the logs
// of every instance: all finished at drained, so a GC round starting T after the first round
// that follows has found them all past the bound. It reports whether the run's intents are gone
// and its linked DAALs are compact; if the collector falls behind, it says so and moves on.
func (d *demo) awaitGC(ctx context.Context, drained time.Time) (bool, error) {
	t := d.opt.timing
	ready := drained.Add(t.gcBound + 2*t.gcEvery)
	deadline := ready.Add(2*t.gcBound + 3*t.gcEvery)
	tick := time.NewTicker(t.gcEvery / 2)
	defer tick.Stop()
	shown := ""
	report := func() { // when the counts change
		g := d.gcSoFar()
		line := fmt.Sprintf("%5d intents removed  %5d log rows deleted  %4d DAAL rows unlinked",
			g.IntentsRemoved, g.LogRowsDeleted, g.Disconnected)
		if line != shown {
			d.printf("%s  %s\n", d.elapsed(), line)
			shown = line
		}
	}
	report()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
		report()
		if time.Now().Before(ready) {
			continue
		}
		done, err := d.reclaimed(ctx)
		if err != nil {
			return false, err
		}
		if done {
			return true, nil
		}
		if time.Now().After(deadline) {
			d.printf("%s  the garbage collector has not caught up; stopping anyway\n", d.elapsed())
			return false, nil
		}
	}
}

// reclaimed reports whether no transfer's intent remains and every linked DAAL is down to its
// head and tail.
func (d *demo) reclaimed(ctx context.Context) (bool, error) {
	for _, id := range d.ids {
		st, err := d.teller.Intent(ctx, id)
		if err != nil || st.Exists {
			return false, err
		}
	}
	shapes, err := d.daalShapes(ctx)
	if err != nil {
		return false, err
	}
	for _, s := range shapes {
		if s.Reachable > 2 {
			return false, nil
		}
	}
	return true, nil
}

// daalShapes returns the linked DAAL shape of every item, keyed "SSF table/key".
func (d *demo) daalShapes(ctx context.Context) (map[string]ssf.DAALShape, error) {
	out := map[string]ssf.DAALShape{}
	for name, rt := range d.app.runtimes {
		items, err := rt.Items(ctx)
		if err != nil {
			return nil, fmt.Errorf("demo: items of %s: %w", name, err)
		}
		for k := range items {
			table, key, _ := strings.Cut(k, "/")
			s, err := rt.DAAL(ctx, table, key)
			if err != nil {
				return nil, fmt.Errorf("demo: linked DAAL of %s %s: %w", name, k, err)
			}
			out[name+" "+k] = s
		}
	}
	return out, nil
}

// receipts decodes the transfers' results; failures are transfers that did not end in a
// receipt, which the demo's well-formed transfers never should.
func (d *demo) receipts() (map[string]bank.Receipt, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]bank.Receipt{}
	var failures []error
	for _, id := range d.ids {
		res, ok := d.results[id]
		var r bank.Receipt
		switch {
		case !ok:
			failures = append(failures, fmt.Errorf("transfer %s: no result", id))
		case res.Error != "":
			failures = append(failures, fmt.Errorf("transfer %s failed: %s", id, res.Error))
		default:
			if err := json.Unmarshal(res.Output, &r); err != nil {
				failures = append(failures, fmt.Errorf("transfer %s: unreadable receipt %s: %v", id, res.Output, err))
				continue
			}
			out[id] = r
		}
	}
	return out, failures
}

func (d *demo) summary(before, after map[string]ssf.DAALShape, reclaimed bool) {
	receipts, _ := d.receipts()
	applied := 0
	for _, r := range receipts {
		if r.Applied {
			applied++
		}
	}
	d.printf("\nRequests\n  %d transfers: %d applied, %d refused for insufficient funds\n",
		d.opt.transfers, applied, len(receipts)-applied)
	st := d.stats()
	d.printf("  %d resubmitted by the client: they crashed before being accepted\n", d.retries.Load())
	d.printf("  %d finished by the intent collector after the client's call failed\n", d.handedOff.Load())

	c := d.inj.snapshot()
	d.printf("\nCrashes injected: %d, at %d injection points passed\n", c.Total, c.Points)
	d.printf("  after the effect (only the reply lost): %d\n", c.AfterEffect)
	d.printf("  by SSF        %s\n", counts(c.BySSF))
	d.printf("  by operation  %s\n", counts(c.ByOp))

	d.printf("\nExecutions\n  %-9s %10s %8s %10s %11s %10s %9s\n", "SSF", "executions", "re-runs", "abandoned", "relaunched", "callbacks", "spurious")
	for _, name := range slices.Sorted(maps.Keys(d.app.runtimes)) {
		s := d.app.runtimes[name].Stats()
		d.printf("  %-9s %10d %8d %10d %11d %10d %9d\n", name, s.Executions, s.Reexecutions, s.Abandoned, s.Relaunched, s.Callbacks, s.SpuriousCallbacks)
	}
	d.printf("  %-9s %10d %8d %10d %11d %10d %9d\n", "total", st.Executions, st.Reexecutions, st.Abandoned, st.Relaunched, st.Callbacks, st.SpuriousCallbacks)
	d.printf(`  abandoned: stopped before finishing (crashed, or a callee crashed);
  relaunched: by the intent collector; re-runs: executions of an instance
  that had run before (relaunches, duplicate deliveries)
`)

	g := d.gcSoFar()
	d.printf("\nGarbage collection\n")
	d.printf("  %-20s %7d    %-20s %7d\n", "intents removed", g.IntentsRemoved, "log rows deleted", g.LogRowsDeleted)
	d.printf("  %-20s %7d    %-20s %7d\n", "DAAL rows unlinked", g.Disconnected, "DAAL rows deleted", g.RowsDeleted)
	rb, _, longest := daalTotals(before)
	ra, sa, _ := daalTotals(after)
	d.printf("  linked DAALs of %d items: %d rows reachable after the transfers, %d now\n", len(after), rb, ra)
	if longest != "" {
		ssfName, item, _ := strings.Cut(longest, " ")
		d.printf("  longest: item %s of SSF %s, %d rows, now %d\n", item, ssfName, before[longest].Reachable, after[longest].Reachable)
	}
	if sa > ra {
		d.printf("  %d unlinked rows await deletion, T after they were unlinked\n", sa-ra)
	}
	if !reclaimed {
		d.printf("  the collector had not reclaimed everything when the demo stopped waiting\n")
	}
}

// daalTotals sums reachable and stored rows, and names the item with the longest list.
func daalTotals(shapes map[string]ssf.DAALShape) (reachable, stored int, longest string) {
	for _, k := range slices.Sorted(maps.Keys(shapes)) {
		s := shapes[k]
		reachable += s.Reachable
		stored += s.Stored
		if longest == "" || s.Reachable > shapes[longest].Reachable {
			longest = k
		}
	}
	return reachable, stored, longest
}

// counts formats a count per name, largest first.
// counts lists m's entries, largest first, wrapped to fit 80 columns after a 16-column label.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	var b strings.Builder
	width := 16
	for i, k := range keys {
		part := fmt.Sprintf("%s %d", k, m[k])
		if i > 0 {
			if width+2+len(part) > 78 {
				b.WriteString(",\n" + strings.Repeat(" ", 16))
				width = 16
			} else {
				b.WriteString(", ")
				width += 2
			}
		}
		b.WriteString(part)
		width += len(part)
	}
	return b.String()
}

func (d *demo) balances(it bank.Items) {
	d.printf("\nBalances\n  %-10s %8s %8s %8s\n", "account", "opening", "final", "change")
	var total int64
	for _, a := range d.accounts {
		b, ok := balance(it, a)
		if !ok {
			d.printf("  %-10s %8d %8s\n", a, openingBalance, "?")
			continue
		}
		total += b
		d.printf("  %-10s %8d %8d %+8d\n", a, openingBalance, b, b-openingBalance)
	}
	opened := int64(openingBalance * len(d.accounts))
	d.printf("  %-10s %8d %8d %+8d\n", "total", opened, total, total-opened)
}

func balance(it bank.Items, account string) (int64, bool) {
	var b int64
	err := json.Unmarshal(it[bank.Accounts]["balances/"+account], &b)
	return b, err == nil
}

// invariants checks and prints the invariants, and reports whether all hold.
func (d *demo) invariants(before, after bank.Items) bool {
	d.printf("\nInvariants\n")
	ok := true
	check := func(name string, problems []error, pass string) {
		if len(problems) == 0 {
			d.printf("  PASS  %s: %s\n", name, pass)
			return
		}
		ok = false
		d.printf("  FAIL  %s:\n", name)
		for i, p := range problems {
			if i == 10 {
				d.printf("          ... and %d more\n", len(problems)-i)
				break
			}
			d.printf("          - %v\n", p)
		}
	}

	opened := int64(openingBalance * len(d.accounts))
	var sum int64
	var money []error
	for _, a := range d.accounts {
		b, found := balance(after, a)
		if !found {
			money = append(money, fmt.Errorf("account %s has no readable balance", a))
		}
		sum += b
	}
	if sum != opened {
		money = append(money, fmt.Errorf("balances sum to %d, but %d was opened", sum, opened))
	}
	check("money conserved", money, fmt.Sprintf("balances sum to %d, as opened", sum))

	receipts, failures := d.receipts()
	opening := map[string]int64{}
	for _, a := range d.accounts {
		opening[a] = openingBalance
	}
	exact := failures
	if err := bank.Check(opening, receipts, d.transfers, after); err != nil {
		exact = append(exact, unjoin(err)...)
	}
	check("every transfer applied exactly once", exact, "balances = opening + receipts")

	var ledger []error
	for _, id := range d.ids {
		if _, found := after[bank.Audit]["ledger/"+id]; !found {
			ledger = append(ledger, fmt.Errorf("no ledger entry for %s", id))
		}
	}
	if got, want := string(after[bank.Audit]["ledger/count"]), fmt.Sprint(len(d.ids)); got != want {
		ledger = append(ledger, fmt.Errorf("the ledger counted %s transfers, want %s", got, want))
	}
	check("audit ledger complete", ledger, fmt.Sprintf("%d entries, one per transfer", len(d.ids)))

	var changed []error
	if !reflect.DeepEqual(before, after) {
		b, a := before.Comparable(), after.Comparable()
		union := maps.Clone(b)
		maps.Copy(union, a)
		for _, k := range slices.Sorted(maps.Keys(union)) {
			if b[k] != a[k] {
				changed = append(changed, fmt.Errorf("%s was %q, is %q", k, b[k], a[k]))
			}
		}
		if len(changed) == 0 {
			changed = append(changed, errors.New("time stamps changed"))
		}
	}
	check("garbage collection changed no state", changed, "same items, same values")

	var corrupt []error
	for _, name := range slices.Sorted(maps.Keys(d.app.runtimes)) {
		if n := d.app.runtimes[name].Stats().Corruptions; n > 0 {
			corrupt = append(corrupt, fmt.Errorf("%s detected %d corruptions (see its log)", name, n))
		}
	}
	check("runtime state consistent", corrupt, "no corruption detected")
	return ok
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
