package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingConfig configures RunTracing: the exactly-once operations of bench ops, with tracing
// off and on.
type TracingConfig struct {
	StoreURL           string
	Ops, Warmup, Block int
}

// TracingReport is the outcome of RunTracing.
type TracingReport struct {
	Machine Machine        `json:"machine"`
	Store   string         `json:"store"`
	Ops     int            `json:"ops"`
	Block   int            `json:"block"`
	Results []TracedResult `json:"results"`
	Spans   int            `json:"spans_recorded"`
	Seconds float64        `json:"seconds"`
}

// TracedResult is one operation with tracing off (OpenTelemetry's default: no SDK) and on
// (the SDK recording every span), and their ratios.
type TracedResult struct {
	Op          string  `json:"op"`
	Off         Summary `json:"off"`
	On          Summary `json:"on"`
	RatioMedian float64 `json:"ratio_median"`
	RatioP99    float64 `json:"ratio_p99"`
}

// discard is an exporter that drops what it is given: what recording costs, without a network.
type discard struct{ spans int }

func (d *discard) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	d.spans += len(s)
	return nil
}
func (d *discard) Shutdown(context.Context) error { return nil }

// RunTracing measures each exactly-once operation (and an empty instance) with tracing off and
// on, in alternating blocks that swap which goes first. Off is what a deployment without
// OTEL_* settings pays for the instrumentation; on samples every span into a batch processor
// whose exporter discards them.
func RunTracing(ctx context.Context, cfg TracingConfig, progress io.Writer) (*TracingReport, error) {
	if err := checkBlocks("tracing", cfg.Ops, cfg.Warmup, cfg.Block); err != nil {
		return nil, err
	}
	start := time.Now()
	s, err := NewSuite(ctx, SuiteConfig{StoreURL: cfg.StoreURL})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	exp := &discard{}
	recording := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	previous := otel.GetTracerProvider()
	defer otel.SetTracerProvider(previous)
	providers := [2]trace.TracerProvider{noop.NewTracerProvider(), recording}
	it, err := s.NewItem(ctx, 1)
	if err != nil {
		return nil, err
	}
	var acc [2]opsSeries
	round := func(n int, onFirst bool, into *[2]opsSeries) error {
		order := []int{0, 1}
		if onFirst {
			order = []int{1, 0}
		}
		for i, op := range Ops {
			for _, v := range order {
				otel.SetTracerProvider(providers[v])
				if err := s.EOBlock(ctx, op, it, n, Hooks{Each: into[v].eo[i].add}); err != nil {
					return err
				}
			}
		}
		for _, v := range order {
			otel.SetTracerProvider(providers[v])
			if err := s.InstanceBlock(ctx, n, into[v].instance.add); err != nil {
				return err
			}
		}
		return nil
	}
	if cfg.Warmup > 0 {
		if err := round(cfg.Warmup, false, &[2]opsSeries{}); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "bench tracing: %d operations per kind, off and on ...\n", cfg.Ops)
	for done, r := 0, 0; done < cfg.Ops; r++ {
		n := min(cfg.Block, cfg.Ops-done)
		if err := s.CollectGarbage(ctx); err != nil {
			return nil, err
		}
		if err := round(n, r%2 == 1, &acc); err != nil {
			return nil, err
		}
		done += n
	}
	if err := recording.Shutdown(ctx); err != nil {
		return nil, err
	}
	rep := &TracingReport{Machine: thisMachine(), Store: s.Store(), Ops: cfg.Ops, Block: cfg.Block, Spans: exp.spans}
	add := func(name string, off, on []time.Duration) {
		o, n := Summarize(off), Summarize(on)
		rep.Results = append(rep.Results, TracedResult{Op: name, Off: o, On: n,
			RatioMedian: ratio(n.MedianUS, o.MedianUS), RatioP99: ratio(n.P99US, o.P99US)})
	}
	for i, op := range Ops {
		add(op.String(), acc[0].eo[i].d, acc[1].eo[i].d)
	}
	add("empty instance", acc[0].instance.d, acc[1].instance.d)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// WriteMarkdown renders the report as Markdown.
func (r *TracingReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench tracing\n\n")
	fmt.Fprintf(&b, "- machine: %s\n- store: `%s`\n", r.Machine, r.Store)
	fmt.Fprintf(&b, "- %d exactly-once operations per kind with tracing off (no SDK) and on (every span recorded, exported to nowhere), in alternating blocks of %d; %d spans recorded; %.0f s\n\n",
		r.Ops, r.Block, r.Spans, r.Seconds)
	fmt.Fprintf(&b, "| operation | off median µs | on median µs | on/off median | off p99 µs | on p99 µs | on/off p99 |\n|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", x.Op, x.Off.MedianUS, x.On.MedianUS, x.RatioMedian, x.Off.P99US, x.On.P99US, x.RatioP99)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
