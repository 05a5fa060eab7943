package bench

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Backend is a store to benchmark: URL has store.TablePlaceholder where table names go, and
// is called only when the backend's turn comes (it may start a server).
type Backend struct {
	Name string
	URL  func() (string, error)
}

// BackendsConfig configures RunBackends.
type BackendsConfig struct {
	Backends []Backend
	// Ops, Warmup and Block are as in OpsConfig, per backend.
	Ops, Warmup, Block int
}

// BackendsReport compares exactly-once and raw operations across backends, each pair measured
// side by side on the same backend in one run.
type BackendsReport struct {
	Machine Machine          `json:"machine"`
	Started time.Time        `json:"started"`
	Seconds float64          `json:"seconds"`
	Results []BackendResult  `json:"results"`
	Config  BackendsSettings `json:"config"`
}

// BackendsSettings records how the report was measured.
type BackendsSettings struct {
	Ops    int `json:"ops"`
	Warmup int `json:"warmup"`
	Block  int `json:"block"`
}

// BackendResult is one backend's short-DAAL measurements.
type BackendResult struct {
	Backend  string         `json:"backend"`
	Store    string         `json:"store"`
	Ops      []OpResult     `json:"ops"`
	Instance InstanceResult `json:"instance"`
}

// RunBackends runs the ops benchmark (short DAAL) on each backend in turn.
func RunBackends(ctx context.Context, cfg BackendsConfig, progress io.Writer) (*BackendsReport, error) {
	rep := &BackendsReport{Machine: thisMachine(), Started: time.Now(), Config: BackendsSettings{cfg.Ops, cfg.Warmup, cfg.Block}}
	for _, b := range cfg.Backends {
		url, err := b.URL()
		if err != nil {
			return nil, fmt.Errorf("bench backends: %s: %w", b.Name, err)
		}
		fmt.Fprintf(progress, "bench backends: %s ...\n", b.Name)
		ops, err := RunOps(ctx, OpsConfig{StoreURL: url, Ops: cfg.Ops, Warmup: cfg.Warmup, Block: cfg.Block}, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("bench backends: %s: %w", b.Name, err)
		}
		c := ops.Configs[0]
		rep.Results = append(rep.Results, BackendResult{Backend: b.Name, Store: ops.Store, Ops: c.Ops, Instance: c.Instance})
		fmt.Fprintf(progress, "bench backends: %s done in %.1fs\n", b.Name, ops.Seconds)
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// WriteMarkdown renders the report as Markdown.
func (r *BackendsReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench backends\n\n")
	fmt.Fprintf(&b, "- machine: %s; started %s; took %.0f s\n", r.Machine, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(&b, "- per backend and operation: %d raw and %d exactly-once (EO) operations measured after %d unmeasured, alternating in blocks of %d, short DAAL (GC between blocks); every backend's server runs on this machine (emulators for the clouds), so absolute times say little about the cloud and the EO/raw ratios say what ssfkit costs there\n",
		r.Config.Ops, r.Config.Ops, r.Config.Warmup, r.Config.Block)
	b.WriteString("\n| backend | op | raw median µs | EO median µs | EO/raw median | raw p99 µs | EO p99 µs | EO/raw p99 | store requests per EO op |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, res := range r.Results {
		for _, o := range res.Ops {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx | %s |\n",
				res.Backend, o.Op, o.Raw.MedianUS, o.EO.MedianUS, o.RatioMedian, o.Raw.P99US, o.EO.P99US, o.RatioP99, o.EOStore)
		}
	}
	b.WriteString("\nPer-instance overhead (an instance that does nothing: intent creation and completion), median / p99 µs:\n\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "- %s: %.0f / %.0f (%s)\n", res.Backend, res.Instance.MedianUS, res.Instance.P99US, res.Instance.Store)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var barColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// WritePlot writes a grouped bar chart of the EO/raw median ratio per store operation and
// backend.
func (r *BackendsReport) WritePlot(path string) error {
	if len(r.Results) == 0 {
		return fmt.Errorf("plot %s: no results", path)
	}
	p := newBarPlot("Exactly-once / raw, median latency, per operation and backend", "EO / raw (x)")
	width := vg.Points(60 / float64(len(r.Results)))
	var names []string
	for _, o := range r.Results[0].Ops {
		if o.Op != SyncInvoke.String() { // its raw form is an in-process call: no ratio to show
			names = append(names, o.Op)
		}
	}
	for i, res := range r.Results {
		vals := make(plotter.Values, len(names))
		for j, name := range names {
			for _, o := range res.Ops {
				if o.Op == name {
					vals[j] = o.RatioMedian
				}
			}
		}
		if err := addBars(p, i, len(r.Results), width, res.Backend, vals); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	p.NominalX(names...)
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
