package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/bench"
)

// `bench coord` with a tiny configuration measures every operation on the real ZooKeeper and on
// ssfkit's endpoint (mem and SQLite), with positive numbers, store requests for ssfkit's
// writes, the write path's stages, and a plot. (Apache ZooKeeper comes from `make tools`.)
func TestBenchCoordReport(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "coord.png")
	md := filepath.Join(t.TempDir(), "coord.md")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"coord", "--ops", "6", "--warmup", "1", "--block", "3",
		"--clients", "2", "--throughput-ops", "30", "--serverless", "sqlite", "--json", "--plot", plot, "--out", md}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.CoordReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	wantTargets := []string{bench.ZooKeeperTarget, "ssfkit-mem", "ssfkit-sqlite", "ssfkit-sqlite-serverless"}
	if !slices.Equal(rep.Targets, wantTargets) {
		t.Fatalf("targets %v, want %v", rep.Targets, wantTargets)
	}
	if len(rep.Ops) != len(bench.CoordOps) {
		t.Fatalf("%d operations, want %d", len(rep.Ops), len(bench.CoordOps))
	}
	for i, o := range rep.Ops {
		if o.Op != bench.CoordOps[i] || len(o.Targets) != len(wantTargets) {
			t.Fatalf("operation %d: %+v", i, o)
		}
		for j, x := range o.Targets {
			if x.Target != wantTargets[j] || x.Latency.N != 6 || x.Latency.MedianUS <= 0 || x.Latency.P99US < x.Latency.MedianUS {
				t.Errorf("%s on %s: %+v", o.Op, x.Target, x)
			}
			if x.Target == bench.ZooKeeperTarget {
				if x.Store != nil || x.RatioMedian != 0 {
					t.Errorf("%s on ZooKeeper has store requests or a ratio: %+v", o.Op, x)
				}
				continue
			}
			if x.Store == nil || x.RatioMedian <= 0 || x.RatioP99 <= 0 {
				t.Errorf("%s on %s lacks store requests or ratios: %+v", o.Op, x.Target, x)
			}
			// A write appends to the log (a conditional create: an update); reads use none.
			write := o.Op == "create" || o.Op == "set" || o.Op == "watch"
			if write && (x.Store.Updates < 1 || x.StoreRequests < 1) {
				t.Errorf("%s on %s: %v store requests per op", o.Op, x.Target, x.Store)
			}
		}
	}
	if len(rep.Throughput) != 2 {
		t.Fatalf("throughput: %+v", rep.Throughput)
	}
	for _, x := range rep.Throughput {
		for _, tg := range x.Targets {
			if tg.PerSec <= 0 {
				t.Errorf("throughput of %s on %s: %v", x.Op, tg.Target, tg.PerSec)
			}
		}
	}
	if len(rep.Stages) != 3 {
		t.Fatalf("write stages for %d targets, want 3 (ssfkit's)", len(rep.Stages))
	}
	for _, s := range rep.Stages {
		for _, st := range s.Stages {
			// The writer's Decides are timed per wake-up it served while the sets were measured:
			// one that finds the next set's request already stored decides it too, a wake-up
			// sent just before the measured sets may be served among them, and a delivery whose
			// lease ran out under load comes again. Some number of them, at least one.
			if decide := st.Stage == "of which the writer's Decide"; (st.N != 6 && !decide) || (decide && st.N < 1) || st.P99US < st.P50US {
				t.Errorf("%s stage %s: %+v", s.Target, st.Stage, st)
			}
		}
		if total := s.Stages[len(s.Stages)-1]; total.P50US <= 0 {
			t.Errorf("%s: write path total %+v", s.Target, total)
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot: %v", err)
	}
	// The cost model on these counts: every cloud, positive prices, a break-even.
	jsonPath := filepath.Join(t.TempDir(), "coord.json")
	if err := os.WriteFile(jsonPath, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var costOut, costErr bytes.Buffer
	if err := benchMain(context.Background(), []string{"coord-cost", "--report", jsonPath, "--target", "ssfkit-mem", "--json"}, &costOut, &costErr); err != nil {
		t.Fatalf("coord-cost: %v\n%s", err, costErr.String())
	}
	var cost bench.CostReport
	if err := json.Unmarshal(costOut.Bytes(), &cost); err != nil {
		t.Fatal(err)
	}
	if len(cost.Clouds) != 3 || cost.Counts.WriteWrites < 1 {
		t.Fatalf("cost model: %+v", cost)
	}
	for _, c := range cost.Clouds {
		// A notification costs only what the watch measured beyond its set: a read or two when a
		// proxy's look at the log's tail came early, in a run this short.
		if c.Reads != 0 || c.Writes <= c.WritesServer || c.Watches < 0 || c.FixedMonthly <= 0 || c.EnsembleMonthly <= 0 || c.BreakEvenPerDay <= 0 {
			t.Errorf("cost model for %s: %+v", c.Prices.Cloud, c)
		}
	}
	report, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| watch | zookeeper |", "| set | ssfkit-sqlite |", "log append (conditional create)", "Throughput with 2 concurrent clients",
		"| ssfkit-sqlite-serverless | proxy: wake a writer (queue send) |"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("Markdown report lacks %q:\n%s", want, report)
		}
	}
}
