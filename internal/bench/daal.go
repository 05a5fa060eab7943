package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Defaults of DAALConfig: Beldi §7.5's experiment scaled down from minutes to seconds.
const (
	DefaultDAALDuration    = 15 * time.Second
	DefaultDAALSample      = 250 * time.Millisecond
	DefaultDAALGCEvery     = 100 * time.Millisecond
	DefaultDAALLifetime    = 200 * time.Millisecond
	DefaultDAALGCBound     = 400 * time.Millisecond
	DefaultDAALRowCapacity = 4
	DefaultDAALWriters     = 4
	DefaultDAALRate        = 200
)

// DAALConfig configures RunDAAL.
type DAALConfig struct {
	// StoreURL is the store; each run gets its own sibling table. Empty means fresh SQLite
	// files in temporary directories.
	StoreURL string
	// Duration of each run (GC on, GC off), rounded up to whole samples.
	Duration time.Duration
	// Sample is how often the DAAL's shape and the write latencies are recorded.
	Sample time.Duration
	// GCEvery is the garbage collector's timer in the GC-on run.
	GCEvery time.Duration
	// Lifetime and GCBound (Beldi's T) configure the runtime; Lifetime < GCBound.
	Lifetime, GCBound time.Duration
	// RowCapacity is small so that rows fill up quickly.
	RowCapacity int
	// Writers run instances concurrently; each instance writes the one key once.
	Writers int
	// Rate is how many instances start per second at most (a tick finding every writer busy is
	// skipped); 0 keeps every writer busy.
	Rate float64
}

func (c *DAALConfig) validate() error {
	switch {
	case c.Duration <= 0 || c.Sample <= 0 || c.GCEvery <= 0:
		return fmt.Errorf("bench daal: --duration, --sample and --gc-every must be positive")
	case c.Lifetime <= 0 || c.GCBound <= c.Lifetime:
		return fmt.Errorf("bench daal: need 0 < --lifetime < --gc-bound (the GC may only remove what no execution can still use), got %v and %v", c.Lifetime, c.GCBound)
	case c.RowCapacity < 1:
		return fmt.Errorf("bench daal: --row-capacity must be at least 1, got %d", c.RowCapacity)
	case c.Writers < 1:
		return fmt.Errorf("bench daal: --writers must be at least 1, got %d", c.Writers)
	case c.Rate < 0 || c.Rate > 1e6:
		return fmt.Errorf("bench daal: --rate must be between 0 and 1000000 instances/s, got %v", c.Rate)
	}
	return nil
}

// DAALReport is the outcome of RunDAAL.
type DAALReport struct {
	Machine     Machine   `json:"machine"`
	Duration    string    `json:"duration"`
	Sample      string    `json:"sample"`
	GCEvery     string    `json:"gc_every"`
	Lifetime    string    `json:"lifetime"`
	GCBound     string    `json:"gc_bound"`
	RowCapacity int       `json:"row_capacity"`
	Writers     int       `json:"writers"`
	Rate        float64   `json:"rate"`
	Started     time.Time `json:"started"`
	Runs        []DAALRun `json:"runs"`
}

// DAALRun is one run: with the garbage collector on or off.
type DAALRun struct {
	GC     bool        `json:"gc"`
	Store  string      `json:"store"`
	Points []DAALPoint `json:"points"`
	// Instances completed, failed (the first failure kept), and rate ticks skipped because
	// every writer was busy.
	Instances  int    `json:"instances"`
	Failed     int    `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
	Skipped    int64  `json:"skipped"`
	// Write is the latency of the exactly-once write; Instance of the whole request (Beldi
	// Fig. 16's response time of an SSF that does one write).
	Write    Summary `json:"write"`
	Instance Summary `json:"instance"`
	// GCPass is the duration of the garbage collector's passes.
	GCPass       Summary `json:"gc_pass"`
	GCErrors     int     `json:"gc_errors"`
	MaxReachable int     `json:"max_reachable"`
	MaxStored    int     `json:"max_stored"`
	Final        struct {
		Reachable int `json:"reachable"`
		Stored    int `json:"stored"`
	} `json:"final"`
}

// DAALPoint is one sample.
type DAALPoint struct {
	Seconds   float64 `json:"t_s"`
	Reachable int     `json:"reachable_rows"`
	Stored    int     `json:"stored_rows"`
	// Writes completed since the previous sample, their latency, and that of their requests.
	Writes          int     `json:"writes"`
	WriteMedianUS   float64 `json:"write_median_us"`
	WriteP99US      float64 `json:"write_p99_us"`
	RequestMedianUS float64 `json:"request_median_us"`
}

// RunDAAL has instances write one key for a while and samples the length of its linked DAAL
// and the write latency, with the garbage collector running on a timer and then without it
// (Beldi §7.5, Fig. 16).
func RunDAAL(ctx context.Context, cfg DAALConfig, progress io.Writer) (*DAALReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &DAALReport{Machine: thisMachine(), Duration: cfg.Duration.String(), Sample: cfg.Sample.String(),
		GCEvery: cfg.GCEvery.String(), Lifetime: cfg.Lifetime.String(), GCBound: cfg.GCBound.String(),
		RowCapacity: cfg.RowCapacity, Writers: cfg.Writers, Rate: cfg.Rate, Started: time.Now()}
	for _, gc := range []bool{true, false} {
		fmt.Fprintf(progress, "bench daal: GC %s for %v ...\n", onOff(gc), cfg.Duration)
		run, err := runDAAL(ctx, cfg, gc)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench daal: GC %s: %d instances, DAAL at %d reachable / %d stored rows\n",
			onOff(gc), run.Instances, run.Final.Reachable, run.Final.Stored)
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func runDAAL(ctx context.Context, cfg DAALConfig, gc bool) (DAALRun, error) {
	run := DAALRun{GC: gc}
	url := cfg.StoreURL
	if url != "" {
		var err error
		if url, err = siblingURL(url, "gc_"+onOff(gc)); err != nil {
			return run, err
		}
	}
	s, err := NewSuite(ctx, SuiteConfig{StoreURL: url, RowCapacity: cfg.RowCapacity, Lifetime: cfg.Lifetime, GCBound: cfg.GCBound})
	if err != nil {
		return run, err
	}
	defer s.Close()
	run.Store = s.Store()
	it, err := s.NewItem(ctx, 1)
	if err != nil {
		return run, err
	}

	var (
		mu                    sync.Mutex
		interval, intervalReq []time.Duration // latencies since the last sample
		writes, instances     []time.Duration
		gcPasses              []time.Duration
		firstErr              error
		skipped               atomic.Int64
		stop                  = make(chan struct{})
		work                  = make(chan struct{})
		writersDone, bgDone   sync.WaitGroup
		failed, gcErrs        int
		firstGCErr            error
	)
	for range cfg.Writers {
		writersDone.Go(func() {
			for range work {
				var wd time.Duration
				t0 := time.Now()
				err := s.Instance(ctx, func(env *ssf.Env) error {
					w0 := time.Now()
					err := s.EO(env, Write, it)
					wd = time.Since(w0)
					return err
				})
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					failed++
					firstErr = firstOf(firstErr, err)
				} else {
					interval, intervalReq = append(interval, wd), append(intervalReq, d)
					writes, instances = append(writes, wd), append(instances, d)
				}
				mu.Unlock()
			}
		})
	}
	bgDone.Go(func() {
		defer close(work)
		if cfg.Rate == 0 {
			for {
				select {
				case <-stop:
					return
				case work <- struct{}{}:
				}
			}
		}
		t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				select {
				case work <- struct{}{}:
				default:
					skipped.Add(1)
				}
			}
		}
	})
	if gc {
		bgDone.Go(func() {
			t := time.NewTicker(cfg.GCEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				t0 := time.Now()
				_, err := s.Runtime().CollectGarbage(ctx)
				d := time.Since(t0)
				mu.Lock()
				gcPasses = append(gcPasses, d)
				if err != nil {
					gcErrs++
					firstGCErr = firstOf(firstGCErr, err)
				}
				mu.Unlock()
			}
		})
	}

	start := time.Now()
	sample := func() error {
		shape, err := s.DAAL(ctx, it)
		if err != nil {
			return err
		}
		mu.Lock()
		w, req := Summarize(interval), Summarize(intervalReq)
		interval, intervalReq = nil, nil
		mu.Unlock()
		run.Points = append(run.Points, DAALPoint{Seconds: time.Since(start).Seconds(), Reachable: shape.Reachable,
			Stored: shape.Stored, Writes: w.N, WriteMedianUS: w.MedianUS, WriteP99US: w.P99US, RequestMedianUS: req.MedianUS})
		run.MaxReachable, run.MaxStored = max(run.MaxReachable, shape.Reachable), max(run.MaxStored, shape.Stored)
		return nil
	}
	err = sample()
	tick := time.NewTicker(cfg.Sample)
	for i := time.Duration(0); err == nil && i < cfg.Duration; i += cfg.Sample {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
			err = sample()
		}
	}
	tick.Stop()
	close(stop)
	writersDone.Wait()
	bgDone.Wait()
	if err != nil {
		return run, err
	}

	run.Instances, run.Failed, run.Skipped, run.GCErrors = len(instances), failed, skipped.Load(), gcErrs
	run.Write, run.Instance, run.GCPass = Summarize(writes), Summarize(instances), Summarize(gcPasses)
	if firstErr != nil {
		run.FirstError = firstErr.Error()
	}
	if run.Instances == 0 {
		if firstErr != nil {
			return run, fmt.Errorf("bench daal: no instance completed; the first failure: %w", firstErr)
		}
		return run, fmt.Errorf("bench daal: no instance completed in %v; raise --duration or --rate", cfg.Duration)
	}
	if firstGCErr != nil {
		return run, fmt.Errorf("bench daal: garbage collection failed %d times: %w", gcErrs, firstGCErr)
	}
	shape, err := s.DAAL(ctx, it)
	if err != nil {
		return run, err
	}
	run.Final.Reachable, run.Final.Stored = shape.Reachable, shape.Stored
	run.MaxReachable, run.MaxStored = max(run.MaxReachable, shape.Reachable), max(run.MaxStored, shape.Stored)
	return run, nil
}

// cmp keeps the first error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// WriteCSV writes every sample of every run, one row each.
func (r *DAALReport) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{"gc", "t_s", "reachable_rows", "stored_rows", "writes", "write_median_us", "write_p99_us", "request_median_us"}}
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	for _, run := range r.Runs {
		for _, p := range run.Points {
			rows = append(rows, []string{onOff(run.GC), f(p.Seconds, 3), strconv.Itoa(p.Reachable), strconv.Itoa(p.Stored),
				strconv.Itoa(p.Writes), f(p.WriteMedianUS, 1), f(p.WriteP99US, 1), f(p.RequestMedianUS, 1)})
		}
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}

// WriteMarkdown renders a summary of the runs.
func (r *DAALReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench daal\n\n")
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	rate := fmt.Sprintf("at most %.0f instances/s", r.Rate)
	if r.Rate == 0 {
		rate = "as fast as they complete"
	}
	fmt.Fprintf(&b, "- %d writers run instances that each write the same key once, %s, for %s per run\n", r.Writers, rate, r.Duration)
	fmt.Fprintf(&b, "- RowCapacity %d, Lifetime %s, GCBound (T) %s; GC every %s when on; sampled every %s\n\n",
		r.RowCapacity, r.Lifetime, r.GCBound, r.GCEvery, r.Sample)
	b.WriteString("| GC | instances | failed | DAAL reachable rows: max / end | stored rows: max / end | write median µs | write p99 µs | request median µs | request p99 µs | GC passes | GC pass median ms |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d / %d | %d / %d | %.1f | %.1f | %.1f | %.1f | %d | %.2f |\n",
			onOff(run.GC), run.Instances, run.Failed, run.MaxReachable, run.Final.Reachable, run.MaxStored, run.Final.Stored,
			run.Write.MedianUS, run.Write.P99US, run.Instance.MedianUS, run.Instance.P99US, run.GCPass.N, run.GCPass.MedianUS/1000)
	}
	for _, run := range r.Runs {
		if run.FirstError != "" {
			fmt.Fprintf(&b, "\nGC %s: %d instances failed; the first: %s\n", onOff(run.GC), run.Failed, run.FirstError)
		}
		if run.Skipped > 0 {
			fmt.Fprintf(&b, "\nGC %s: %d rate ticks found every writer busy and were skipped.\n", onOff(run.GC), run.Skipped)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
