package main

import (
	"context"
	"io"

	"github.com/ssfkit/ssfkit/internal/bench"
)

func benchTemporal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench temporal", "Starts an embedded Temporal server and a worker, and runs workflows of --steps steps, each\n"+
		"step a read-modify-write of the workflow's own counter: as a plain activity on the store,\n"+
		"and as an exactly-once SSF activity, taking turns in blocks. Reports workflow, per-step\n"+
		"and activity-body latencies and throughput with the EO/plain ratios. Prints a Markdown\n"+
		"report (or JSON with --json); progress goes to stderr.", stderr)
	cfg := bench.TemporalConfig{}
	fs.StringVar(&cfg.StoreURL, "store", "", storeFlagHelp+"; the plain activity and the SSF each get their own table")
	fs.IntVar(&cfg.Steps, "steps", bench.DefaultTemporalSteps, "activities per workflow, one after the other")
	fs.IntVar(&cfg.Workflows, "workflows", bench.DefaultTemporalWorkflows, "measured workflows per variant")
	fs.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultTemporalConcurrency, "workflows in flight")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultTemporalWarmup, "unmeasured workflows per variant first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultTemporalBlock, "workflows per block; the variants take turns in blocks")
	fs.BoolVar(&cfg.PendingIndex, "pending-index", false, "run the SSF without relying on Temporal's retries (no Config.Hold): activity instances\ngo through the pending index, as before; for comparison")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a PNG bar chart of the per-step and activity-body medians and p99s to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := bench.RunTemporal(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench temporal", rep, *plotPath, *out, *asJSON)
}
