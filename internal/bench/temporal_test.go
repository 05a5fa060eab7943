package bench

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RunTemporal, tiny, on the embedded server: both variants measure every workflow and activity,
// the plain step is one get and one update, and the report's derived numbers follow from the
// measured ones. No timings are asserted.
func TestRunTemporalReport(t *testing.T) {
	rep, err := RunTemporal(context.Background(), TemporalConfig{Steps: 2, Workflows: 4, Warmup: 1, Concurrency: 2, Block: 3}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Steps != 2 || rep.Workflows != 4 || rep.Warmup != 1 || rep.Store == "" || rep.Seconds <= 0 {
		t.Errorf("settings: %+v", rep)
	}
	for _, res := range []TemporalResult{rep.Plain, rep.EO} {
		if res.Workflow.N != 4 || res.Step.N != 4 || res.Body.N != 8 || res.Retries != 0 {
			t.Errorf("%s: counts: workflows %d, steps %d, bodies %d, retries %d", res.Variant, res.Workflow.N, res.Step.N, res.Body.N, res.Retries)
		}
		for name, s := range map[string]Summary{"workflow": res.Workflow, "step": res.Step, "body": res.Body} {
			if s.MedianUS <= 0 || s.P99US < s.MedianUS {
				t.Errorf("%s: %s latency %+v", res.Variant, name, s)
			}
		}
		if res.Step.MedianUS > res.Workflow.MedianUS {
			t.Errorf("%s: a step's median exceeds its workflow's: %+v", res.Variant, res)
		}
		if res.Throughput <= 0 || res.Seconds <= 0 {
			t.Errorf("%s: throughput %v over %v s", res.Variant, res.Throughput, res.Seconds)
		}
	}
	if rep.Plain.Variant != TemporalPlain || rep.EO.Variant != TemporalEO {
		t.Errorf("variants: %q, %q", rep.Plain.Variant, rep.EO.Variant)
	}
	if st := rep.Plain.Store; st.Gets != 1 || st.Updates != 1 || st.Scans != 0 || st.Deletes != 0 {
		t.Errorf("plain step's store requests: %s, want 1 get + 1 update", st)
	}
	if rep.EO.Store.RoundTrips() <= rep.Plain.Store.RoundTrips() {
		t.Errorf("exactly-once step's store requests (%s) are no more than the plain step's", rep.EO.Store)
	}
	x := rep.Ratios
	for name, v := range map[string]float64{"workflow median": x.WorkflowMedian, "workflow p99": x.WorkflowP99, "step median": x.StepMedian,
		"step p99": x.StepP99, "body median": x.BodyMedian, "body p99": x.BodyP99, "throughput": x.Throughput} {
		if v <= 0 {
			t.Errorf("ratio %s not computed: %v", name, v)
		}
	}
	if want := rep.EO.Step.MedianUS / rep.Plain.Step.MedianUS; x.StepMedian != want {
		t.Errorf("step median ratio %v, want %v", x.StepMedian, want)
	}
	if want := rep.EO.Step.MedianUS - rep.Plain.Step.MedianUS; rep.StepOverheadUS != want {
		t.Errorf("step overhead %v, want %v", rep.StepOverheadUS, want)
	}

	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| workflow median |", "| per step p99 |", "| activity body median |", "| throughput, workflows/s |", "1 get + 1 update", "Goal EO/plain <= 1.3x"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	path := filepath.Join(t.TempDir(), "temporal.png")
	if err := rep.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.DecodeConfig(f); err != nil {
		t.Errorf("plot: %v", err)
	}
}

func TestRunTemporalConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  TemporalConfig
		want string
	}{
		{TemporalConfig{Steps: -1}, "--steps, --workflows and --block must be at least 1"},
		{TemporalConfig{Warmup: -1}, "--warmup must not be negative"},
		{TemporalConfig{Concurrency: 1001}, "--concurrency must be 1 to 1000"},
	} {
		if _, err := RunTemporal(context.Background(), c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}
