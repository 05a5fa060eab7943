package ssftemporal

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// progress is the long step's state between checkpoints.
type progress struct {
	Next int `json:"next"` // the next item to write
	Sum  int `json:"sum"`
}

const longItems = 20

// A long step told to stop half-way (the worker is shutting down) checkpoints and stops; the
// retry resumes at the checkpoint: it does only the second half of the work, and the result
// and the state equal an uninterrupted run's.
func TestLongStepResumesFromCheckpoint(t *testing.T) {
	stop := make(chan struct{})
	iterations := 0
	h := local.NewHost()
	h.Logger = quiet
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{Name: "long", Store: testtables.Mem(t, "long"), RowCapacity: 4, Logger: quiet,
		Handler: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			var p progress
			if _, err := Resume(env, &p); err != nil {
				return nil, err
			}
			for ; p.Next < longItems; p.Next++ {
				if ShouldCheckpoint(env) {
					if err := Checkpoint(env, p); err != nil {
						return nil, err
					}
					return nil, env.Stop(ErrCheckpointed)
				}
				iterations++
				if iterations == longItems/2 && stop != nil {
					close(stop) // the worker is asked to stop half-way through the first attempt
					stop = nil
				}
				var v int
				if _, err := env.ReadInto("t", fmt.Sprint(p.Next), &v); err != nil {
					return nil, err
				}
				if err := env.Write("t", fmt.Sprint(p.Next), v+p.Next); err != nil {
					return nil, err
				}
				p.Sum += p.Next
			}
			return p.Sum, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet))
	var details *progress
	var saved any
	first := s.NewTestActivityEnvironment()
	Register(first, h.Runtimes()...)
	first.SetWorkerStopChannel(stop) // before the handler clears stop
	first.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var cp checkpoint
		if err := d.Get(&cp); err != nil {
			t.Error(err)
		}
		saved = cp
		details = &progress{}
		_ = json.Unmarshal(cp.State, details)
	})
	if _, err := first.ExecuteActivity(ActivityName("long"), Invocation{}); err == nil {
		t.Fatal("the first attempt completed though the worker was stopping")
	}
	if details == nil || details.Next != longItems/2 {
		t.Fatalf("checkpoint %+v, want one at item %d", details, longItems/2)
	}

	iterations = 0
	retry := s.NewTestActivityEnvironment()
	Register(retry, h.Runtimes()...)
	retry.SetHeartbeatDetails(saved)
	val, err := retry.ExecuteActivity(ActivityName("long"), Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if err := val.Get(&raw); err != nil {
		t.Fatal(err)
	}
	if string(raw) != fmt.Sprint(longItems*(longItems-1)/2) || iterations != longItems/2 {
		t.Fatalf("retry returned %s after %d iterations; want %d after %d", raw, iterations, longItems*(longItems-1)/2, longItems/2)
	}
	items, err := rt.Items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range longItems {
		if got := string(items[fmt.Sprint("t/", i)]); got != fmt.Sprint(i) {
			t.Fatalf("item %d holds %s, want %d (written once)", i, got, i)
		}
	}
}
