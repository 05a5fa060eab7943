package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/ssfkit/ssfkit/internal/bench"
	"github.com/ssfkit/ssfkit/internal/pgtest"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// benchmarks are `ssfkit bench`'s benchmarks, in the order its help lists them.
var benchmarks = []struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}{
	{"ops", "raw vs exactly-once Read, Write, CondWrite and SyncInvoke, side by side on one store, " +
		"with a short and with a pre-grown linked DAAL (Beldi §7.3)", benchOps},
	{"daal", "linked DAAL length and write latency over time, with and without garbage collection, " +
		"every instance writing one key (Beldi §7.5, Fig. 16)", benchDAAL},
	{"travel", "the travel reservation app: throughput, median and p99 latency of reservations with " +
		"transactions, with exactly-once alone, and with neither, and the double-bookings each produced " +
		"(Beldi §7.4, Fig. 15)", benchTravel},
	{"backends", "ops (short DAAL) on every backend the tests cover, each on a server this command " +
		"starts on 127.0.0.1: one table and one plot of the EO/raw ratios", benchBackends},
	{"temporal", "workflows of k steps on an embedded Temporal server, each step a plain activity or " +
		"an exactly-once SSF activity: per-step overhead and throughput", benchTemporal},
	{"log", "the shared log against direct table writes and reads of the same records, on each " +
		"backend: append and read latency, throughput with concurrent writers", benchLog},
	{"coord", "the coordination service's ZooKeeper endpoint on each store against a real Apache ZooKeeper " +
		"in the same run: latency per operation (watch notifications included), throughput, store requests " +
		"per operation, the write path per stage (FaaSKeeper Table 3)", benchCoord},
	{"coord-cost", "the coordination service's cost model (FaaSKeeper Table 4, today's list prices) on the " +
		"store requests a bench coord report measured: USD per million operations per cloud, break-even " +
		"with a ZooKeeper ensemble", benchCoordCost},
	{"tracing", "exactly-once Read, Write, CondWrite and SyncInvoke, and an empty instance, with OpenTelemetry " +
		"tracing off (no SDK) and on (every span recorded), side by side: what the instrumentation costs", benchTracing},
	{"provenance", "exactly-once Read, Write, CondWrite and SyncInvoke, and an empty instance, with provenance " +
		"capture off, metadata and full, side by side, and what the garbage collector's exports cost", benchProvenance},
	{"peers", "a 5-step exactly-once workflow on one durable PostgreSQL this command starts: DBOS Transact's " +
		"transactional steps and child workflows against ssfkit's SSF paths and plain pgx, at 1 and 8 clients: " +
		"latency, throughput, statements and commits per workflow", benchPeers},
}

// benchNames are the benchmarks' names, for the help and messages.
func benchNames() []string {
	names := make([]string, len(benchmarks))
	for i, b := range benchmarks {
		names[i] = b.name
	}
	return names
}

// printBenchUsage writes `ssfkit bench -h`: the benchmarks from the table.
func printBenchUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: ssfkit bench %s [flags]\n\nBenchmarks (see BENCHMARKS.md):\n", strings.Join(benchNames(), "|"))
	for _, b := range benchmarks {
		fmt.Fprintf(w, "  %s\n%s", b.name, wrapText(b.summary, 8, 88))
	}
	fmt.Fprintf(w, "\nRun 'ssfkit bench BENCHMARK -h' for its flags.\n")
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	want := strings.Join(benchNames(), ", ")
	if len(args) == 0 {
		printBenchUsage(stderr)
		return &cliUsageError{err: fmt.Errorf("bench needs a benchmark: %s", want), printed: false}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printBenchUsage(stdout)
		return flag.ErrHelp
	}
	for _, b := range benchmarks {
		if b.name == args[0] {
			return b.run(ctx, args[1:], stdout, stderr)
		}
	}
	printBenchUsage(stderr)
	return &cliUsageError{err: fmt.Errorf("unknown benchmark %q (want %s)", args[0], want)}
}

// parseBenchFlags parses a benchmark's flags, with --cpuprofile added: the CPU profile of the
// whole run (the store's driver included), which the caller's deferred stopProfile writes.
func parseBenchFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (stopProfile func(), err error) {
	path := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE` (go tool pprof FILE)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *path == "" {
		return func() {}, nil
	}
	f, err := os.Create(*path)
	if err != nil {
		return nil, fmt.Errorf("%s: --cpuprofile: %w", fs.Name(), err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: --cpuprofile: %w", fs.Name(), err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: --cpuprofile %s: %v\n", fs.Name(), *path, err)
			return
		}
		fmt.Fprintf(stderr, "%s: wrote the CPU profile to %s\n", fs.Name(), *path)
	}, nil
}

const storeFlagHelp = "store `URL`, e.g. sqlite:///abs/path.db?table=T or mem:// (default: a fresh SQLite file in a temporary directory, removed afterwards)"

func benchOps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench ops", "Measures raw vs exactly-once Read, Write, CondWrite and SyncInvoke on one store, in\n"+
		"alternating blocks, first with a short linked DAAL, then with one of --daal-rows rows.\n"+
		"Prints a Markdown report (or JSON with --json); progress goes to stderr.", stderr)
	cfg := bench.OpsConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp)
	fs.IntVar(&cfg.Ops, "ops", bench.DefaultOps, "measured operations per kind, raw and exactly-once each")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultWarmup, "unmeasured operations per kind and variant first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultBlock, "operations per block; raw and exactly-once blocks alternate")
	fs.IntVar(&cfg.RowCapacity, "row-capacity", ssf.DefaultRowCapacity, "write-log entries per DAAL row")
	fs.IntVar(&cfg.DAALRows, "daal-rows", bench.DefaultDAALRows, "rows of the pre-grown DAAL of the second configuration (0: skip it)")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := bench.RunOps(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitReport(stdout, rep, *out, *asJSON)
}

func benchTracing(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench tracing", "Measures the exactly-once operations of bench ops with OpenTelemetry tracing off (no SDK,\n"+
		"as without OTEL_* settings) and on (the SDK recording every span, exported nowhere), in\n"+
		"alternating blocks. Prints a Markdown report (or JSON with --json); progress goes to stderr.", stderr)
	cfg := bench.TracingConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp)
	fs.IntVar(&cfg.Ops, "ops", bench.DefaultOps, "measured operations per kind, off and on each")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultWarmup, "unmeasured operations per kind and variant first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultBlock, "operations per block; off and on blocks alternate")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := bench.RunTracing(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitReport(stdout, rep, *out, *asJSON)
}

func benchProvenance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench provenance", "Measures the exactly-once operations of bench ops with provenance capture off, metadata and\n"+
		"full (docs/provenance.md), in blocks whose order rotates, each level on SSFs of its own, and the\n"+
		"garbage collector's exports to an SQLite sink. Prints a Markdown report (or JSON with --json);\n"+
		"progress goes to stderr.", stderr)
	cfg := bench.ProvenanceConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp+"; each level gets its own tables (use {table})")
	fs.IntVar(&cfg.Ops, "ops", bench.DefaultOps, "measured operations per kind and level")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultWarmup, "unmeasured operations per kind and level first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultBlock, "operations per block; the levels' blocks alternate")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := bench.RunProvenance(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitReport(stdout, rep, *out, *asJSON)
}

func benchPeers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench peers", "Runs a workflow of --steps steps, each incrementing its own row, as DBOS Transact\n"+
		"workflows (RunAsTransaction steps; child workflows), as ssfkit SSF instances (item steps with\n"+
		"store transactions on and off; one SSF per step; SQL steps on the same table as DBOS's) and as\n"+
		"plain pgx updates, in alternating blocks on one durable\n"+
		"PostgreSQL (fsync on) started on 127.0.0.1, or --database. Counts statements and write\n"+
		"transactions per workflow on the server, checks every row. Markdown (or JSON with --json).", stderr)
	cfg := bench.PeersConfig{}
	fs.StringVar(&cfg.DatabaseURL, "database", "", "a PostgreSQL `URL` the benchmark may write (fsync on, pg_stat_statements preloaded); default: a throwaway cluster")
	fs.IntVar(&cfg.Workflows, "workflows", 400, "measured workflows per variant and client")
	fs.IntVar(&cfg.Warmup, "warmup", 20, "unmeasured workflows per variant and client first")
	fs.IntVar(&cfg.Block, "block", 20, "workflows per client per block; the variants' blocks alternate")
	fs.IntVar(&cfg.Steps, "steps", 5, "steps per workflow")
	clients := fs.String("clients", "1,8", "comma-separated client counts")
	variants := fs.String("variants", strings.Join(bench.PeerVariants, ","), "comma-separated variants")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a bar chart of the median latencies to `FILE` (.png or .svg)")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			return &cliUsageError{err: fmt.Errorf("bench peers: --clients %q: %q is not a number", *clients, c)}
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	cfg.Variants = strings.Split(*variants, ",")
	if cfg.DatabaseURL == "" {
		defer pgtest.Stop()
		base, err := pgtest.DurableBaseURL()
		if err != nil {
			return fmt.Errorf("bench peers: PostgreSQL: %w", err)
		}
		cfg.DatabaseURL = base
	}
	rep, err := bench.RunPeers(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench peers", rep, *plotPath, *out, *asJSON)
}

func benchDAAL(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench daal", "Runs instances that each write one key, first with the garbage collector on a timer, then\n"+
		"without it, sampling the linked DAAL's length and the write latency. Writes daal.csv,\n"+
		"daal.png and daal-latency.png into --out-dir and prints a Markdown summary (or JSON).", stderr)
	cfg := bench.DAALConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp+"; each run gets its own table")
	fs.DurationVar(&cfg.Duration, "duration", bench.DefaultDAALDuration, "length of each run")
	fs.DurationVar(&cfg.Sample, "sample", bench.DefaultDAALSample, "sampling interval")
	fs.DurationVar(&cfg.GCEvery, "gc-every", bench.DefaultDAALGCEvery, "garbage collector timer in the GC-on run")
	fs.DurationVar(&cfg.Lifetime, "lifetime", bench.DefaultDAALLifetime, "an execution's lifetime bound")
	fs.DurationVar(&cfg.GCBound, "gc-bound", bench.DefaultDAALGCBound, "Beldi's T; must exceed --lifetime")
	fs.IntVar(&cfg.RowCapacity, "row-capacity", bench.DefaultDAALRowCapacity, "write-log entries per DAAL row (small, so rows fill quickly)")
	fs.IntVar(&cfg.Writers, "writers", bench.DefaultDAALWriters, "concurrent instances")
	fs.Float64Var(&cfg.Rate, "rate", bench.DefaultDAALRate, "instances started per second at most (0: as fast as they complete)")
	outDir := fs.String("out-dir", ".", "`DIR` for daal.csv, daal.png and daal-latency.png")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	if fi, err := os.Stat(*outDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("bench daal: --out-dir %s is not an existing directory", *outDir)
	}
	rep, err := bench.RunDAAL(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*outDir, "daal.csv"), rep.WriteCSV); err != nil {
		return err
	}
	if err := rep.WritePlots(*outDir); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench daal: wrote daal.csv, %s and %s in %s\n", bench.DAALPlotFile, bench.LatencyPlotFile, *outDir)
	if *asJSON {
		return printJSON(stdout, rep)
	}
	return rep.WriteMarkdown(stdout)
}

func benchTravel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench travel", "Runs the travel reservation app's requests with transactions, with exactly-once alone,\n"+
		"and without ssfkit (neither), taking turns in blocks on one store, and reports throughput,\n"+
		"latency, and the invariant violations (overbooking, double-booking, unmatched bookings)\n"+
		"each left. Prints a Markdown report (or JSON with --json); progress goes to stderr.", stderr)
	cfg := bench.TravelConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp+"; each variant gets its own tables")
	fs.IntVar(&cfg.Requests, "requests", bench.DefaultTravelRequests, "measured requests per variant")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultTravelWarmup, "unmeasured requests per variant first")
	fs.Float64Var(&cfg.Browse, "browse", 0, "fraction of the requests that are searches, recommendations and logins (0: reservations only)")
	fs.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultTravelConcurrency, "clients, each sending its next request when the last returns")
	fs.IntVar(&cfg.Block, "block", bench.DefaultTravelBlock, "requests per block; the variants take turns in blocks")
	fs.Int64Var(&cfg.Capacity, "capacity", bench.DefaultTravelCapacity, "rooms per hotel and seats per flight, at most (each has between half this and this)")
	fs.Uint64Var(&cfg.Seed, "seed", bench.DefaultTravelSeed, "seed of the data and the requests")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := bench.RunTravel(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitReport(stdout, rep, *out, *asJSON)
}

// markdownReport is a benchmark report that renders as Markdown (and, being a struct, as JSON).
type markdownReport interface{ WriteMarkdown(io.Writer) error }

// emitReport writes rep to the file out as Markdown if out is set, then to stdout as JSON or
// Markdown.
// plottedReport is a report that can also draw its chart.
type plottedReport interface {
	markdownReport
	WritePlot(path string) error
}

// emitPlottedReport writes the chart to plotPath if set (saying so on stderr), then emits the
// report as emitReport does.
func emitPlottedReport(stdout, stderr io.Writer, cmd string, rep plottedReport, plotPath, out string, asJSON bool) error {
	if plotPath != "" {
		if err := rep.WritePlot(plotPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: wrote %s\n", cmd, plotPath)
	}
	return emitReport(stdout, rep, out, asJSON)
}

func emitReport(stdout io.Writer, rep markdownReport, out string, asJSON bool) error {
	if out != "" {
		if err := writeFile(out, rep.WriteMarkdown); err != nil {
			return err
		}
	}
	if asJSON {
		return printJSON(stdout, rep)
	}
	return rep.WriteMarkdown(stdout)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
