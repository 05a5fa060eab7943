package ssftemporal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/temporaltest"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// addOnce adds by to the counter and returns the total.
func addOnce(ctx workflow.Context, by int) (int, error) {
	var total int
	err := Call(ctx, "counter", by, &total)
	return total, err
}

// bookWithPause books a hotel and a flight in one transaction, waiting for the signal "go"
// between the two bookings (the moment to reset it mid-transaction).
func bookWithPause(ctx workflow.Context, hotel, flight string) (bool, error) {
	return RunTx(ctx, TxOptions{}, func(tx *Tx) error {
		if err := tx.Call(ctx, "hotel", booking{Op: "book", Item: hotel}, nil); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
		return tx.Call(ctx, "flight", booking{Op: "book", Item: flight}, nil)
	})
}

// serverFixture runs the counter, hotel and flight SSFs on a worker of the embedded server.
func serverFixture(t *testing.T, workflows ...any) (*fixture, client.Client, string) {
	t.Helper()
	c := temporaltest.Client(t)
	f := &fixture{host: local.NewHost(), rts: map[string]*ssf.Runtime{}}
	f.host.Logger = quiet
	t.Cleanup(f.host.Close)
	for name, h := range map[string]ssf.Handler{"counter": counter, "hotel": inventory, "flight": inventory} {
		rt, err := f.host.Add(ssf.Config{Name: name, Store: testtables.Mem(t, name), Handler: h, Logger: quiet,
			Lifetime: 30 * time.Second, GCBound: time.Minute, Hold: HoldWhileOpen(c, 0)})
		if err != nil {
			t.Fatal(err)
		}
		f.rts[name] = rt
	}
	return f, c, serveWorkflows(t, c, f.host, workflows...)
}

// serveWorkflows starts a worker of the host's SSFs and the workflows on a task queue of the
// test's own, stopped when the test ends, and returns the queue.
func serveWorkflows(t *testing.T, c client.Client, h *local.Host, workflows ...any) string {
	t.Helper()
	queue := "q-" + t.Name()
	w := worker.New(c, queue, worker.Options{})
	Register(w, h.Runtimes()...)
	for _, wf := range workflows {
		w.RegisterWorkflow(wf)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return queue
}

// firstTaskCompleted is the event a reset "to the first workflow task" names.
func firstTaskCompleted(t *testing.T, c client.Client, id, runID string) int64 {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return e.GetEventId()
		}
	}
	t.Fatalf("workflow %s/%s has no completed workflow task", id, runID)
	return 0
}

// reset resets the run to just after the event and returns the new run's id.
func reset(t *testing.T, c client.Client, id, runID string, event int64) string {
	t.Helper()
	resp, err := c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: temporaltest.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason: "test", WorkflowTaskFinishEventId: event, RequestId: uuid.NewString(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetRunId()
}

// A workflow id names one business execution: a run that a reset creates (here, to the first
// workflow task, the CLI's FirstWorkflowTask) and a start that reuses the id after the first
// run completed (Temporal's default reuse policy allows it) replay the steps the first run
// took instead of taking them again; the same id with another input is refused.
func TestResetAndReusedWorkflowIDDoNotRunStepsAgain(t *testing.T) {
	f, c, queue := serverFixture(t, addOnce)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "res-" + t.Name()
	opts := client.StartWorkflowOptions{ID: id, TaskQueue: queue}
	run, err := c.ExecuteWorkflow(ctx, opts, addOnce, 5)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	if err := run.Get(ctx, &total); err != nil || total != 5 {
		t.Fatalf("first run: %d %v", total, err)
	}
	resetRun := reset(t, c, id, run.GetRunID(), firstTaskCompleted(t, c, id, run.GetRunID()))
	if err := c.GetWorkflow(ctx, id, resetRun).Get(ctx, &total); err != nil || total != 5 {
		t.Fatalf("the reset run: %d %v, want 5", total, err)
	}
	if n := f.item(t, "counter", "c", "n"); n != "5" {
		t.Fatalf("after the reset the counter is %s, want 5: a step ran again", n)
	}
	again, err := c.ExecuteWorkflow(ctx, opts, addOnce, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Get(ctx, &total); err != nil || total != 5 || again.GetRunID() == run.GetRunID() {
		t.Fatalf("a start reusing the id: %d %v, want 5 from a new run", total, err)
	}
	if n := f.item(t, "counter", "c", "n"); n != "5" {
		t.Fatalf("after the id was reused the counter is %s, want 5: a step ran again", n)
	}
	other, err := c.ExecuteWorkflow(ctx, opts, addOnce, 7)
	if err != nil {
		t.Fatal(err)
	}
	var app *temporal.ApplicationError
	if err := other.Get(ctx, &total); !asApplicationError(err, &app) || !strings.Contains(app.Error(), "another input") {
		t.Fatalf("the id reused with another input: %v, want the step refused", err)
	}
	if n := f.item(t, "counter", "c", "n"); n != "5" {
		t.Fatalf("the counter is %s, want 5", n)
	}
}

// A reset in the middle of a transaction (to the first workflow task, after the hotel was
// booked under the transaction's lock and before the flight) continues the same transaction:
// the hotel booking replays, the flight is booked, and the transaction commits with every lock
// released; nothing is booked twice and nothing stays locked.
func TestResetMidTransactionContinuesIt(t *testing.T) {
	f, c, queue := serverFixture(t, bookWithPause)
	f.setCapacity(t, "hotel", "h1", 2)
	f.setCapacity(t, "flight", "f1", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "tx-" + t.Name()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, bookWithPause, "h1", "f1")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		locks, err := f.rts["hotel"].Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) > 0 {
			break // the hotel is booked in the transaction, which waits for "go"
		}
		if time.Now().After(deadline) {
			t.Fatal("the hotel was never booked")
		}
	}
	resetRun := reset(t, c, id, run.GetRunID(), firstTaskCompleted(t, c, id, run.GetRunID()))
	if err := c.SignalWorkflow(ctx, id, resetRun, "go", nil); err != nil {
		t.Fatal(err)
	}
	var committed bool
	if err := c.GetWorkflow(ctx, id, resetRun).Get(ctx, &committed); err != nil || !committed {
		t.Fatalf("the reset run: committed %v, %v", committed, err)
	}
	if h, fl := f.item(t, "hotel", "cap", "h1"), f.item(t, "flight", "cap", "f1"); h != "1" || fl != "1" {
		t.Fatalf("capacities hotel %s, flight %s; want 1 and 1 (each booked once)", h, fl)
	}
	f.checkNoLocks(t, "after the reset run committed")
}

func asApplicationError(err error, target **temporal.ApplicationError) bool {
	for err != nil {
		if app, ok := err.(*temporal.ApplicationError); ok {
			*target = app
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// timedOutStep calls the slow SSF with one attempt of 2 s: the workflow sees the timeout and
// goes on (a saga would compensate).
func timedOutStep(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	return Call(ctx, "slow", nil, nil)
}

// A step the workflow gave up on (its only attempt timed out) can no longer take effect: the
// attempt, still running, is fenced at its deadline, so its write after the timeout fails;
// once the workflow closed, its instance is recorded as abandoned, and no later request runs it.
func TestStepTheWorkflowGaveUpOnIsFenced(t *testing.T) {
	c := temporaltest.Client(t)
	clock := testclock.New(time.Now())
	started, release := make(chan struct{}, 1), make(chan struct{})
	h := local.NewHost()
	h.Logger = quiet
	t.Cleanup(h.Close)
	const bound = time.Minute
	rt, err := h.Add(ssf.Config{Name: "slow", Store: testtables.Mem(t, "slow"), Logger: quiet, Clock: clock,
		Lifetime: 30 * time.Second, GCBound: bound, Hold: HoldWhileOpen(c, 0),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			started <- struct{}{}
			<-release
			return nil, env.Write("s", "k", "late")
		}})
	if err != nil {
		t.Fatal(err)
	}
	queue := serveWorkflows(t, c, h, timedOutStep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "fence-" + t.Name()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, timedOutStep)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	var timeout *temporal.TimeoutError
	if err := run.Get(ctx, nil); !errors.As(err, &timeout) {
		t.Fatalf("the workflow: %v, want the step's timeout", err)
	}
	// The workflow has acted on the failure; the attempt now tries to write.
	clock.Advance(3 * time.Second)
	close(release)
	for deadline := time.Now().Add(10 * time.Second); rt.Stats().Abandoned == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the timed-out attempt never ended")
		}
	}
	items := func() map[string][]byte {
		items, err := rt.Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	if v, ok := items()["s/k"]; ok {
		t.Fatalf("the attempt wrote %s after its timeout", v)
	}
	if _, err := rt.CollectGarbage(ctx); err != nil { // stamps
		t.Fatal(err)
	}
	clock.Advance(bound + time.Second)
	if r, err := rt.CollectGarbage(ctx); err != nil || r.Abandoned != 1 {
		t.Fatalf("GC after the workflow closed: %+v %v, want the instance abandoned", r, err)
	}
	instance := InstanceID(temporaltest.Namespace, id, "", "ssf-0")
	st, err := rt.Intent(ctx, instance)
	if err != nil || !st.Done || !strings.Contains(st.Result.Error, ssf.ErrAbandoned.Error()) {
		t.Fatalf("the instance: %+v %v, want it abandoned", st, err)
	}
	if res, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: instance}); err != nil || res.Error != st.Result.Error {
		t.Fatalf("a late request for it: %+v %v, want its recorded failure", res, err)
	}
	if v, ok := items()["s/k"]; ok {
		t.Fatalf("the abandoned step wrote %s", v)
	}
}
