package apps

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ssfkit/ssfkit/examples/travel"
	"github.com/ssfkit/ssfkit/internal/childproc"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal/devserver"
)

// TemporalDemoSynopsis is what `ssfkit demo temporal -h` says the demo does.
const TemporalDemoSynopsis = `Runs the travel reservation app as Temporal workflows: an embedded Temporal
server in this process, the SSFs and workflows in a separate 'ssfkit worker'
process on an SQLite store. While reservations run, the demo kills the worker
process with SIGKILL several times, in the middle of activities, and starts a
new one each time. Then it checks: every workflow completed, no room or seat
was booked twice or beyond capacity, and every hotel booking has its flight.`

// TemporalDemo is one run of `ssfkit demo temporal`. Its worker processes are this binary's
// `worker` command (os.Executable), so only the ssfkit command can run it.
type TemporalDemo struct {
	reservations, concurrency, kills int
	killEvery                        time.Duration
	capacity                         int64
	seed                             uint64
	storeDir                         string
	recordDir                        string
	killed                           int // kills done
	out                              io.Writer
	start                            time.Time
}

// Flags registers the demo's flags on fs.
func (d *TemporalDemo) Flags(fs *flag.FlagSet) {
	fs.IntVar(&d.reservations, "reservations", 60, "reservation workflows to run")
	fs.IntVar(&d.concurrency, "concurrency", 10, "workflows in flight at once")
	fs.IntVar(&d.kills, "kills", 5, "times to SIGKILL the worker process")
	fs.DurationVar(&d.killEvery, "kill-every", time.Second, "mean time between kills (each drawn from half to one and a half times it)")
	fs.Int64Var(&d.capacity, "capacity", 1, "rooms per hotel and seats per flight (small, so that reservations compete)")
	fs.Uint64Var(&d.seed, "seed", 20201104, "seed of the data, the reservations and the kill times")
	fs.StringVar(&d.storeDir, "store-dir", "", "keep the SQLite database and the worker logs in `DIR` (default: a temporary directory, removed at exit)")
	fs.StringVar(&d.recordDir, "record", "", "write the history of one workflow per kind of outcome (booked, each refusal, retried after a kill) as JSON into `DIR`, for replay tests")
}

// Validate checks the flags once parsed.
func (d *TemporalDemo) Validate() error {
	switch {
	case d.reservations < 1 || d.concurrency < 1 || d.kills < 0 || d.capacity < 1:
		return errors.New("demo temporal: --reservations, --concurrency and --capacity must be positive, --kills not negative")
	case d.killEvery <= 0:
		return errors.New("demo temporal: --kill-every must be positive")
	}
	return nil
}

func (d *TemporalDemo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, "%5.1fs  "+format+"\n", append([]any{time.Since(d.start).Seconds()}, args...)...)
}

// Run runs the demo, printing to out; it fails if an invariant does not hold.
func (d *TemporalDemo) Run(ctx context.Context, out io.Writer) error {
	d.out = out
	d.start = time.Now()
	dir := d.storeDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "ssfkit-demo-temporal-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := "sqlite://" + filepath.Join(dir, "travel.db")
	data := travel.Generate(d.seed, d.capacity)
	fmt.Fprintf(d.out, "ssfkit demo temporal: %d reservations as Temporal workflows, %d in flight; the worker process is SIGKILLed %d times\n  store   %s\n  worker  logs in %s\n\n",
		d.reservations, d.concurrency, d.kills, base, filepath.Join(dir, "worker-N.log"))

	if err := d.load(ctx, base, data); err != nil {
		return err
	}
	srv, err := devserver.Start(devserver.Options{})
	if err != nil {
		return fmt.Errorf("demo temporal: embedded Temporal server: %w", err)
	}
	defer srv.Stop()
	d.printf("embedded Temporal server on %s", srv.Addr())
	const taskQueue = "travel-demo"
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Addr(), Namespace: srv.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return fmt.Errorf("demo temporal: connecting to the embedded Temporal server: %w", err)
	}
	defer c.Close()

	workers := &workerProcesses{args: []string{"worker", "--app", "travel", "--load=false", "--store", base,
		"--temporal", srv.Addr(), "--namespace", srv.Namespace(), "--task-queue", taskQueue,
		"--sticky-timeout", "1s", "--ic-every", "500ms", "--gc-every", "0"}, logDir: dir}
	if err := workers.start(); err != nil {
		return err
	}
	defer workers.stop()
	d.printf("worker process %d started", workers.pid())

	results := d.submit(ctx, c, taskQueue, travel.NewWorkload(data, d.seed))
	rng := rand.New(rand.NewPCG(d.seed, 1))
	for k := 1; k <= d.kills; k++ {
		// Kill a worker that is at work: once it has finished a reservation, at a random moment.
		if err := results.awaitProgress(ctx); err != nil {
			return err
		}
		wait := d.killEvery/2 + time.Duration(rng.Int64N(int64(d.killEvery)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if results.done() == d.reservations {
			d.printf("every reservation finished before kill %d", k)
			break
		}
		busy := results.awaitStartedActivity(ctx, c)
		pid := workers.pid()
		if err := workers.kill(); err != nil {
			return err
		}
		if err := workers.start(); err != nil {
			return err
		}
		d.killed++
		d.printf("kill %d: SIGKILLed worker %d %s (%d of %d reservations done); started worker %d", k, pid, busy, results.done(), d.reservations, workers.pid())
	}
	confirmations, failures := results.wait()
	d.printf("all %d workflows finished: %d completed, %d failed", d.reservations, len(confirmations), len(failures))
	if err := workers.stop(); err != nil {
		return err
	}
	retried, err := d.histories(ctx, c, results)
	if err != nil {
		return err
	}
	return d.check(ctx, base, confirmations, failures, retried)
}

// openTravel opens the travel SSFs on the demo's store in this process, with dev's timing.
func openTravel(ctx context.Context, base string) (*Hosted, error) {
	tableURL, err := TablePerSSF(base)
	if err != nil {
		return nil, err
	}
	return Open(ctx, travel.Handlers(), tableURL, DevConfig())
}

// load writes the demo's data to the store before any worker runs.
func (d *TemporalDemo) load(ctx context.Context, base string, data travel.Data) error {
	app, err := openTravel(ctx, base)
	if err != nil {
		return err
	}
	defer app.Close()
	return loadTravel(ctx, app.Host, data)
}

// demoResults collects the workflows' outcomes as they finish.
type demoResults struct {
	ids      []string
	mu       sync.Mutex
	finished int
	settled  map[string]bool                // workflow ids that finished
	outcomes map[string]travel.Confirmation // by reservation id, which is the workflow id
	failures []error
	all      sync.WaitGroup
}

func (r *demoResults) done() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// awaitProgress waits until a reservation finishes after the call (or all have).
func (r *demoResults) awaitProgress(ctx context.Context) error {
	from := r.done()
	for r.done() == from && from < len(r.ids) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// awaitStartedActivity polls the unfinished workflows until one has an activity a worker has
// started (so a kill now lands in it, unless it finishes first), for at most five seconds, and
// says what it found.
func (r *demoResults) awaitStartedActivity(ctx context.Context, c client.Client) string {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		var running []string
		for _, id := range r.ids {
			if !r.settled[id] {
				running = append(running, id)
			}
		}
		r.mu.Unlock()
		for _, id := range running {
			desc, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				continue // not started yet
			}
			for _, a := range desc.GetPendingActivities() {
				if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					return fmt.Sprintf("while it ran %s of %s", a.GetActivityType().GetName(), id)
				}
			}
		}
	}
	return "(no activity seen running)"
}

func (r *demoResults) wait() (map[string]travel.Confirmation, []error) {
	r.all.Wait()
	return r.outcomes, r.failures
}

// submit starts the reservation workflows, at most d.concurrency at a time, in the background.
func (d *TemporalDemo) submit(ctx context.Context, c client.Client, taskQueue string, w *travel.Workload) *demoResults {
	r := &demoResults{outcomes: map[string]travel.Confirmation{}, settled: map[string]bool{}}
	slots := make(chan struct{}, d.concurrency)
	for i := range d.reservations {
		id := fmt.Sprintf("reserve-%03d", i)
		req := w.Reserve(travel.ModeTransaction)
		r.ids = append(r.ids, id)
		r.all.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			// A workflow task held by a killed worker is retried after WorkflowTaskTimeout.
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue, WorkflowTaskTimeout: 2 * time.Second,
				WorkflowExecutionTimeout: 5 * time.Minute}, travel.ReserveWorkflowName, req)
			var conf travel.Confirmation
			if err == nil {
				err = run.Get(ctx, &conf)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.finished++
			r.settled[id] = true
			if err != nil {
				r.failures = append(r.failures, fmt.Errorf("workflow %s: %w", id, err))
				return
			}
			r.outcomes[conf.Reservation] = conf
		})
	}
	return r
}

// histories reads every workflow's history and counts the activity attempts after the first:
// the activities a killed worker was running, retried by Temporal on the next worker. With
// --record it writes one history per kind of outcome.
func (d *TemporalDemo) histories(ctx context.Context, c client.Client, results *demoResults) (retried int, err error) {
	recorded := map[string]bool{}
	for _, id := range results.ids {
		h := &historypb.History{}
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		retriedHere := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return 0, fmt.Errorf("history of %s: %w", id, err)
			}
			h.Events = append(h.Events, ev)
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
				retriedHere++
			}
		}
		retried += retriedHere
		kind := "booked"
		if conf, ok := results.outcomes[id]; !ok {
			kind = "failed"
		} else if !conf.Booked {
			kind = "refused-" + conf.Refused
		}
		if retriedHere > 0 {
			kind = "retried-after-kill"
		}
		if d.recordDir == "" || recorded[kind] {
			continue
		}
		recorded[kind] = true
		js, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(d.recordDir, "reserve-"+kind+".json"), js, 0o644); err != nil {
			return 0, err
		}
	}
	return retried, nil
}

// check reads the final state and checks the invariants; an error if any fails.
func (d *TemporalDemo) check(ctx context.Context, base string, confirmations map[string]travel.Confirmation, failures []error, retried int) error {
	app, err := openTravel(ctx, base)
	if err != nil {
		return err
	}
	defer app.Close()
	items, err := travel.Snapshot(ctx, app.Runtimes)
	if err != nil {
		return err
	}
	report := travel.Check(items, confirmations)
	refused := map[string]int{}
	for _, c := range confirmations {
		if !c.Booked {
			refused[c.Refused]++
		}
	}
	var locks []error
	for name, rt := range app.Runtimes {
		held, err := rt.Locks(ctx)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			locks = append(locks, fmt.Errorf("%s holds locks %v", name, held))
		}
	}
	fmt.Fprintf(d.out, "\nOutcome\n  %d booked (hotel and flight), refused: %s\n  %d activity attempts were retries of activities a killed worker was running\n\nInvariants\n",
		report.Booked, counts(refused), retried)
	failed := false
	for _, inv := range []struct {
		name     string
		problems []error
		pass     string
	}{
		{"every workflow completed", failures, fmt.Sprintf("%d of %d", len(confirmations), d.reservations)},
		{"no room or seat booked twice or beyond capacity", report.Capacity, fmt.Sprintf("%d overbooked, %d double-booked", report.Overbooked, report.DoubleBooked)},
		{"hotel and flight bookings paired", report.Pairing, fmt.Sprintf("%d unmatched", report.Unmatched)},
		{"orders agree with the bookings", report.Outcomes, fmt.Sprintf("%d orders", report.Orders)},
		{"no lock left held", locks, "none"},
	} {
		if len(inv.problems) == 0 {
			fmt.Fprintf(d.out, "  PASS  %s: %s\n", inv.name, inv.pass)
			continue
		}
		failed = true
		fmt.Fprintf(d.out, "  FAIL  %s:\n", inv.name)
		for _, p := range inv.problems[:min(len(inv.problems), 5)] {
			fmt.Fprintf(d.out, "          %v\n", p)
		}
	}
	if failed {
		return errors.New("demo temporal: an invariant failed")
	}
	if d.killed > 0 && retried == 0 {
		return errors.New("demo temporal: no kill landed in the middle of an activity; raise --reservations or lower --kill-every")
	}
	fmt.Fprintf(d.out, "\nEvery invariant holds after %d SIGKILLs of the worker.\n", d.killed)
	return nil
}

// workerProcesses runs `ssfkit worker` as a child process, one at a time.
type workerProcesses struct {
	args   []string
	logDir string
	n      int
	cmd    *exec.Cmd
	exited chan error
}

func (w *workerProcesses) start() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	w.n++
	logFile, err := os.Create(filepath.Join(w.logDir, fmt.Sprintf("worker-%d.log", w.n)))
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, w.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The worker dies with the demo, whatever kills the demo.
	cmd.SysProcAttr = childproc.Attr(false)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting the worker process: %w", err)
	}
	w.cmd, w.exited = cmd, make(chan error, 1)
	go func() { w.exited <- cmd.Wait(); logFile.Close() }()
	return nil
}

func (w *workerProcesses) pid() int { return w.cmd.Process.Pid }

// kill sends SIGKILL and waits for the process to be gone.
func (w *workerProcesses) kill() error {
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing worker %d: %w", w.pid(), err)
	}
	<-w.exited
	w.cmd = nil
	return nil
}

// stop asks the running worker to stop (SIGTERM), waits, and reports how it ended.
func (w *workerProcesses) stop() error {
	if w.cmd == nil {
		return nil
	}
	defer func() { w.cmd = nil }()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	select {
	case err := <-w.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil // stopped before it could handle the signal: a worker just started
			}
		}
		if err != nil {
			return fmt.Errorf("worker %d: %w (log: %s)", w.pid(), err, filepath.Join(w.logDir, fmt.Sprintf("worker-%d.log", w.n)))
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		return fmt.Errorf("worker %d did not stop within 30 s of SIGTERM", w.pid())
	}
}
