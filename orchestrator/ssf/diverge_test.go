package ssf_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// schedule orders the executions of TestDivergedExecutionNeverActs.
type schedule struct {
	mu          sync.Mutex
	k2Writes    int
	bAtWrite    chan struct{} // B reached its write (its read is logged)
	releaseB    chan struct{}
	aWrote      bool
	crashedDone bool
}

func (s *schedule) Inject(_ context.Context, p ssf.FaultPoint) error {
	s.mu.Lock()
	if p.Instance != "x" || p.Op != "update" || p.After {
		s.mu.Unlock()
		return nil
	}
	switch {
	case p.Key.Partition == "d|t|k2":
		s.k2Writes++
		if s.k2Writes == 1 { // B: stall between logging its read and writing
			s.mu.Unlock()
			close(s.bAtWrite)
			<-s.releaseB
			return nil
		}
		s.aWrote = true
	case p.Key.Partition == "i|x" && p.Key.Sort == "intent" && s.aWrote && !s.crashedDone:
		s.crashedDone = true // A dies before marking done
		s.mu.Unlock()
		return ssf.ErrCrashed
	}
	s.mu.Unlock()
	return nil
}

// Two executions of one instance read different values for the same step (a write landed in
// between). The one whose value was logged second must stop before acting on its value;
// otherwise it could write first, die before "done", and leave a re-execution to report a
// result computed from the logged value next to an effect computed from the other.
func TestDivergedExecutionNeverActs(t *testing.T) {
	s := &schedule{bAtWrite: make(chan struct{}), releaseB: make(chan struct{})}
	h := local.NewHost()
	defer h.Close()
	aRead, releaseA := make(chan struct{}), make(chan struct{})
	var runs int
	var mu sync.Mutex
	rt, err := h.Add(ssf.Config{Name: "div", Store: newTable(), RelaunchDelay: time.Nanosecond, Faults: s,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			if string(in) != "null" { // "set" requests
				return nil, env.Write("t", "k", in)
			}
			var v int
			if _, err := env.ReadInto("t", "k", &v); err != nil {
				return nil, err
			}
			mu.Lock()
			runs++
			first := runs == 1
			mu.Unlock()
			if first { // A: read the old value, then wait
				close(aRead)
				<-releaseA
			}
			return v, env.Write("t", "k2", v+1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "div", "set1", 1); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { _, err := h.Invoke(ctx, "div", "x", nil); aDone <- err }()
	<-aRead
	if _, err := h.Invoke(ctx, "div", "set2", 2); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan ssf.Result, 1)
	go func() { r, _ := h.Invoke(ctx, "div", "x", nil); bDone <- r }() // a duplicate delivery
	<-s.bAtWrite
	close(releaseA)
	<-aDone
	close(s.releaseB)
	<-bDone
	// Whatever happened, let the intent collector finish the instance.
	for i := 0; i < 10; i++ {
		if _, err := rt.CollectIntents(ctx); err != nil {
			t.Fatal(err)
		}
		h.Wait()
	}
	st, err := rt.Intent(ctx, "x")
	if err != nil || !st.Done {
		t.Fatalf("instance not done: %+v %v", st, err)
	}
	items, _ := rt.Items(ctx)
	var read, wrote int
	_ = json.Unmarshal(st.Result.Output, &read)
	_ = json.Unmarshal(items["t/k2"], &wrote)
	if wrote != read+1 {
		t.Fatalf("the instance reports reading %d but wrote %d: an effect came from a diverged execution", read, wrote)
	}
}
