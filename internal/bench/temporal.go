package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal/devserver"
)

// Defaults of TemporalConfig.
const (
	DefaultTemporalSteps       = 5
	DefaultTemporalWorkflows   = 200
	DefaultTemporalConcurrency = 8
	DefaultTemporalWarmup      = 20
	DefaultTemporalBlock       = 20
)

// TemporalGoal is the most exactly-once steps may cost next to plain ones, as the EO/plain ratio
// of the latencies.
const TemporalGoal = 1.3

// The variants RunTemporal compares, as the workflow's variant argument and in reports.
const (
	TemporalPlain = "plain"
	TemporalEO    = "exactly-once"
)

// Names the benchmark registers on its worker.
const (
	stepsWorkflowName = "bench.Steps"
	plainStepActivity = "bench.PlainStep"
	stepSSF           = "benchstep"
	counterTable      = "counter" // the SSF's table of counters, one key per workflow
)

// TemporalConfig configures RunTemporal. Zero values of Steps, Workflows, Concurrency and Block
// take the defaults.
type TemporalConfig struct {
	// StoreURL is the store; the plain activity and the SSF each get their own table in it.
	// Empty means a fresh SQLite file in a temporary directory.
	StoreURL string
	// Steps is k, the activities each workflow runs one after the other.
	Steps int
	// Workflows is the number of measured workflows per variant, after Warmup unmeasured ones.
	Workflows, Warmup int
	// Concurrency is the number of workflows in flight: each client starts its next workflow
	// when the last one's result arrives.
	Concurrency int
	// Block is how many workflows one variant runs before the other's turn; the order swaps
	// every round, so drift affects both alike.
	Block int
	// PendingIndex runs the SSF without Config.Hold, as a runtime that does not rely on
	// Temporal's retries: each activity instance goes through the pending index and the intent
	// collector's bookkeeping. The default is what `ssfkit worker` runs.
	PendingIndex bool
}

func (c *TemporalConfig) validate() error {
	for _, f := range []struct {
		v   *int
		def int
	}{{&c.Steps, DefaultTemporalSteps}, {&c.Workflows, DefaultTemporalWorkflows}, {&c.Concurrency, DefaultTemporalConcurrency}, {&c.Block, DefaultTemporalBlock}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.Steps < 1 || c.Workflows < 1 || c.Block < 1:
		return fmt.Errorf("bench temporal: --steps, --workflows and --block must be at least 1, got %d, %d and %d", c.Steps, c.Workflows, c.Block)
	case c.Warmup < 0:
		return fmt.Errorf("bench temporal: --warmup must not be negative, got %d", c.Warmup)
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return fmt.Errorf("bench temporal: --concurrency must be 1 to 1000, got %d", c.Concurrency)
	}
	return nil
}

// TemporalReport is the outcome of RunTemporal.
type TemporalReport struct {
	Machine     Machine `json:"machine"`
	Store       string  `json:"store"`
	Steps       int     `json:"steps"`
	Workflows   int     `json:"workflows"`
	Warmup      int     `json:"warmup"`
	Concurrency int     `json:"concurrency"`
	Block       int     `json:"block"`
	// PendingIndex: the SSF ran without Config.Hold (TemporalConfig.PendingIndex).
	PendingIndex bool           `json:"pending_index"`
	Started      time.Time      `json:"started"`
	Seconds      float64        `json:"seconds"`
	Plain        TemporalResult `json:"plain"`
	EO           TemporalResult `json:"eo"`
	// Ratios are EO / plain.
	Ratios TemporalRatios `json:"ratios"`
	// StepOverheadUS is what exactly-once adds to a step: the EO per-step median minus the
	// plain one. BodyOverheadUS is the same for the activity body.
	StepOverheadUS float64 `json:"step_overhead_us"`
	BodyOverheadUS float64 `json:"body_overhead_us"`
}

// TemporalResult is one variant's measurements.
type TemporalResult struct {
	Variant string `json:"variant"`
	// Workflow is the client's latency from ExecuteWorkflow to the result.
	Workflow Summary `json:"workflow"`
	// Step is each workflow's latency divided by the steps: a step with Temporal's scheduling.
	Step Summary `json:"step"`
	// Body is the time inside the activity function, one sample per activity attempt.
	Body Summary `json:"body"`
	// OutsideBodyUS is Step's median minus Body's: per step, what the server, the worker and the
	// client add around the activity.
	OutsideBodyUS float64 `json:"outside_body_us"`
	// Seconds is the wall time of the measured blocks; Throughput the measured workflows per
	// second over it.
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	// Store is the store requests per measured step.
	Store StoreOps `json:"store"`
	// Retries counts the measured activities' attempts beyond the first (none, unless something
	// failed).
	Retries int `json:"retries"`
}

// TemporalRatios compare the variants, EO / plain.
type TemporalRatios struct {
	WorkflowMedian float64 `json:"workflow_median"`
	WorkflowP99    float64 `json:"workflow_p99"`
	StepMedian     float64 `json:"step_median"`
	StepP99        float64 `json:"step_p99"`
	BodyMedian     float64 `json:"body_median"`
	BodyP99        float64 `json:"body_p99"`
	Throughput     float64 `json:"throughput"`
}

// RunTemporal runs workflows of cfg.Steps activities on an embedded Temporal server, each step a
// read-modify-write of the workflow's own key: as a plain activity on the store, and as an
// exactly-once SSF activity (ssftemporal). The variants take turns in blocks on one worker.
func RunTemporal(ctx context.Context, cfg TemporalConfig, progress io.Writer) (*TemporalReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &TemporalReport{Machine: thisMachine(), Steps: cfg.Steps, Workflows: cfg.Workflows, Warmup: cfg.Warmup,
		Concurrency: cfg.Concurrency, Block: cfg.Block, PendingIndex: cfg.PendingIndex, Started: time.Now()}
	// The worker's loggers write from their own goroutines.
	progress = &lockedWriter{w: progress}
	warnings := slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))

	url := cfg.StoreURL
	if url == "" {
		dir, err := os.MkdirTemp("", "ssfkit-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench temporal: temporary store: %w", err)
		}
		defer os.RemoveAll(dir)
		url = "sqlite://" + filepath.Join(dir, "temporal.db")
	}
	u, err := store.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("bench temporal: %w", err)
	}
	rep.Store = u.Redacted()
	run := uuid.NewString()[:8]
	plain, eo := &temporalVariant{res: TemporalResult{Variant: TemporalPlain}}, &temporalVariant{res: TemporalResult{Variant: TemporalEO}}
	plainTable, err := openVariantTable(ctx, url, "plain", run, &plain.counter)
	if err != nil {
		return nil, err
	}
	defer plainTable.Close()
	eoTable, err := openVariantTable(ctx, url, "eo", run, &eo.counter)
	if err != nil {
		return nil, err
	}
	defer eoTable.Close()
	srv, err := devserver.Start(devserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench temporal: embedded Temporal server: %w", err)
	}
	defer srv.Stop()
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Addr(), Namespace: srv.Namespace(), Logger: sdklog.NewStructuredLogger(warnings)})
	if err != nil {
		return nil, fmt.Errorf("bench temporal: connecting to the embedded server: %w", err)
	}
	defer c.Close()
	host := local.NewHost()
	host.Logger = warnings
	defer host.Close()
	ssfCfg := ssf.Config{Name: stepSSF, Store: eoTable, Handler: incrementStep, Logger: warnings}
	if !cfg.PendingIndex {
		ssfCfg.Hold = ssftemporal.HoldWhileOpen(c, 2*ssf.DefaultLifetime) // the default GCBound
	}
	if _, err := host.Add(ssfCfg); err != nil {
		return nil, fmt.Errorf("bench temporal: %w", err)
	}
	r := &temporalRun{c: c, queue: "ssfkit-bench-" + run, run: run, steps: cfg.Steps, concurrency: cfg.Concurrency, timer: &activityTimer{}}
	w := worker.New(c, r.queue, worker.Options{Interceptors: []interceptor.WorkerInterceptor{r.timer}})
	ssftemporal.Register(w, host.Runtimes()...)
	w.RegisterWorkflowWithOptions(stepsWorkflow, workflow.RegisterOptions{Name: stepsWorkflowName})
	w.RegisterActivityWithOptions(plainStep{plainTable}.run, activity.RegisterOptions{Name: plainStepActivity})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("bench temporal: starting the worker: %w", err)
	}
	defer w.Stop()
	fmt.Fprintf(progress, "bench temporal: embedded server on %s, worker on task queue %s\n", srv.Addr(), r.queue)

	variants := []*temporalVariant{plain, eo}
	for _, v := range variants {
		fmt.Fprintf(progress, "bench temporal: %s: %d warm-up workflows\n", v.res.Variant, cfg.Warmup)
		if err := r.block(ctx, v, cfg.Warmup, false); err != nil {
			return nil, err
		}
	}
	for round, done := 0, 0; done < cfg.Workflows; round++ {
		n := min(cfg.Block, cfg.Workflows-done)
		for i := range variants {
			if err := r.block(ctx, variants[(round+i)%2], n, true); err != nil {
				return nil, err
			}
		}
		done += n
		fmt.Fprintf(progress, "bench temporal: %d of %d measured workflows per variant\n", done, cfg.Workflows)
	}
	for _, v := range variants {
		v.finish(cfg)
	}
	rep.Plain, rep.EO = plain.res, eo.res
	p, e := rep.Plain, rep.EO
	rep.Ratios = TemporalRatios{
		WorkflowMedian: ratio(e.Workflow.MedianUS, p.Workflow.MedianUS), WorkflowP99: ratio(e.Workflow.P99US, p.Workflow.P99US),
		StepMedian: ratio(e.Step.MedianUS, p.Step.MedianUS), StepP99: ratio(e.Step.P99US, p.Step.P99US),
		BodyMedian: ratio(e.Body.MedianUS, p.Body.MedianUS), BodyP99: ratio(e.Body.P99US, p.Body.P99US),
		Throughput: ratio(e.Throughput, p.Throughput),
	}
	rep.StepOverheadUS = e.Step.MedianUS - p.Step.MedianUS
	rep.BodyOverheadUS = e.Body.MedianUS - p.Body.MedianUS
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// openVariantTable opens a variant's own table next to the one at base, counting its requests.
func openVariantTable(ctx context.Context, base, suffix, run string, c *Counter) (*store.Table, error) {
	u, err := siblingURL(base, suffix)
	if err != nil {
		return nil, err
	}
	t, err := openCounted(ctx, strings.ReplaceAll(u, store.TablePlaceholder, "bt"+run), c)
	if err != nil {
		return nil, fmt.Errorf("bench temporal: %w", err)
	}
	return t, nil
}

// stepsWorkflow is bench.Steps: k steps of the variant, one after the other, each incrementing
// the counter keyed by the workflow id. It returns the counter, which must end at k.
func stepsWorkflow(ctx workflow.Context, k int, variant string) (int64, error) {
	// The same options for both variants: those ssftemporal gives SSF activities.
	ctx = workflow.WithActivityOptions(ctx, ssftemporal.DefaultActivityOptions)
	key := workflow.GetInfo(ctx).WorkflowExecution.ID
	var n int64
	for range k {
		var err error
		switch variant {
		case TemporalPlain:
			err = workflow.ExecuteActivity(ctx, plainStepActivity, key).Get(ctx, &n)
		case TemporalEO:
			err = ssftemporal.Call(ctx, stepSSF, key, &n)
		default:
			return 0, fmt.Errorf("bench: unknown variant %q", variant)
		}
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// plainStep is bench.PlainStep: a read-modify-write of the key's row straight on the store, with
// no exactly-once machinery (a retried attempt would increment twice).
type plainStep struct{ table *store.Table }

func (p plainStep) run(ctx context.Context, key string) (int64, error) {
	row := store.Key{Partition: key, Sort: counterTable}
	attrs, _, err := p.table.Get(ctx, row)
	if err != nil {
		return 0, err
	}
	n, _ := attrs["N"].(int64)
	n++
	_, err = p.table.Update(ctx, row, store.Always(), store.Update{store.SetAttr(store.Attr("N"), n)})
	return n, err
}

// incrementStep is the SSF benchstep: the same read-modify-write, exactly once.
func incrementStep(env *ssf.Env, input json.RawMessage) (any, error) {
	var key string
	if err := json.Unmarshal(input, &key); err != nil {
		return nil, fmt.Errorf("%w: %v", ssf.ErrBadInput, err)
	}
	var n int64
	if _, err := env.ReadInto(counterTable, key, &n); err != nil {
		return nil, err
	}
	n++
	return n, env.Write(counterTable, key, n)
}

// activityTimer is a worker interceptor that times every activity's function, by workflow, so
// the activity's own cost can be told from Temporal's scheduling around it.
type activityTimer struct {
	interceptor.WorkerInterceptorBase
	mu         sync.Mutex
	byWorkflow map[string]*activityTimes
}

type activityTimes struct {
	bodies  []time.Duration
	retries int
}

func (t *activityTimer) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &timedActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, timer: t}
}

// take returns and forgets what the activities of the workflow recorded.
func (t *activityTimer) take(workflowID string) activityTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := t.byWorkflow[workflowID]
	delete(t.byWorkflow, workflowID)
	if at == nil {
		return activityTimes{}
	}
	return *at
}

type timedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	timer *activityTimer
}

func (a *timedActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	out, err := a.Next.ExecuteActivity(ctx, in)
	d := time.Since(start)
	info := activity.GetInfo(ctx)
	t := a.timer
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byWorkflow == nil {
		t.byWorkflow = map[string]*activityTimes{}
	}
	at := t.byWorkflow[info.WorkflowExecution.ID]
	if at == nil {
		at = &activityTimes{}
		t.byWorkflow[info.WorkflowExecution.ID] = at
	}
	at.bodies = append(at.bodies, d)
	if info.Attempt > 1 {
		at.retries++
	}
	return out, err
}

// temporalRun starts the benchmark's workflows.
type temporalRun struct {
	c                  client.Client
	queue, run         string
	steps, concurrency int
	timer              *activityTimer
	seq                atomic.Int64
}

// temporalVariant accumulates one variant's measurements.
type temporalVariant struct {
	res     TemporalResult
	counter Counter

	mu        sync.Mutex
	workflows []time.Duration
	bodies    []time.Duration
	retries   int
	elapsed   time.Duration
	store     Counts
}

// block runs n workflows of the variant, concurrency at a time, measuring them if measured. The
// first failure stops the block.
func (r *temporalRun) block(ctx context.Context, v *temporalVariant, n int, measured bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c0, t0 := v.counter.Snapshot(), time.Now()
	next := make(chan struct{})
	var clients sync.WaitGroup
	for range min(r.concurrency, n) {
		clients.Go(func() {
			for range next {
				if err := r.workflow(ctx, v, measured); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for range n {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	clients.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if measured {
		v.elapsed += time.Since(t0)
		v.store = v.store.add(v.counter.Snapshot().Sub(c0))
	}
	return nil
}

// workflow runs one workflow of the variant and checks that its counter ended at k.
func (r *temporalRun) workflow(ctx context.Context, v *temporalVariant, measured bool) error {
	id := fmt.Sprintf("bench-%s-%s-%d", r.run, v.res.Variant, r.seq.Add(1))
	start := time.Now()
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: r.queue}, stepsWorkflowName, r.steps, v.res.Variant)
	var counter int64
	if err == nil {
		err = run.Get(ctx, &counter)
	}
	d := time.Since(start)
	times := r.timer.take(id)
	switch {
	case err != nil:
		return fmt.Errorf("bench temporal: %s workflow %s: %w", v.res.Variant, id, err)
	case counter != int64(r.steps):
		return fmt.Errorf("bench temporal: %s workflow %s: its counter ended at %d, want %d", v.res.Variant, id, counter, r.steps)
	case len(times.bodies) < r.steps:
		return fmt.Errorf("bench temporal: %s workflow %s: %d activities timed, want %d", v.res.Variant, id, len(times.bodies), r.steps)
	}
	if measured {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.workflows = append(v.workflows, d)
		v.bodies = append(v.bodies, times.bodies...)
		v.retries += times.retries
	}
	return nil
}

// finish summarises the variant's measured workflows.
func (v *temporalVariant) finish(cfg TemporalConfig) {
	res := &v.res
	steps := make([]time.Duration, len(v.workflows))
	for i, d := range v.workflows {
		steps[i] = d / time.Duration(cfg.Steps)
	}
	res.Workflow, res.Step, res.Body = Summarize(v.workflows), Summarize(steps), Summarize(v.bodies)
	res.OutsideBodyUS = res.Step.MedianUS - res.Body.MedianUS
	res.Seconds = v.elapsed.Seconds()
	if res.Seconds > 0 {
		res.Throughput = float64(len(v.workflows)) / res.Seconds
	}
	res.Store = v.store.PerOp(len(v.workflows) * cfg.Steps)
	res.Retries = v.retries
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// WriteMarkdown renders the report as Markdown.
func (r *TemporalReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p, e, x := r.Plain, r.EO, r.Ratios
	fmt.Fprintf(&b, "# ssfkit bench temporal\n\n")
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- Temporal: the embedded server (in memory, devserver.TunedConfig) and one worker, both in this process, on 127.0.0.1\n")
	fmt.Fprintf(&b, "- store: `%s`; the plain activity and the SSF each on their own table\n", r.Store)
	fmt.Fprintf(&b, "- a workflow runs %d steps one after the other; each step reads the workflow's own counter and writes it back incremented: %s as activity `%s` (one Get and one Update on the store, nothing logged), %s as SSF `%s` called with `ssftemporal.Call` (env.ReadInto and env.Write in an SSF instance per activity); same activity options for both\n",
		r.Steps, TemporalPlain, plainStepActivity, TemporalEO, stepSSF)
	index := "Config.Hold set as `ssfkit worker` sets it: activity instances skip the pending index, Temporal retrying them"
	if r.PendingIndex {
		index = "no Config.Hold (`--pending-index`): activity instances go through the pending index, as instances outside Temporal do"
	}
	fmt.Fprintf(&b, "- SSF runtime: %s\n", index)
	fmt.Fprintf(&b, "- per variant: %d workflows measured after %d unmeasured; %d in flight; the variants take turns in blocks of %d (the order swaps every round); throughput = measured workflows / time in the variant's measured blocks\n",
		r.Workflows, r.Warmup, r.Concurrency, r.Block)
	fmt.Fprintf(&b, "- workflow: from ExecuteWorkflow to its result, at the client; per step: workflow / %d; activity body: time inside the activity function (a worker interceptor times it), for an SSF the whole exactly-once instance\n", r.Steps)
	fmt.Fprintf(&b, "- started %s; took %.1f s; p99 is nearest-rank; times in ms\n\n", r.Started.UTC().Format(time.RFC3339), r.Seconds)
	b.WriteString("| | plain | exactly-once | EO/plain |\n|---|--:|--:|--:|\n")
	row := func(name string, plain, eo, ratio float64) {
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.2fx |\n", name, plain, eo, ratio)
	}
	row("workflow median", p.Workflow.MedianUS/1000, e.Workflow.MedianUS/1000, x.WorkflowMedian)
	row("workflow p99", p.Workflow.P99US/1000, e.Workflow.P99US/1000, x.WorkflowP99)
	row("per step median", p.Step.MedianUS/1000, e.Step.MedianUS/1000, x.StepMedian)
	row("per step p99", p.Step.P99US/1000, e.Step.P99US/1000, x.StepP99)
	row("activity body median", p.Body.MedianUS/1000, e.Body.MedianUS/1000, x.BodyMedian)
	row("activity body p99", p.Body.P99US/1000, e.Body.P99US/1000, x.BodyP99)
	row("per step outside the body (median step - median body)", p.OutsideBodyUS/1000, e.OutsideBodyUS/1000, ratio(e.OutsideBodyUS, p.OutsideBodyUS))
	fmt.Fprintf(&b, "| throughput, workflows/s | %.1f | %.1f | %.2fx |\n", p.Throughput, e.Throughput, x.Throughput)
	fmt.Fprintf(&b, "| store requests per step | %s | %s | |\n", p.Store, e.Store)
	fmt.Fprintf(&b, "| time in the store per step, mean | %.3f | %.3f | %.2fx |\n", p.Store.StoreUS()/1000, e.Store.StoreUS()/1000, ratio(e.Store.StoreUS(), p.Store.StoreUS()))
	fmt.Fprintf(&b, "| activity retries | %d | %d | |\n", p.Retries, e.Retries)
	fmt.Fprintf(&b, "\nPer-step overhead of exactly-once (EO per-step median - plain per-step median): %+.3f ms; the activity body's medians differ by %+.3f ms. Goal EO/plain <= %.1fx: workflow and per step median %.2fx (%s), p99 %.2fx (%s); per-step ratios equal the workflow's, a step being the workflow / %d.\n",
		r.StepOverheadUS/1000, r.BodyOverheadUS/1000, TemporalGoal, x.WorkflowMedian, goalVerdict(x.WorkflowMedian), x.WorkflowP99, goalVerdict(x.WorkflowP99), r.Steps)
	_, err := io.WriteString(w, b.String())
	return err
}

func goalVerdict(ratio float64) string {
	if ratio <= TemporalGoal {
		return "met"
	}
	return "not met"
}

// WritePlot writes a bar chart of the per-step and activity-body medians and p99s, plain vs
// exactly-once, as a PNG image.
func (r *TemporalReport) WritePlot(path string) error {
	p := newBarPlot(fmt.Sprintf("Temporal steps: plain activity vs exactly-once SSF (%d steps per workflow, %d in flight)", r.Steps, r.Concurrency), "ms")
	width := vg.Points(40)
	for i, res := range []TemporalResult{r.Plain, r.EO} {
		vals := plotter.Values{res.Step.MedianUS / 1000, res.Step.P99US / 1000, res.Body.MedianUS / 1000, res.Body.P99US / 1000}
		p.Y.Max = max(p.Y.Max, 1.1*slices.Max(vals)) // room above the tallest bar for the legend
		if err := addBars(p, i, 2, width, res.Variant, vals); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	p.NominalX("per step median", "per step p99", "activity body median", "activity body p99")
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
