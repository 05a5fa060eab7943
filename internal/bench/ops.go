package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Defaults of OpsConfig.
const (
	DefaultOps      = 2000
	DefaultWarmup   = 100
	DefaultBlock    = 50
	DefaultDAALRows = 20 // Beldi §7.3: the DAAL's length after 30 minutes without GC
)

// OpsConfig configures RunOps.
type OpsConfig struct {
	// StoreURL is the store; empty means a fresh SQLite file in a temporary directory.
	StoreURL string
	// Ops is the number of measured operations per kind, raw and exactly-once each.
	Ops int
	// Warmup operations per kind and variant run first and are not measured.
	Warmup int
	// Block is how many operations run back to back before the other variant's turn: raw and
	// exactly-once blocks alternate (and swap which goes first), so drift affects both alike.
	// Each exactly-once block is one instance.
	Block int
	// RowCapacity is the runtime's write-log entries per DAAL row (0: ssf.DefaultRowCapacity).
	RowCapacity int
	// DAALRows is the length of the pre-grown DAAL of the second configuration; 0 or 1 runs
	// only the first (short DAAL).
	DAALRows int
}

func (c *OpsConfig) validate() error {
	if c.RowCapacity == 0 {
		c.RowCapacity = ssf.DefaultRowCapacity
	}
	if err := checkBlocks("ops", c.Ops, c.Warmup, c.Block); err != nil {
		return err
	}
	switch {
	case c.RowCapacity < 1:
		return fmt.Errorf("bench ops: --row-capacity must be at least 1, got %d", c.RowCapacity)
	case c.DAALRows < 0:
		return fmt.Errorf("bench ops: --daal-rows must not be negative, got %d", c.DAALRows)
	}
	return nil
}

// checkBlocks checks the flags of a benchmark that alternates blocks of operations.
func checkBlocks(bench string, ops, warmup, block int) error {
	switch {
	case ops < 1:
		return fmt.Errorf("bench %s: --ops must be at least 1, got %d", bench, ops)
	case warmup < 0:
		return fmt.Errorf("bench %s: --warmup must not be negative, got %d", bench, warmup)
	case block < 1:
		return fmt.Errorf("bench %s: --block must be at least 1, got %d", bench, block)
	}
	return nil
}

// OpsReport is the outcome of RunOps.
type OpsReport struct {
	Machine     Machine        `json:"machine"`
	Store       string         `json:"store"`
	Ops         int            `json:"ops"`
	Warmup      int            `json:"warmup"`
	Block       int            `json:"block"`
	RowCapacity int            `json:"row_capacity"`
	Started     time.Time      `json:"started"`
	Seconds     float64        `json:"seconds"`
	Configs     []ConfigResult `json:"configs"`
}

// ConfigResult is one DAAL configuration's measurements.
type ConfigResult struct {
	Name     string `json:"name"`
	DAALRows int    `json:"daal_rows"`
	// ReachableMin and ReachableMax are the DAAL's reachable rows observed around the blocks.
	ReachableMin int        `json:"reachable_min"`
	ReachableMax int        `json:"reachable_max"`
	Ops          []OpResult `json:"ops"`
	// Instance is an instance that does nothing: the per-instance cost kept out of Ops.
	Instance InstanceResult `json:"instance"`
}

// OpResult compares one operation raw and exactly-once.
type OpResult struct {
	Op          string   `json:"op"`
	Raw         Summary  `json:"raw"`
	EO          Summary  `json:"eo"`
	RatioMedian float64  `json:"ratio_median"`
	RatioP99    float64  `json:"ratio_p99"`
	RawStore    StoreOps `json:"raw_store_ops"`
	EOStore     StoreOps `json:"eo_store_ops"`
}

// InstanceResult is the cost of an instance that does nothing.
type InstanceResult struct {
	Summary
	Store StoreOps `json:"store_ops"`
}

type series struct {
	d     []time.Duration
	store Counts
}

func (x *series) add(s Sample) {
	x.d = append(x.d, s.D)
	x.store = x.store.add(s.Store)
}

type opsSeries struct {
	raw, eo  [numOps]series
	instance series
}

// RunOps measures raw and exactly-once Read, Write, CondWrite and SyncInvoke side by side on one
// store, first with a short DAAL and then with a pre-grown one. progress receives a line per
// configuration.
func RunOps(ctx context.Context, cfg OpsConfig, progress io.Writer) (*OpsReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	s, err := NewSuite(ctx, SuiteConfig{StoreURL: cfg.StoreURL, RowCapacity: cfg.RowCapacity})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep := &OpsReport{Machine: thisMachine(), Store: s.Store(), Ops: cfg.Ops, Warmup: cfg.Warmup,
		Block: cfg.Block, RowCapacity: cfg.RowCapacity, Started: start}
	rows := []int{1}
	if cfg.DAALRows > 1 {
		rows = append(rows, cfg.DAALRows)
	}
	for _, n := range rows {
		t0 := time.Now()
		fmt.Fprintf(progress, "bench ops: %s ...\n", configName(n))
		res, err := runOpsConfig(ctx, s, cfg, n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench ops: %s done in %.1fs\n", configName(n), time.Since(t0).Seconds())
		rep.Configs = append(rep.Configs, res)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func configName(rows int) string {
	if rows <= 1 {
		return "short DAAL"
	}
	return fmt.Sprintf("%d-row DAAL", rows)
}

func runOpsConfig(ctx context.Context, s *Suite, cfg OpsConfig, rows int) (ConfigResult, error) {
	res := ConfigResult{Name: configName(rows), DAALRows: rows, ReachableMin: math.MaxInt}
	it, err := s.NewItem(ctx, rows)
	if err != nil {
		return res, err
	}
	if cfg.Warmup > 0 {
		if err := opsRound(ctx, s, it, cfg.Warmup, true, &opsSeries{}); err != nil {
			return res, err
		}
	}
	observe := func() error {
		shape, err := s.DAAL(ctx, it)
		res.ReachableMin = min(res.ReachableMin, shape.Reachable)
		res.ReachableMax = max(res.ReachableMax, shape.Reachable)
		return err
	}
	var acc opsSeries
	for done, r := 0, 0; done < cfg.Ops; r++ {
		n := min(cfg.Block, cfg.Ops-done)
		// Between blocks, not timed: what the garbage collector would have done meanwhile.
		if err := s.CollectGarbage(ctx); err != nil {
			return res, err
		}
		if err := observe(); err != nil {
			return res, err
		}
		if err := opsRound(ctx, s, it, n, r%2 == 0, &acc); err != nil {
			return res, err
		}
		if err := observe(); err != nil {
			return res, err
		}
		done += n
	}
	for i, op := range Ops {
		raw, eo := Summarize(acc.raw[i].d), Summarize(acc.eo[i].d)
		res.Ops = append(res.Ops, OpResult{
			Op: op.String(), Raw: raw, EO: eo,
			RatioMedian: ratio(eo.MedianUS, raw.MedianUS), RatioP99: ratio(eo.P99US, raw.P99US),
			RawStore: acc.raw[i].store.PerOp(raw.N), EOStore: acc.eo[i].store.PerOp(eo.N),
		})
	}
	res.Instance = InstanceResult{Summary: Summarize(acc.instance.d)}
	res.Instance.Store = acc.instance.store.PerOp(res.Instance.N)
	return res, nil
}

// opsRound runs one block of n operations of every kind, raw and exactly-once, then n empty
// instances.
func opsRound(ctx context.Context, s *Suite, it *Item, n int, rawFirst bool, acc *opsSeries) error {
	for i, op := range Ops {
		raw := func() error { return s.RawBlock(ctx, op, it, n, acc.raw[i].add) }
		eo := func() error { return s.EOBlock(ctx, op, it, n, Hooks{Each: acc.eo[i].add}) }
		first, second := raw, eo
		if !rawFirst {
			first, second = eo, raw
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	return s.InstanceBlock(ctx, n, acc.instance.add)
}

// WriteMarkdown renders the report as Markdown.
func (r *OpsReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench ops\n\n")
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- store: `%s` (the callee of SyncInvoke has a sibling table in the same store)\n", r.Store)
	fmt.Fprintf(&b, "- per operation and configuration: %d raw and %d exactly-once (EO) operations measured, after %d of each unmeasured; raw and EO alternate in blocks of %d, one instance per EO block\n",
		r.Ops, r.Ops, r.Warmup, r.Block)
	fmt.Fprintf(&b, "- RowCapacity %d; started %s; took %.1f s\n", r.RowCapacity, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	b.WriteString("- p99 is nearest-rank; ops/s is one caller back to back (1 / mean); raw SyncInvoke calls a plain Go function in-process, so its ratio only says that an in-process call costs nothing next to store requests\n")
	for _, c := range r.Configs {
		fmt.Fprintf(&b, "\n## %s (%s reachable while measuring)\n\n", upperFirst(c.Name), rowRange(c.ReachableMin, c.ReachableMax))
		if c.DAALRows <= 1 {
			b.WriteString("The garbage collector runs between blocks, so the DAAL holds only the rows written since.\n\n")
		} else {
			fmt.Fprintf(&b, "%d rows are held by a pending instance, so the garbage collector, which runs between blocks, keeps them (Beldi §7.3 populates the key with 20 rows).\n\n", c.DAALRows)
		}
		b.WriteString("| op | raw median µs | raw p99 µs | EO median µs | EO p99 µs | EO/raw median | EO/raw p99 | raw mean µs | EO mean µs | raw ops/s | EO ops/s | store requests per EO op |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, o := range c.Ops {
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.1f | %.1f | %.0f | %.0f | %s |\n",
				o.Op, o.Raw.MedianUS, o.Raw.P99US, o.EO.MedianUS, o.EO.P99US, o.RatioMedian, o.RatioP99,
				o.Raw.MeanUS, o.EO.MeanUS, o.Raw.OpsPerSec, o.EO.OpsPerSec, o.EOStore)
		}
		b.WriteString("\nWhere the exactly-once time goes (means per operation, µs; the counting driver times every store request):\n\n")
		b.WriteString("| op | raw mean | EO mean | in scans | in gets | in updates | in deletes | outside the store |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, o := range c.Ops {
			st := o.EOStore
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
				o.Op, o.Raw.MeanUS, o.EO.MeanUS, st.ScanUS, st.GetUS, st.UpdateUS, st.DeleteUS, o.EO.MeanUS-st.StoreUS())
		}
		in := c.Instance
		fmt.Fprintf(&b, "\nPer-instance overhead, not in the rows above (an instance that does nothing: intent creation and completion): median %.1f µs, p99 %.1f µs, mean %.1f µs; %s.\n",
			in.MedianUS, in.P99US, in.MeanUS, in.Store)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func rowRange(lo, hi int) string {
	if lo == hi {
		return plural(lo, "row")
	}
	return fmt.Sprintf("%d-%d rows", lo, hi)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
