package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/bench"
	"github.com/ssfkit/ssfkit/internal/pgtest"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// coordStores are the stores `ssfkit bench coord` can run ssfkit's endpoint on.
func coordStores(tmpDir string) []bench.Backend {
	return []bench.Backend{
		{Name: "mem", URL: func() (string, error) { return "mem://" + store.TablePlaceholder, nil }},
		{Name: "sqlite", URL: func() (string, error) {
			return "sqlite://" + filepath.Join(tmpDir, "coord.db") + "?table=" + store.TablePlaceholder, nil
		}},
		// A durable server (fsync on), started on 127.0.0.1 by the test kit.
		{Name: "postgres", URL: func() (string, error) {
			base, err := pgtest.DurableBaseURL()
			return base + "?table=" + store.TablePlaceholder, err
		}},
	}
}

func benchCoord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tmpDir, err := os.MkdirTemp("", "ssfkit-bench-coord-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	all := coordStores(tmpDir)
	fs := newFlagSet("bench coord", "Measures ssfkit's ZooKeeper endpoint on each --stores store against a real Apache\n"+
		"ZooKeeper "+testservers.ZooKeeperVersion+" server (`make tools` fetches it) in the same run, through the ZooKeeper\n"+
		"protocol (go-zookeeper/zk): create, get, versioned set, getChildren, exists and watch\n"+
		"notification latency, taking turns in blocks; throughput of gets and sets with --clients\n"+
		"concurrent clients; store requests per operation; the write path's time per stage.\n"+
		"With --serverless, the serverless path too (docs/coordination.md), its write path per stage.\n"+
		"Markdown (or JSON with --json); progress goes to stderr.", stderr)
	list := fs.String("stores", "mem,sqlite", "comma-separated stores for ssfkit's endpoint: mem, sqlite, postgres")
	serverless := fs.String("serverless", "", "comma-separated stores for the serverless path (a proxy whose writes a writer decides, woken through an in-process queue): mem, sqlite, postgres")
	cfg := bench.CoordConfig{}
	fs.IntVar(&cfg.Ops, "ops", bench.DefaultCoordOps, "measured operations per kind and target")
	fs.IntVar(&cfg.Warmup, "warmup", bench.DefaultCoordWarmup, "unmeasured operations per kind and target first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultCoordBlock, "operations per block; the targets take turns in blocks")
	fs.IntVar(&cfg.Clients, "clients", bench.DefaultCoordClients, "concurrent clients in the throughput runs")
	fs.IntVar(&cfg.ThroughputOps, "throughput-ops", bench.DefaultCoordThroughputOps, "operations per kind and target in the throughput runs")
	fs.IntVar(&cfg.DataBytes, "bytes", bench.DefaultCoordDataBytes, "bytes of data per create and set")
	fs.DurationVar(&cfg.Tick, "tick", bench.DefaultCoordTick, "the coordination service's tick (log tail, expirer)")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a PNG bar chart of the median latency per operation and target to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	if cfg.Ops < 1 || cfg.Warmup < 0 || cfg.Block < 1 || cfg.Clients < 1 || cfg.ThroughputOps < 1 || cfg.DataBytes < 0 || cfg.Tick <= 0 {
		return &cliUsageError{err: fmt.Errorf("bench coord: --ops, --block, --clients and --throughput-ops must be at least 1, --warmup and --bytes at least 0, --tick positive")}
	}
	if cfg.Stores, err = pickBackends("bench coord", all, *list); err != nil {
		return err
	}
	if *serverless != "" {
		if cfg.Serverless, err = pickBackends("bench coord", coordStores(filepath.Join(tmpDir, "serverless")), *serverless); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(tmpDir, "serverless"), 0o755); err != nil {
			return err
		}
	}
	defer pgtest.Stop()
	defer testservers.StopAll()
	cfg.ZooKeeper = testservers.ZooKeeperBench.Get
	rep, err := bench.RunCoord(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench coord", rep, *plotPath, *out, *asJSON)
}

func benchCoordCost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench coord-cost", "Evaluates the cost model of docs/coordination.md (FaaSKeeper's Table 4 with today's list\n"+
		"prices, in internal/bench/coordcost.go) on the store requests per operation that a\n"+
		"`bench coord --json` report measured: USD per million reads, writes and watch notifications\n"+
		"per cloud, and the break-even with a ZooKeeper ensemble; --plot draws the monthly costs.", stderr)
	report := fs.String("report", "docs/bench/coord.json", "a `bench coord --json` report")
	target := fs.String("target", "ssfkit-sqlite", "the ssfkit server target whose request counts to use")
	serverless := fs.String("serverless-target", "ssfkit-sqlite-serverless", "the serverless target (bench coord --serverless) whose request counts to use")
	cfg := bench.DefaultCostConfig
	fs.Float64Var(&cfg.ReadFraction, "reads", cfg.ReadFraction, "share of reads in the workload of the break-even and the chart")
	fs.Float64Var(&cfg.StoreRequestSeconds, "store-latency", cfg.StoreRequestSeconds, "seconds a function waits per cloud store request")
	fs.IntVar(&cfg.Ensemble, "ensemble", cfg.Ensemble, "ZooKeeper servers in the ensemble")
	fs.IntVar(&cfg.Proxies, "proxies", cfg.Proxies, "coord proxy sidecars (one per application instance)")
	fs.Float64Var(&cfg.ProxyTickSeconds, "proxy-tick", cfg.ProxyTickSeconds, "the proxies' tick, seconds")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a PNG chart of monthly cost against requests per day to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	stopProfile, err := parseBenchFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	if cfg.ReadFraction < 0 || cfg.ReadFraction > 1 || cfg.StoreRequestSeconds < 0 || cfg.Ensemble < 1 || cfg.Proxies < 0 || cfg.ProxyTickSeconds <= 0 {
		return &cliUsageError{err: fmt.Errorf("bench coord-cost: --reads must be in [0, 1], --store-latency and --proxies at least 0, --ensemble at least 1, --proxy-tick positive")}
	}
	b, err := os.ReadFile(*report)
	if err != nil {
		return fmt.Errorf("bench coord-cost: %w (write one with `ssfkit bench coord --json > FILE`)", err)
	}
	var rep bench.CoordReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("bench coord-cost: %s: %w", *report, err)
	}
	cost, err := bench.RunCost(&rep, *target, *serverless, cfg)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench coord-cost", cost, *plotPath, *out, *asJSON)
}
