package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/bench"
)

// `bench temporal`, tiny, prints JSON with every measured workflow of both variants, writes the
// Markdown report to --out and the chart to --plot.
func TestBenchTemporalJSON(t *testing.T) {
	dir := t.TempDir()
	out, plot := filepath.Join(dir, "temporal.md"), filepath.Join(dir, "temporal.png")
	var stdout, stderr bytes.Buffer
	err := benchMain(context.Background(), []string{"temporal", "--steps", "2", "--workflows", "4", "--warmup", "1",
		"--concurrency", "2", "--block", "2", "--out", out, "--plot", plot, "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.TemporalReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if rep.Steps != 2 || rep.Workflows != 4 || rep.Concurrency != 2 || rep.Block != 2 {
		t.Errorf("settings: %+v", rep)
	}
	for _, res := range []bench.TemporalResult{rep.Plain, rep.EO} {
		if res.Workflow.N != 4 || res.Body.N != 8 || res.Step.MedianUS <= 0 || res.Throughput <= 0 || res.Store.RoundTrips() == 0 {
			t.Errorf("%s: %+v", res.Variant, res)
		}
	}
	if rep.Ratios.WorkflowMedian <= 0 || rep.Ratios.BodyP99 <= 0 {
		t.Errorf("ratios: %+v", rep.Ratios)
	}
	if md, err := os.ReadFile(out); err != nil || !strings.Contains(string(md), "| per step median |") {
		t.Errorf("--out: %v\n%s", err, md)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
	if !strings.Contains(stderr.String(), "bench temporal: 4 of 4 measured workflows per variant") {
		t.Errorf("progress lacks the last block:\n%s", stderr.String())
	}
	err = benchMain(context.Background(), []string{"temporal", "--steps", "-2"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--steps, --workflows and --block must be at least 1") {
		t.Errorf("--steps -2: %v", err)
	}
}
