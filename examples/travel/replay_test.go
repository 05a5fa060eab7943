package travel

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Recorded histories of ReserveWorkflow (one per kind of outcome, including one whose
// activities were retried after its worker was SIGKILLed) must replay against the current code:
// a change that makes the workflow issue different commands for the same history would break
// every reservation in flight during a deployment. The ones named stable-ids-* were recorded
// with stable step ids (ssf-N, a version marker); the others before, on Temporal's activity
// ids, which workflows started then keep. Record new ones with
// `ssfkit demo temporal --record DIR` and copy them in under a new prefix.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("want at least 8 recorded histories in testdata/histories, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(ReserveWorkflow, workflow.RegisterOptions{Name: ReserveWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(quietLogger), f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
