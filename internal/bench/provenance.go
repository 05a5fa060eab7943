package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
)

// ProvenanceConfig configures RunProvenance: the exactly-once operations of bench ops with
// provenance capture off, metadata and full.
type ProvenanceConfig struct {
	StoreURL           string
	Ops, Warmup, Block int
}

// ProvenanceReport is the outcome of RunProvenance.
type ProvenanceReport struct {
	Machine Machine             `json:"machine"`
	Store   string              `json:"store"`
	Ops     int                 `json:"ops"`
	Block   int                 `json:"block"`
	Results []ProvenanceResult  `json:"results"`
	Export  []ProvenanceExports `json:"export"`
	Seconds float64             `json:"seconds"`
}

// ProvenanceResult is one operation at each capture level, with the ratios to off.
type ProvenanceResult struct {
	Op               string  `json:"op"`
	Off              Summary `json:"off"`
	Metadata         Summary `json:"metadata"`
	Full             Summary `json:"full"`
	MetadataMedian   float64 `json:"ratio_metadata_median"`
	FullMedian       float64 `json:"ratio_full_median"`
	MetadataP99      float64 `json:"ratio_metadata_p99"`
	FullP99          float64 `json:"ratio_full_p99"`
	RequestsOff      float64 `json:"requests_per_op_off"`
	RequestsMetadata float64 `json:"requests_per_op_metadata"`
	RequestsFull     float64 `json:"requests_per_op_full"`
}

// ProvenanceExports is what the garbage collector's exports of one capture level cost.
type ProvenanceExports struct {
	Capture        provenance.Capture `json:"capture"`
	Instances      int64              `json:"instances"`
	Exports        int64              `json:"exports"`
	Seconds        float64            `json:"seconds"`
	MicrosPerInst  float64            `json:"us_per_instance"`
	DatabaseBytes  int64              `json:"database_bytes"`
	BytesPerRecord float64            `json:"bytes_per_instance"`
}

// countingSink times a sink's exports.
type countingSink struct {
	provenance.Sink
	instances, exports, ns atomic.Int64
}

func (c *countingSink) Export(ctx context.Context, batch string, recs []provenance.Record) error {
	start := time.Now()
	err := c.Sink.Export(ctx, batch, recs)
	c.ns.Add(int64(time.Since(start)))
	c.exports.Add(1)
	c.instances.Add(int64(len(recs)))
	return err
}

var captureLevels = [3]provenance.Capture{provenance.CaptureOff, provenance.CaptureMetadata, provenance.CaptureFull}

// RunProvenance measures each exactly-once operation (and an empty instance) at the three
// capture levels, in alternating blocks whose order rotates, each level on a suite of its own
// (an SSF's capture is its configuration), and what the garbage collector's exports to an
// SQLite sink cost.
func RunProvenance(ctx context.Context, cfg ProvenanceConfig, progress io.Writer) (*ProvenanceReport, error) {
	if err := checkBlocks("provenance", cfg.Ops, cfg.Warmup, cfg.Block); err != nil {
		return nil, err
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "ssfkit-bench-provenance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var suites [3]*Suite
	var sinks [3]*countingSink
	var items [3]*Item
	for i, c := range captureLevels {
		sc := SuiteConfig{StoreURL: cfg.StoreURL, Provenance: c}
		if c != provenance.CaptureOff {
			s, err := sqlitesink.Open(ctx, filepath.Join(dir, string(c)+".db"), 0)
			if err != nil {
				return nil, err
			}
			defer s.Close()
			sinks[i] = &countingSink{Sink: s}
			sc.ProvenanceSink = sinks[i]
		}
		if suites[i], err = NewSuite(ctx, sc); err != nil {
			return nil, err
		}
		defer suites[i].Close()
		if items[i], err = suites[i].NewItem(ctx, 1); err != nil {
			return nil, err
		}
	}
	var acc [3]opsSeries
	var reqs [3][numOps]int64
	round := func(n, r int, into *[3]opsSeries, count bool) error {
		for i, op := range Ops {
			for k := range 3 {
				v := (k + r) % 3
				before := suites[v].Counter().Snapshot().RoundTrips()
				if err := suites[v].EOBlock(ctx, op, items[v], n, Hooks{Each: into[v].eo[i].add}); err != nil {
					return err
				}
				if count {
					reqs[v][i] += suites[v].Counter().Snapshot().RoundTrips() - before
				}
			}
		}
		for k := range 3 {
			v := (k + r) % 3
			if err := suites[v].InstanceBlock(ctx, n, into[v].instance.add); err != nil {
				return err
			}
		}
		return nil
	}
	if cfg.Warmup > 0 {
		if err := round(cfg.Warmup, 0, &[3]opsSeries{}, false); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "bench provenance: %d operations per kind at each capture level (off, metadata, full) ...\n", cfg.Ops)
	for done, r := 0, 0; done < cfg.Ops; r++ {
		n := min(cfg.Block, cfg.Ops-done)
		for _, s := range suites {
			if err := s.CollectGarbage(ctx); err != nil {
				return nil, err
			}
		}
		if err := round(n, r, &acc, true); err != nil {
			return nil, err
		}
		done += n
	}
	for _, s := range suites {
		if err := s.CollectGarbage(ctx); err != nil {
			return nil, err
		}
	}
	rep := &ProvenanceReport{Machine: thisMachine(), Store: suites[0].Store(), Ops: cfg.Ops, Block: cfg.Block}
	perOp := func(v, i int) float64 { return float64(reqs[v][i]) / float64(cfg.Ops) }
	add := func(name string, i int, d func(v int) []time.Duration) {
		off, md, full := Summarize(d(0)), Summarize(d(1)), Summarize(d(2))
		res := ProvenanceResult{Op: name, Off: off, Metadata: md, Full: full,
			MetadataMedian: ratio(md.MedianUS, off.MedianUS), FullMedian: ratio(full.MedianUS, off.MedianUS),
			MetadataP99: ratio(md.P99US, off.P99US), FullP99: ratio(full.P99US, off.P99US)}
		if i >= 0 {
			res.RequestsOff, res.RequestsMetadata, res.RequestsFull = perOp(0, i), perOp(1, i), perOp(2, i)
		}
		rep.Results = append(rep.Results, res)
	}
	for i, op := range Ops {
		add(op.String(), i, func(v int) []time.Duration { return acc[v].eo[i].d })
	}
	add("empty instance", -1, func(v int) []time.Duration { return acc[v].instance.d })
	for i, c := range captureLevels[1:] {
		s := sinks[i+1]
		e := ProvenanceExports{Capture: c, Instances: s.instances.Load(), Exports: s.exports.Load(), Seconds: time.Duration(s.ns.Load()).Seconds()}
		if e.Instances > 0 {
			e.MicrosPerInst = e.Seconds * 1e6 / float64(e.Instances)
		}
		for _, suffix := range []string{"", "-wal"} { // pages not yet checkpointed are in the WAL
			if fi, err := os.Stat(filepath.Join(dir, string(c)+".db"+suffix)); err == nil {
				e.DatabaseBytes += fi.Size()
			}
		}
		if e.Instances > 0 {
			e.BytesPerRecord = float64(e.DatabaseBytes) / float64(e.Instances)
		}
		rep.Export = append(rep.Export, e)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// WriteMarkdown renders the report as Markdown.
func (r *ProvenanceReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench provenance\n\n")
	fmt.Fprintf(&b, "- machine: %s\n- store: `%s`\n", r.Machine, r.Store)
	fmt.Fprintf(&b, "- %d exactly-once operations per kind at each capture level, in blocks of %d whose order rotates; %.0f s\n\n", r.Ops, r.Block, r.Seconds)
	fmt.Fprintf(&b, "| operation | off median µs | metadata median µs | full median µs | metadata/off | full/off | metadata/off p99 | full/off p99 | requests/op off, metadata, full |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		reqs := "-"
		if x.RequestsOff > 0 {
			reqs = fmt.Sprintf("%.2f, %.2f, %.2f", x.RequestsOff, x.RequestsMetadata, x.RequestsFull)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |\n", x.Op, x.Off.MedianUS, x.Metadata.MedianUS, x.Full.MedianUS,
			x.MetadataMedian, x.FullMedian, x.MetadataP99, x.FullP99, reqs)
	}
	fmt.Fprintf(&b, "\nThe garbage collector's exports to the SQLite sink:\n\n| capture | instances | exports | µs per instance | database bytes per instance |\n|---|---|---|---|---|\n")
	for _, e := range r.Export {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.0f |\n", e.Capture, e.Instances, e.Exports, e.MicrosPerInst, e.BytesPerRecord)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
