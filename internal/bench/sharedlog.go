package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// LogConfig configures RunLog.
type LogConfig struct {
	Backends []Backend `json:"-"`
	// Records is the number of records each measurement appends or reads.
	Records int
	// Writers is the number of concurrent appenders (and concurrent direct writers).
	Writers int
	// Batch is the records per Append call in the batched measurement.
	Batch int
	// RecordBytes is each record's size.
	RecordBytes int
}

// LogReport compares the shared log with direct table writes and reads of the same records, on
// each backend, measured side by side in one run.
type LogReport struct {
	Machine Machine     `json:"machine"`
	Started time.Time   `json:"started"`
	Seconds float64     `json:"seconds"`
	Config  LogConfig   `json:"config"`
	Results []LogResult `json:"results"`
}

// LogResult is one backend's measurements. Latencies are of one call by one caller; throughputs
// are records per second with Writers callers.
type LogResult struct {
	Backend string `json:"backend"`
	// One record per call, one caller.
	DirectWrite Summary `json:"direct_write"`
	Append      Summary `json:"append"`
	DirectRead  Summary `json:"direct_read"`
	Read        Summary `json:"read"`        // uncached: the record, then the sequencer row
	CachedRead  Summary `json:"cached_read"` // the record from the cache, the sequencer row read
	// Records per second with Writers concurrent callers.
	DirectWriteThroughput float64 `json:"direct_write_per_sec"`
	AppendThroughput      float64 `json:"append_per_sec"`         // one record per call
	BatchedThroughput     float64 `json:"batched_append_per_sec"` // Batch records per call
	// ReservationsPerRecord is sequencer updates per record in the concurrent single-record run:
	// below 1 when concurrent appends shared reservations.
	ReservationsPerRecord float64 `json:"reservations_per_record"`
}

// RunLog runs the shared log benchmark on each backend in turn.
func RunLog(ctx context.Context, cfg LogConfig, progress io.Writer) (*LogReport, error) {
	rep := &LogReport{Machine: thisMachine(), Started: time.Now(), Config: cfg}
	data := []byte(strings.Repeat("r", cfg.RecordBytes))
	for _, b := range cfg.Backends {
		urlPattern, err := b.URL()
		if err != nil {
			return nil, fmt.Errorf("bench log: %s: %w", b.Name, err)
		}
		fmt.Fprintf(progress, "bench log: %s ...\n", b.Name)
		start := time.Now()
		res, err := runLogOn(ctx, b.Name, urlPattern, cfg, data)
		if err != nil {
			return nil, fmt.Errorf("bench log: %s: %w", b.Name, err)
		}
		rep.Results = append(rep.Results, *res)
		fmt.Fprintf(progress, "bench log: %s done in %.1fs\n", b.Name, time.Since(start).Seconds())
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

func runLogOn(ctx context.Context, backend, urlPattern string, cfg LogConfig, data []byte) (*LogResult, error) {
	tbl, err := store.Open(ctx, strings.ReplaceAll(urlPattern, store.TablePlaceholder, fmt.Sprintf("benchlog%d", time.Now().UnixNano()%1e9)))
	if err != nil {
		return nil, err
	}
	defer tbl.Close()
	if d, ok := tbl.Driver().(store.Dropper); ok {
		defer d.Drop(context.WithoutCancel(ctx))
	}
	uncached, err := sharedlog.New(tbl, "bench", sharedlog.Options{CachedRecords: -1})
	if err != nil {
		return nil, err
	}
	cached, _ := sharedlog.New(tbl, "bench", sharedlog.Options{})
	res := &LogResult{Backend: backend}
	// Direct writes: the record's row, created if absent, as the log writes it.
	direct := func(prefix string, i int) error {
		_, err := tbl.Update(ctx, store.Key{Partition: prefix, Sort: fmt.Sprintf("%020d", i)}, store.RowAbsent(),
			store.Update{store.SetAttr(store.Attr("v"), data)})
		return err
	}
	single := func(color string) func(int) error {
		return func(int) error { _, err := uncached.Append(ctx, color, data); return err }
	}
	for _, c := range []string{"seq", "conc", "batch"} {
		if err := uncached.AddColor(ctx, c, ""); err != nil {
			return nil, err
		}
	}
	// Sequential latencies, direct and log interleaved in blocks so drift hits both alike.
	var dw, ap []time.Duration
	for block := 0; block < cfg.Records; block += 20 {
		n := min(20, cfg.Records-block)
		if err := timeEach(n, block, func(i int) error { return direct("direct", i) }, &dw); err != nil {
			return nil, err
		}
		if err := timeEach(n, block, single("seq"), &ap); err != nil {
			return nil, err
		}
	}
	res.DirectWrite, res.Append = Summarize(dw), Summarize(ap)
	var dr, rd, cr []time.Duration
	for block := 0; block < cfg.Records; block += 20 {
		n := min(20, cfg.Records-block)
		if err := timeEach(n, block, func(i int) error {
			_, _, err := tbl.Get(ctx, store.Key{Partition: "direct", Sort: fmt.Sprintf("%020d", i)})
			return err
		}, &dr); err != nil {
			return nil, err
		}
		if err := timeEach(n, block, func(i int) error { _, err := uncached.Read(ctx, "seq", uint64(i+1)); return err }, &rd); err != nil {
			return nil, err
		}
		if err := timeEach(n, block, func(i int) error { _, err := cached.Read(ctx, "seq", uint64(i+1)); return err }, &cr); err != nil {
			return nil, err
		}
	}
	res.DirectRead, res.Read, res.CachedRead = Summarize(dr), Summarize(rd), Summarize(cr)
	// Throughput with concurrent callers.
	res.DirectWriteThroughput, err = throughput(cfg.Records, cfg.Writers, 1, func(i int) error { return direct("direct-conc", i) })
	if err != nil {
		return nil, err
	}
	before := uncached.Stats().Reservations
	res.AppendThroughput, err = throughput(cfg.Records, cfg.Writers, 1, single("conc"))
	if err != nil {
		return nil, err
	}
	res.ReservationsPerRecord = float64(uncached.Stats().Reservations-before) / float64(cfg.Records)
	batch := make([][]byte, cfg.Batch)
	for i := range batch {
		batch[i] = data
	}
	res.BatchedThroughput, err = throughput(cfg.Records, cfg.Writers, cfg.Batch, func(int) error {
		_, err := uncached.Append(ctx, "batch", batch...)
		return err
	})
	return res, err
}

// timeEach times op(first), ..., op(first+n-1), appending to samples.
func timeEach(n, first int, op func(int) error, samples *[]time.Duration) error {
	for i := first; i < first+n; i++ {
		start := time.Now()
		if err := op(i); err != nil {
			return err
		}
		*samples = append(*samples, time.Since(start))
	}
	return nil
}

// throughput runs op records/perCall times over callers goroutines and returns records per second.
func throughput(records, callers, perCall int, op func(int) error) (float64, error) {
	calls := max(records/perCall, 1)
	var next sync.Mutex
	i := 0
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				next.Lock()
				mine := i
				i++
				next.Unlock()
				if mine >= calls {
					return
				}
				if err := op(mine); err != nil {
					next.Lock()
					firstErr = err
					i = calls
					next.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(calls*perCall) / time.Since(start).Seconds(), firstErr
}

// WriteMarkdown renders the report.
func (r *LogReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench log\n\n")
	fmt.Fprintf(&b, "- machine: %s; started %s; took %.0f s\n", r.Machine, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(&b, "- %d records of %d bytes per measurement; %d concurrent writers; batches of %d records\n\n", r.Config.Records, r.Config.RecordBytes, r.Config.Writers, r.Config.Batch)
	fmt.Fprintf(&b, "Latency of one call, one caller (median / p99, ms), and log/direct ratio of medians:\n\n")
	fmt.Fprintf(&b, "| backend | direct write | append | ratio | direct read | read (uncached) | ratio | read (cached record) |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2fx | %s | %s | %.2fx | %s |\n", x.Backend, ms(x.DirectWrite), ms(x.Append), ratio(x.Append.MedianUS, x.DirectWrite.MedianUS),
			ms(x.DirectRead), ms(x.Read), ratio(x.Read.MedianUS, x.DirectRead.MedianUS), ms(x.CachedRead))
	}
	fmt.Fprintf(&b, "\nThroughput with %d concurrent callers (records/s), and sequencer updates per record of the single-record appends (below 1: reservations shared):\n\n", r.Config.Writers)
	fmt.Fprintf(&b, "| backend | direct writes | appends (1 per call) | ratio | appends (%d per call) | ratio | reservations/record |\n|---|---|---|---|---|---|---|\n", r.Config.Batch)
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2fx | %.0f | %.2fx | %.2f |\n", x.Backend, x.DirectWriteThroughput, x.AppendThroughput,
			ratio(x.AppendThroughput, x.DirectWriteThroughput), x.BatchedThroughput, ratio(x.BatchedThroughput, x.DirectWriteThroughput), x.ReservationsPerRecord)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(s Summary) string { return fmt.Sprintf("%.2f / %.2f", s.MedianUS/1000, s.P99US/1000) }

// WritePlot writes a grouped bar chart of throughput relative to direct writes per backend.
func (r *LogReport) WritePlot(path string) error {
	if len(r.Results) == 0 {
		return fmt.Errorf("plot %s: no results", path)
	}
	p := newBarPlot(fmt.Sprintf("Shared log throughput / direct table writes, %d writers", r.Config.Writers), "log / direct (x)")
	width := vg.Points(24)
	series := []struct {
		name string
		of   func(LogResult) float64
	}{
		{"appends, 1 per call", func(x LogResult) float64 { return ratio(x.AppendThroughput, x.DirectWriteThroughput) }},
		{fmt.Sprintf("appends, %d per call", r.Config.Batch), func(x LogResult) float64 { return ratio(x.BatchedThroughput, x.DirectWriteThroughput) }},
	}
	var names []string
	for _, x := range r.Results {
		names = append(names, x.Backend)
	}
	for i, s := range series {
		vals := make(plotter.Values, len(r.Results))
		for j, x := range r.Results {
			vals[j] = s.of(x)
			p.Y.Max = max(p.Y.Max, 1.25*vals[j]) // room above the tallest bar for the legend
		}
		if err := addBars(p, i, len(series), width, s.name, vals); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	p.NominalX(names...)
	return p.Save(vg.Length(120+90*len(names))*vg.Points(1), 320, path)
}
