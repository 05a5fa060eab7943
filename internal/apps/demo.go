package apps

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore" // the demo's store
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// workload is what an example application brings to the demo: its requests, and what it
// prints and checks. The demo runs it on the embedded SQLite store, crashes executions at random
// points while the collectors run on timers, and checks its invariants.
type workload interface {
	// flags registers the app's own flags; validate checks them once parsed.
	flags(fs *flag.FlagSet)
	validate() error
	// info describes the app and its workload (flags parsed).
	info() demoInfo
	// setup runs before crashes are enabled: opening accounts, loading data.
	setup(ctx context.Context, h *local.Host) error
	// plan draws the requests from the seed: their ids in submission order, and inputs by id.
	plan(seed uint64) (ids []string, inputs map[string]any)
	snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (appState, error)
	// summary prints what the requests did: the first lines of the "Requests" section.
	summary(d *Demo)
	// report prints the app's own section after the summary, from the final state.
	report(d *Demo, after appState)
	// invariants checks the app's invariants on the final state with d.check.
	invariants(ctx context.Context, d *Demo, after appState)
}

// demoInfo is an app's text in the demo.
type demoInfo struct {
	synopsis string // `ssfkit demo APP -h`'s description
	title    string // the header's first line
	intro    string // the header's paragraph
	workload string // the header's workload line(s); ", N in flight" follows
	section  string // the title of the section that runs the requests
	requests string // what the requests are, in the plural: "after the transfers"
	finished string // printed once every request has finished
}

// appState is a state snapshot of an app: SSF name -> "table/key" -> JSON value (the
// underlying type of bank.Items and travel.Items).
type appState = map[string]map[string][]byte

// TemporalDemoName is the demo of the travel app as Temporal workflows (temporal_demo.go).
const TemporalDemoName = "temporal"

// DemoNames are the demos `ssfkit demo` runs: the default app first, then the other apps,
// then the Temporal demo.
func DemoNames() []string {
	return append(Names(), TemporalDemoName)
}

// maxCrashesPerInstance caps the crashes one instance suffers. Its later executions run clean,
// so every instance finishes and the demo converges whatever the crash rate; re-executions
// still pass through every injection point, replaying their logged steps, before the cap ends.
const maxCrashesPerInstance = 3

// demoTiming is the runtime and collector timing. The defaults make the garbage collector's
// bound T pass within the run, so the demo shows logs being reclaimed; tests shorten them.
type demoTiming struct {
	relaunchDelay, lifetime, gcBound time.Duration
	icEvery, gcEvery                 time.Duration
	// stallTimeout bounds how long the run may go without a request or an instance finishing:
	// a slow machine only makes the run longer, a livelock or a lost instance fails it.
	stallTimeout time.Duration
}

var defaultDemoTiming = demoTiming{
	relaunchDelay: 200 * time.Millisecond,
	lifetime:      3 * time.Second,
	gcBound:       4 * time.Second,
	icEvery:       100 * time.Millisecond,
	gcEvery:       time.Second,
	stallTimeout:  60 * time.Second,
}

// demoOptions are the flags every demo has.
type demoOptions struct {
	concurrency int
	crashRate   float64
	seed        uint64
	storeDir    string
	timing      demoTiming
}

// NewDemo returns a run of the demo of the app called name, with the default settings.
func NewDemo(name string) (*Demo, error) {
	app, ok := Lookup(name)
	if !ok || name == TemporalDemoName {
		return nil, fmt.Errorf("demo: unknown application %q (want %s)", name, strings.Join(DemoNames(), ", "))
	}
	return &Demo{app: app, work: app.demo(), opt: demoOptions{timing: defaultDemoTiming}}, nil
}

// Synopsis is what `ssfkit demo APP -h` says the demo does.
func (d *Demo) Synopsis() string { return d.work.info().synopsis }

// Flags registers the demo's flags on fs: those every demo has, then the app's.
func (d *Demo) Flags(fs *flag.FlagSet) {
	o := &d.opt
	fs.IntVar(&o.concurrency, "concurrency", 8, "number of requests in flight at once")
	fs.Float64Var(&o.crashRate, "crash-rate", 0.02, "probability of a crash at each injection point, 0 to 1")
	fs.Uint64Var(&o.seed, "seed", 20201104, "seed of the requests and crash points, to reproduce a run")
	fs.StringVar(&o.storeDir, "store-dir", "", "keep the SQLite database in `DIR` (default: a temporary directory, removed at exit)")
	d.work.flags(fs)
}

// Validate checks the flags once parsed.
func (d *Demo) Validate() error {
	switch o := d.opt; {
	case o.concurrency < 1 || o.concurrency > 1000:
		return fmt.Errorf("demo: --concurrency %d: want 1 to 1000", o.concurrency)
	case !(o.crashRate >= 0 && o.crashRate <= 1):
		return fmt.Errorf("demo: --crash-rate %v: want a probability from 0 to 1", o.crashRate)
	}
	return d.work.validate()
}

// Demo is one run of an app's demo.
type Demo struct {
	app   App
	work  workload
	opt   demoOptions
	info  demoInfo
	cmd   string // the command line that reruns it, without flags
	out   io.Writer
	start time.Time

	hosted *Hosted
	entry  *ssf.Runtime // the SSF the requests go to
	inj    *faults.Injector

	ids    []string // request ids, in submission order
	inputs map[string]any

	mu        sync.Mutex
	results   map[string]ssf.Result // finished requests
	accepted  map[string]bool       // accepted, then abandoned: left to the intent collector
	retries   atomic.Int64          // submissions repeated because the request was not accepted
	handedOff atomic.Int64          // accepted requests whose call failed: the IC finished them
	failed    bool                  // an invariant failed

	colMu sync.Mutex
	gc    ssf.GCReport // the fields the summary shows, summed over every round and SSF
}

func (d *Demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// elapsed is the time since the run started, as a progress-line prefix.
func (d *Demo) elapsed() string { return fmt.Sprintf("%5.1fs", time.Since(d.start).Seconds()) }

// Run runs the demo, printing to out; cmd is the command line that reruns it, without flags.
// It fails if an invariant does not hold.
func (d *Demo) Run(ctx context.Context, cmd string, out io.Writer) error {
	d.cmd, d.out = cmd, out
	d.start = time.Now()
	d.info = d.work.info()
	dbPath, cleanup, err := d.storePath()
	if err != nil {
		return err
	}
	defer cleanup()
	tableURL, err := TablePerSSF(SQLiteURL(dbPath))
	if err != nil {
		return err
	}
	t := d.opt.timing
	d.inj = faults.Capped(d.opt.seed, d.opt.crashRate, maxCrashesPerInstance)
	d.hosted, err = Open(ctx, d.app.Handlers(), tableURL, ssf.Config{
		Lifetime: t.lifetime, GCBound: t.gcBound, RelaunchDelay: t.relaunchDelay, Faults: d.inj,
		// Crashes injected at random are not the deterministic failures bounded attempts are
		// for: every request must finish, however often it crashed.
		MaxAttempts: -1,
	})
	if err != nil {
		return err
	}
	defer d.hosted.Close()
	d.entry = d.hosted.Runtimes[d.app.Entry]
	d.ids, d.inputs = d.work.plan(d.opt.seed)
	d.results, d.accepted = map[string]ssf.Result{}, map[string]bool{}
	d.header(dbPath)

	if err := d.work.setup(ctx, d.hosted.Host); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	colCtx, stopCollectors := context.WithCancel(ctx)
	var collectors sync.WaitGroup
	collectors.Go(func() { d.hosted.Host.RunCollectors(colCtx, t.icEvery, t.gcEvery, d.onRound) })
	stop := func() { stopCollectors(); collectors.Wait() }
	defer stop()

	d.printf("\n%s\n", d.info.section)
	d.inj.Enable(true)
	if err := d.runRequests(ctx); err != nil {
		return err
	}
	drained := time.Now()
	d.inj.Enable(false)
	before, err := d.work.snapshot(ctx, d.hosted.Runtimes)
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
	after, err := d.work.snapshot(ctx, d.hosted.Runtimes)
	if err != nil {
		return err
	}
	shapesAfter, err := d.daalShapes(ctx)
	if err != nil {
		return err
	}

	d.summary(shapesBefore, shapesAfter, reclaimed)
	d.work.report(d, after)
	d.printf("\nInvariants\n")
	d.work.invariants(ctx, d, after)
	d.runtimeInvariants(before, after)
	if d.failed {
		return errors.New("demo: invariants violated (see FAIL above)")
	}
	d.printf("\nAll invariants hold (%.1fs).\n", time.Since(d.start).Seconds())
	return nil
}

// storePath returns the database file to create, and a cleanup removing it unless it is kept.
func (d *Demo) storePath() (string, func(), error) {
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

func (d *Demo) header(dbPath string) {
	t := d.opt.timing
	where := "deleted at exit; keep it with --store-dir DIR"
	if d.opt.storeDir != "" {
		where = "kept"
	}
	d.printf(`%s

%s

  store       %s
              (%s)
  workload    %s, %d in flight
  crashes     %.3g%% at each injection point, at most %d per instance
  seed        %d (rerun: %s --seed %d)
  collectors  intents every %v (relaunch after %v),
              garbage every %v (T = %v)
`, d.info.title, d.info.intro, SQLiteURL(dbPath), where, d.info.workload, d.opt.concurrency,
		d.opt.crashRate*100, maxCrashesPerInstance, d.opt.seed, d.cmd, d.opt.seed,
		t.icEvery, t.relaunchDelay, t.gcEvery, t.gcBound)
}

func (d *Demo) onRound(r local.CollectorReport) {
	d.colMu.Lock()
	defer d.colMu.Unlock()
	for _, g := range r.GC {
		d.gc.IntentsRemoved += g.IntentsRemoved
		d.gc.LogRowsDeleted += g.LogRowsDeleted
		d.gc.Disconnected += g.Disconnected
		d.gc.RowsDeleted += g.RowsDeleted
	}
}

func (d *Demo) gcSoFar() ssf.GCReport {
	d.colMu.Lock()
	defer d.colMu.Unlock()
	return d.gc
}

// stats sums the runtimes' counters.
func (d *Demo) stats() ssf.Stats {
	var s ssf.Stats
	for _, rt := range d.hosted.Runtimes {
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

// runRequests submits every request from opt.concurrency clients and waits until each has
// finished, with every instance it started, printing progress every second.
func (d *Demo) runRequests(ctx context.Context) error {
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

	lastProgress, lastDone, lastPending := time.Now(), -1, -1
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
		done, finished, all := d.progress()
		if finished != lastDone || pending.total != lastPending {
			lastProgress, lastDone, lastPending = time.Now(), finished, pending.total
		}
		select {
		case <-submitted:
			if all && pending.total == 0 {
				d.printf("%s  %s\n  %s\n", d.elapsed(), done, d.info.finished)
				return nil
			}
		default:
		}
		if time.Since(lastProgress) > d.opt.timing.stallTimeout {
			return d.stuck(pending)
		}
		if time.Since(d.start) >= nextReport {
			d.printf("%s  %s\n", d.elapsed(), done)
			nextReport += time.Second
		}
	}
}

// submit delivers a request the way a platform does: retried until the entry SSF accepts it,
// that is, until its intent is registered. If the execution fails after that, the intent
// collector finishes it; the client only polls for the result.
func (d *Demo) submit(ctx context.Context, id string) error {
	const maxAttempts = maxCrashesPerInstance + 2 // the injector crashes an instance at most that often
	for attempt := 1; ; attempt++ {
		res, err := d.hosted.Host.Invoke(ctx, d.entry.Name(), id, d.inputs[id])
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
		st, err := d.entry.Intent(ctx, id)
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

func (d *Demo) finished(id string, res ssf.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.results[id] = res
	delete(d.accepted, id)
}

// finishedResults returns a copy of the results so far.
func (d *Demo) finishedResults() map[string]ssf.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.results)
}

// pollAbandoned collects the results of accepted requests the intent collector finished.
func (d *Demo) pollAbandoned(ctx context.Context) error {
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.accepted))
	d.mu.Unlock()
	for _, id := range ids {
		st, err := d.entry.Intent(ctx, id)
		if err != nil {
			return fmt.Errorf("demo: status of %s: %w", id, err)
		}
		if st.Done {
			d.finished(id, st.Result)
		}
	}
	return nil
}

// progress reports the run's counters as a line, the number of finished requests, and whether
// every request has finished.
func (d *Demo) progress() (string, int, bool) {
	d.mu.Lock()
	n := len(d.results)
	d.mu.Unlock()
	w := len(fmt.Sprint(len(d.ids)))
	return fmt.Sprintf("%*d/%d done  %6d crashes injected  %6d relaunched by the IC",
		w, n, len(d.ids), d.inj.Stats().Total, d.stats().Relaunched), n, n == len(d.ids)
}

type pendingCounts struct {
	total int
	bySSF map[string]int
}

func (d *Demo) pending(ctx context.Context) (pendingCounts, error) {
	p := pendingCounts{bySSF: map[string]int{}}
	for name, rt := range d.hosted.Runtimes {
		n, err := rt.Pending(ctx)
		if err != nil {
			return p, fmt.Errorf("demo: unfinished instances of %s: %w", name, err)
		}
		p.bySSF[name] = n
		p.total += n
	}
	return p, nil
}

// stuck reports the requests that did not finish when the run stopped making progress.
func (d *Demo) stuck(p pendingCounts) error {
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
	return fmt.Errorf("demo: no progress for %v: requests %s%s; unfinished instances: %s",
		d.opt.timing.stallTimeout, strings.Join(ids, ", "), more, strings.Join(per, ", "))
}

// awaitGC waits, with the collectors running, until the garbage collector has removed the logs
// of every instance: all finished at drained, so a GC round starting T after the first round
// that follows has found them all past the bound. It reports whether the run's intents are gone
// and its linked DAALs are compact; if the collector falls behind, it says so and moves on.
func (d *Demo) awaitGC(ctx context.Context, drained time.Time) (bool, error) {
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

// reclaimed reports whether no request's intent remains and every linked DAAL is down to its
// head and tail.
func (d *Demo) reclaimed(ctx context.Context) (bool, error) {
	for _, id := range d.ids {
		st, err := d.entry.Intent(ctx, id)
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
func (d *Demo) daalShapes(ctx context.Context) (map[string]ssf.DAALShape, error) {
	out := map[string]ssf.DAALShape{}
	for name, rt := range d.hosted.Runtimes {
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

func (d *Demo) summary(before, after map[string]ssf.DAALShape, reclaimed bool) {
	d.printf("\nRequests\n")
	d.work.summary(d)
	st := d.stats()
	d.printf("  %d resubmitted by the client: they crashed before being accepted\n", d.retries.Load())
	d.printf("  %d finished by the intent collector after the client's call failed\n", d.handedOff.Load())

	c := d.inj.Stats()
	d.printf("\nCrashes injected: %d, at %d injection points passed\n", c.Total, c.Points)
	d.printf("  after the effect (only the reply lost): %d\n", c.AfterEffect)
	d.printf("  by SSF        %s\n", counts(c.BySSF))
	d.printf("  by operation  %s\n", counts(c.ByOp))

	d.printf("\nExecutions\n  %-9s %10s %8s %10s %11s %10s %9s\n", "SSF", "executions", "re-runs", "abandoned", "relaunched", "callbacks", "spurious")
	for _, name := range slices.Sorted(maps.Keys(d.hosted.Runtimes)) {
		s := d.hosted.Runtimes[name].Stats()
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
	d.printf("  linked DAALs of %d items: %d rows reachable after the %s, %d now\n", len(after), rb, d.info.requests, ra)
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

// counts lists m's entries, largest first, wrapped to fit 80 columns after a 16-column label.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return WrapJoin(parts, 16, 78)
}

// WrapJoin joins parts with ", ", starting a new line, indented by indent spaces, before a part
// that would end past column limit; the first line is taken to start at column indent too.
func WrapJoin(parts []string, indent, limit int) string {
	var b strings.Builder
	width := indent
	for i, p := range parts {
		if i > 0 {
			if width+2+len(p) > limit {
				b.WriteString(",\n" + strings.Repeat(" ", indent))
				width = indent
			} else {
				b.WriteString(", ")
				width += 2
			}
		}
		b.WriteString(p)
		width += len(p)
	}
	return b.String()
}

// check prints an invariant's outcome: PASS with what shows it, or FAIL with the problems.
func (d *Demo) check(name string, problems []error, pass string) {
	if len(problems) == 0 {
		d.printf("  PASS  %s: %s\n", name, pass)
		return
	}
	d.failed = true
	d.printf("  FAIL  %s:\n", name)
	for i, p := range problems {
		if i == 10 {
			d.printf("          ... and %d more\n", len(problems)-i)
			break
		}
		d.printf("          - %v\n", p)
	}
}

// runtimeInvariants checks what holds for every app: garbage collection changed no item, and
// no runtime detected corrupt state.
func (d *Demo) runtimeInvariants(before, after appState) {
	var changed []error
	if !reflect.DeepEqual(before, after) {
		b, a := flatten(before), flatten(after)
		union := maps.Clone(b)
		maps.Copy(union, a)
		for _, k := range slices.Sorted(maps.Keys(union)) {
			if b[k] != a[k] {
				changed = append(changed, fmt.Errorf("%s was %q, is %q", k, b[k], a[k]))
			}
		}
	}
	d.check("garbage collection changed no state", changed, "same items, same values")

	var corrupt []error
	for _, name := range slices.Sorted(maps.Keys(d.hosted.Runtimes)) {
		if n := d.hosted.Runtimes[name].Stats().Corruptions; n > 0 {
			corrupt = append(corrupt, fmt.Errorf("%s detected %d corruptions (see its log)", name, n))
		}
	}
	d.check("runtime state consistent", corrupt, "no corruption detected")
}

// flatten maps "SSF:table/key" to each item's value.
func flatten(s appState) map[string]string {
	out := map[string]string{}
	for name, items := range s {
		for k, v := range items {
			out[name+":"+k] = string(v)
		}
	}
	return out
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
