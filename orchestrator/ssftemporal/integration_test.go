package ssftemporal

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/temporaltest"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

// addThenWait calls the counter, then waits for a signal before closing.
func addThenWait(ctx workflow.Context) (int, error) {
	var total int
	if err := Call(ctx, "counter", 5, &total); err != nil {
		return 0, err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return total, nil
}

// On the embedded server: a workflow's SSF activity runs exactly once, and the garbage
// collector keeps the activity's instance while the workflow is open (Temporal could still
// retry the activity), then removes it once the workflow has closed.
func TestEmbeddedServerHoldsLogsWhileWorkflowOpen(t *testing.T) {
	c := temporaltest.Client(t)
	clock := testclock.New(time.Now())
	h := local.NewHost()
	h.Logger = quiet
	t.Cleanup(h.Close)
	const bound = time.Minute
	rt, err := h.Add(ssf.Config{Name: "counter", Store: testtables.Mem(t, "counter"), Handler: counter, Logger: quiet,
		Lifetime: 30 * time.Second, GCBound: bound, Clock: clock, Hold: HoldWhileOpen(c, 0)})
	if err != nil {
		t.Fatal(err)
	}
	queue := serveWorkflows(t, c, h, addThenWait)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, addThenWait)
	if err != nil {
		t.Fatal(err)
	}
	for {
		items, err := rt.Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(items["c/n"]) == "5" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	collect := func() ssf.GCReport {
		t.Helper()
		r, err := rt.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	collect() // stamps the finish time
	clock.Advance(bound + time.Second)
	if r := collect(); r.Held != 1 || r.IntentsRemoved != 0 {
		t.Fatalf("while the workflow is open: %+v, want the activity's instance held", r)
	}
	if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "finish", nil); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := run.Get(ctx, &total); err != nil || total != 5 {
		t.Fatalf("workflow: %d, %v", total, err)
	}
	if r := collect(); r.Held != 0 || r.IntentsRemoved != 1 {
		t.Fatalf("after the workflow closed: %+v, want the instance removed", r)
	}
}
