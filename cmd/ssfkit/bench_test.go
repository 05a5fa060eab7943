package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/bench"
)

// `bench ops` with a tiny N on the default store (a fresh SQLite file) prints, and writes to
// --out, a table row for every operation in both DAAL configurations.
func TestBenchOpsReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ops.md")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"ops", "--ops", "10", "--warmup", "2", "--block", "5",
		"--row-capacity", "4", "--daal-rows", "3", "--out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	report := stdout.String()
	for _, want := range []string{"## Short DAAL", "## 3-row DAAL", "Per-instance overhead", "EO/raw median", "outside the store"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, op := range bench.Ops {
		// Two configurations, each with a latency table and a breakdown table.
		if n := strings.Count(report, "\n| "+op.String()+" | "); n != 4 {
			t.Errorf("report has %d rows for %v, want 4:\n%s", n, op, report)
		}
	}
	if file, err := os.ReadFile(out); err != nil || string(file) != report {
		t.Errorf("--out file differs from the printed report (%v)", err)
	}
}

func TestBenchOpsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"ops", "--store", "mem://", "--ops", "6", "--warmup", "0", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.OpsReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Configs) != 2 || rep.Configs[1].DAALRows != bench.DefaultDAALRows {
		t.Fatalf("configs: %+v", rep.Configs)
	}
	for _, c := range rep.Configs {
		if c.ReachableMin < c.DAALRows {
			t.Errorf("%s: DAAL shrank to %d rows", c.Name, c.ReachableMin)
		}
		for i, o := range c.Ops {
			if o.Op != bench.Ops[i].String() || o.Raw.N != 6 || o.EO.N != 6 || o.EOStore.RoundTrips() == 0 {
				t.Errorf("%s: %+v", c.Name, o)
			}
		}
	}
}

// `bench daal` writes a CSV with samples of both runs and two PNG plots.
func TestBenchDAALOutputs(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"daal", "--store", "mem://", "--duration", "500ms", "--sample", "100ms",
		"--rate", "100", "--out-dir", dir}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| on |") || !strings.Contains(stdout.String(), "| off |") {
		t.Errorf("summary lacks a run:\n%s", stdout.String())
	}
	f, err := os.Open(filepath.Join(dir, "daal.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range rows[1:] {
		runs[r[0]]++
	}
	if runs["on"] < 5 || runs["off"] < 5 {
		t.Errorf("samples per run: %v", runs)
	}
	for _, name := range []string{bench.DAALPlotFile, bench.LatencyPlotFile} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.DecodeConfig(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		f.Close()
	}
}

// `bench travel`, tiny, on in-memory tables: every variant answers every request; with a
// transaction nothing is overbooked, double-booked or unmatched.
func TestBenchTravel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "travel.md")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"travel", "--store", "mem://", "--requests", "30", "--warmup", "5",
		"--block", "10", "--concurrency", "4", "--capacity", "2", "--browse", "0.2", "--out", out, "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.TravelReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(bench.TravelVariants) {
		t.Fatalf("results: %+v", rep.Results)
	}
	for _, r := range rep.Results {
		if r.Failed > 0 || r.Reserve.N+r.Browse.N != 30 || r.Browse.N == 0 || r.Throughput <= 0 || r.Booked+r.Refused != 28 {
			t.Errorf("%s: %+v", r.Variant.Name, r)
		}
	}
	if tx, _ := rep.Result("transactions"); tx.Violations > 0 || tx.Store.RoundTrips() == 0 {
		t.Errorf("transactions: %+v", tx)
	}
	if eo, _ := rep.Result("exactly-once"); eo.Overbooked > 0 || eo.DoubleBooked > 0 {
		t.Errorf("exactly-once overbooked: %+v", eo)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| transactions |", "| exactly-once |", "| neither |", "Transactions vs exactly-once alone"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestBenchErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ops", "--store", "nosuch://x"}, `unknown URL scheme "nosuch"`},
		{[]string{"ops", "--store", "sqlite://relative.db"}, "three slashes"},
		{[]string{"ops", "--ops", "0"}, "--ops must be at least 1"},
		{[]string{"daal", "--lifetime", "1s", "--gc-bound", "1s"}, "--lifetime < --gc-bound"},
		{[]string{"daal", "--out-dir", "/nonexistent/dir"}, "not an existing directory"},
		{[]string{"travel", "--browse", "1"}, "--browse is a fraction"},
		{[]string{"travel", "--store", "nosuch://x"}, "write {table} where the benchmark's table names go"},
		{[]string{"nosuch"}, `unknown benchmark "nosuch"`},
		{nil, "bench needs a benchmark"},
	} {
		err := benchMain(ctx, c.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
	if err := benchMain(ctx, []string{"ops", "-h"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// `bench backends` measures each chosen backend side by side and plots the ratios.
func TestBenchBackends(t *testing.T) {
	png := filepath.Join(t.TempDir(), "backends.png")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"backends", "--backends", "sqlite,postgres,postgres-portable", "--ops", "6", "--warmup", "0", "--plot", png, "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.BackendsReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.Results[0].Backend != "sqlite" || rep.Results[2].Backend != "postgres-portable" {
		t.Fatalf("results: %+v", rep.Results)
	}
	for _, r := range rep.Results {
		for _, o := range r.Ops {
			if o.Raw.N != 6 || o.EO.N != 6 || o.RatioMedian <= 0 {
				t.Errorf("%s: %+v", r.Backend, o)
			}
		}
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
	err = benchMain(context.Background(), []string{"backends", "--backends", "sqlite,oracle"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown backend "oracle"`) {
		t.Errorf("unknown backend: %v", err)
	}
}

// `bench log` measures the log and direct writes side by side, and plots throughput.
func TestBenchLog(t *testing.T) {
	png := filepath.Join(t.TempDir(), "log.png")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"log", "--backends", "sqlite", "--records", "20", "--writers", "4", "--plot", png, "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.LogReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("results: %+v", rep.Results)
	}
	r := rep.Results[0]
	if r.Append.N != 20 || r.DirectWrite.N != 20 || r.Read.N != 20 || r.AppendThroughput <= 0 || r.BatchedThroughput <= 0 || r.ReservationsPerRecord <= 0 || r.ReservationsPerRecord > 1 {
		t.Fatalf("result %+v", r)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
	if err := benchMain(context.Background(), []string{"log", "--records", "5"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--records must be at least 20") {
		t.Errorf("too few records: %v", err)
	}
}

// bench tracing measures every operation off and on, and the "on" side records spans: one per
// execution and one per step (a ReadModifyWrite takes two).
func TestBenchTracingJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"tracing", "--store", "mem://", "--ops", "6", "--warmup", "0", "--block", "3", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.TracingReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(bench.Ops)+1 {
		t.Fatalf("results: %+v", rep.Results)
	}
	for _, x := range rep.Results {
		if x.Off.N != 6 || x.On.N != 6 || x.RatioMedian <= 0 {
			t.Errorf("%+v", x)
		}
	}
	// Per kind: 6 step spans (12 for ReadModifyWrite) in 2 instances, and SyncInvoke's 6
	// executions of its callee; 6 empty instances; and, beyond those, their store requests.
	if steps := 6*len(bench.Ops) + 6 + 2*len(bench.Ops) + 6 + 6; rep.Spans <= steps {
		t.Errorf("%d spans recorded, want the %d of executions and steps and their store requests", rep.Spans, steps)
	}
	if err := benchMain(context.Background(), []string{"tracing", "--ops", "0"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--ops") {
		t.Errorf("--ops 0: %v", err)
	}
}

func TestBenchProvenanceJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"provenance", "--ops", "6", "--warmup", "0", "--block", "3", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.ProvenanceReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(bench.Ops)+1 {
		t.Fatalf("results: %+v", rep.Results)
	}
	for _, x := range rep.Results {
		if x.Off.N != 6 || x.Metadata.N != 6 || x.Full.N != 6 || x.MetadataMedian <= 0 || x.FullMedian <= 0 {
			t.Errorf("%+v", x)
		}
	}
	// Every instance of the captured levels was exported: the one that made the item, per kind
	// 2 blocks of 3 (the callee's 6 more for SyncInvoke), and 6 empty instances.
	want := int64(1 + 2*len(bench.Ops) + 6 + 6)
	for _, e := range rep.Export {
		if e.Instances != want || e.Exports == 0 || e.DatabaseBytes == 0 {
			t.Errorf("%s exports: %+v, want %d instances", e.Capture, e, want)
		}
	}
	if len(rep.Export) != 2 {
		t.Errorf("exports of %d levels, want metadata and full", len(rep.Export))
	}
}

// TestBenchPeers runs every variant of bench peers at a small size on the durable cluster: every
// workflow's rows are checked by the benchmark itself; the server's counts must be exact where
// they are known (plain pgx: one statement and one commit per step).
func TestBenchPeers(t *testing.T) {
	var stdout, stderr bytes.Buffer
	plot := filepath.Join(t.TempDir(), "peers.svg")
	err := benchMain(context.Background(), []string{"peers", "--workflows", "4", "--warmup", "2", "--block", "2", "--clients", "1,2", "--plot", plot, "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.PeersReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2*len(bench.PeerVariants) || !strings.Contains(stderr.String(), "every workflow's rows checked") {
		t.Fatalf("results: %+v\n%s", rep.Results, stderr.String())
	}
	for _, r := range rep.Results {
		if r.Latency.N != 4*r.Clients || r.Latency.MedianUS <= 0 || r.PerSecond <= 0 {
			t.Errorf("%+v", r)
		}
		exact := r.Variant == bench.PeerPlain
		// DBOS's pollers read in the background (statements, no write transactions).
		if exact && (r.Statements < 4.5 || r.Statements > 8 || math.Abs(r.Commits-5) > 0.25) {
			t.Errorf("plain pgx: %.2f statements and %.2f commits per workflow, want 5 and 5", r.Statements, r.Commits)
		}
		if !exact && (r.Statements < 10 || r.Commits < 5) {
			t.Errorf("%s: %.2f statements and %.2f commits per workflow: an exactly-once 5-step workflow makes more", r.Variant, r.Statements, r.Commits)
		}
		// ssfkit's commits are known: one per step, and the instance's creation and done mark,
		// in the one instance; one SSF per step adds per call only the callee's done mark (the
		// callee's intent is created with its step's write; the call writes nothing before it).
		if want, known := map[string]float64{bench.PeerSSF: 7, bench.PeerSSFPerStepSSF: 12}[r.Variant]; known && math.Abs(r.Commits-want) > 0.5 {
			t.Errorf("%s: %.2f commits per workflow, want %v", r.Variant, r.Commits, want)
		}
		// Six instances per workflow, none of whose done marks reads its intent (the execution
		// presumes the row its creation left): about 51 statements, 57 with the reads.
		if r.Variant == bench.PeerSSFPerStepSSF && r.Statements > 54 {
			t.Errorf("%s: %.2f statements per workflow, want about 51 (a done mark read its intent?)", r.Variant, r.Statements)
		}
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("the plot: %v", err)
	}
	for _, bad := range [][]string{{"--clients", "1,x"}, {"--variants", "dbos,temporal"}, {"--steps", "0"}, {"--block", "0"}} {
		if err := benchMain(context.Background(), append([]string{"peers"}, bad...), io.Discard, io.Discard); err == nil {
			t.Errorf("bench peers %v: no error", bad)
		}
	}
}
