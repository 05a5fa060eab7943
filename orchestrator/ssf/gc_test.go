package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

const (
	lifetime = time.Minute
	bound    = 2 * time.Minute
)

// writer is an SSF whose instances write their input to key k (and, for "crash-after-first",
// crash on their second write the first time they run).
func newWriter(t *testing.T, c *testclock.Manual, faults ssf.FaultInjector) (*local.Host, *ssf.Runtime) {
	t.Helper()
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{
		Name: "writer", Store: newTable(), RowCapacity: 2, Lifetime: lifetime, GCBound: bound,
		RelaunchDelay: time.Second, Clock: c, Faults: faults, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			if err := env.Write("t", "k", in); err != nil {
				return nil, err
			}
			return nil, env.Write("t", "other", in)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, rt
}

func write(t *testing.T, h *local.Host, id string, v int) {
	t.Helper()
	if _, err := h.Invoke(context.Background(), "writer", id, v); err != nil {
		t.Fatal(err)
	}
}

// writeAndCollect writes n values to t/k ("w0"...), each followed by step on the clock and a GC
// pass, then runs passes more than T apart `settle` times: what they unlinked is gone by then.
func writeAndCollect(t *testing.T, h *local.Host, rt *ssf.Runtime, c *testclock.Manual, n int, step time.Duration, settle int) {
	t.Helper()
	for i := 0; i < n; i++ {
		write(t, h, fmt.Sprintf("w%d", i), i)
		c.Advance(step)
		gc(t, rt)
	}
	for i := 0; i < settle; i++ {
		c.Advance(bound + time.Second)
		gc(t, rt)
	}
}

func gc(t *testing.T, rt *ssf.Runtime) ssf.GCReport {
	t.Helper()
	r, err := rt.CollectGarbage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func shape(t *testing.T, rt *ssf.Runtime) ssf.DAALShape {
	t.Helper()
	s, err := rt.DAAL(context.Background(), "t", "k")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The DAAL stays short under sustained writes with the GC on, and grows without it.
func TestGCKeepsDAALShort(t *testing.T) {
	for _, withGC := range []bool{true, false} {
		c := testclock.New(time.Unix(1e9, 0))
		h, rt := newWriter(t, c, nil)
		longest := 0
		for i := 0; i < 200; i++ {
			write(t, h, fmt.Sprintf("w%d", i), i)
			if i%20 == 19 {
				c.Advance(bound + time.Second)
				if withGC {
					gc(t, rt)
				}
			}
			longest = max(longest, shape(t, rt).Reachable)
		}
		s := shape(t, rt)
		t.Logf("GC %v: longest reachable DAAL %d rows, final %+v", withGC, longest, s)
		if withGC && longest > 25 {
			t.Fatalf("with GC the DAAL reached %d rows", longest)
		}
		if !withGC && s.Reachable != 100 {
			t.Fatalf("without GC the DAAL should hold all 200 writes in 100 rows, has %+v", s)
		}
	}
}

// A row the GC unlinks stays stored (readable by a traversal that saw it linked) until T after
// it was found unreachable; only then is it deleted.
func TestGCWaitsTBeforeDeletingUnlinkedRows(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h, rt := newWriter(t, c, nil)
	for i := 0; i < 8; i++ {
		write(t, h, fmt.Sprintf("w%d", i), i)
	}
	before := shape(t, rt) // head + 4 rows of 2 entries
	gc(t, rt)              // stamps finish times
	c.Advance(bound + time.Second)
	if r := gc(t, rt); r.Disconnected == 0 {
		t.Fatalf("nothing unlinked: %+v", r)
	}
	unlinked := shape(t, rt)
	if unlinked.Stored != before.Stored || unlinked.Reachable >= before.Reachable {
		t.Fatalf("unlinking must keep rows stored: before %+v, after %+v", before, unlinked)
	}
	if r := gc(t, rt); r.Dangling == 0 || r.RowsDeleted != 0 {
		t.Fatalf("second pass must only mark dangling rows: %+v", r)
	}
	c.Advance(bound - time.Second) // still within T of being found unreachable
	if r := gc(t, rt); r.RowsDeleted != 0 {
		t.Fatalf("rows deleted before T elapsed: %+v", r)
	}
	if s := shape(t, rt); s.Stored != before.Stored {
		t.Fatalf("rows vanished within T: %+v", s)
	}
	c.Advance(2 * time.Second)
	if r := gc(t, rt); r.RowsDeleted == 0 {
		t.Fatalf("rows not deleted after T: %+v", r)
	}
	if s := shape(t, rt); s.Stored != s.Reachable {
		t.Fatalf("unreachable rows left after T: %+v", s)
	}
}

// crashOnce crashes the first fault point match accepts (called under the lock, so match may
// keep state); for an "after" point, the operation took effect and only its reply is lost.
type crashOnce struct {
	mu    sync.Mutex
	match func(ssf.FaultPoint) bool
	done  bool
}

func (c *crashOnce) Inject(_ context.Context, p ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done || !c.match(p) {
		return nil
	}
	c.done = true
	return ssf.ErrCrashed
}

// afterUpdateOfK crashes instance right after its first update of t/k's DAAL (of row, if not
// "") took effect.
func afterUpdateOfK(instance, row string) *crashOnce {
	return &crashOnce{match: func(p ssf.FaultPoint) bool {
		return p.Instance == instance && p.Op == "update" && p.After && p.Key.Partition == "d|t|k" && (row == "" || p.Key.Sort == row)
	}}
}

// An unfinished instance keeps the rows holding its write log alive through any number of GC
// passes, so when the intent collector finally re-runs it, the replay finds its write logged
// (case A) instead of writing again.
func TestGCKeepsRowsOfUnfinishedInstances(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	faults := afterUpdateOfK("slow", "")
	h, rt := newWriter(t, c, faults)
	// Three writes first, so that the unfinished write lands in the second row, not the head
	// (which is never unlinked anyway).
	for i := 1; i <= 3; i++ {
		write(t, h, fmt.Sprintf("w-first-%d", i), i)
	}
	if _, err := h.Invoke(context.Background(), "writer", "slow", 1000); !errors.Is(err, ssf.ErrCrashed) {
		t.Fatalf("want the injected crash, got %v", err)
	}
	writeAndCollect(t, h, rt, c, 20, bound/4, 4)
	if s := shape(t, rt); s.Reachable < 3 {
		t.Fatalf("the row holding the unfinished instance's write was unlinked: %+v", s)
	}
	// Every write so far logged a step no row held: each read the last row only.
	if s := rt.Stats(); s.WriteScans != 0 {
		t.Fatalf("%d writes of new steps scanned the list", s.WriteScans)
	}
	// The write by "slow" must not be re-applied on top of the later writes: its entry is in
	// a row before the tail, which the tail's summary must not rule out.
	if _, err := rt.CollectIntents(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	items, err := rt.Items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(items["t/k"]); got != "19" {
		t.Fatalf("t/k = %s after the re-run; the re-executed write was applied again", got)
	}
	if got := string(items["t/other"]); got != "1000" {
		t.Fatalf("t/other = %s: the re-run did not finish the instance", got)
	}
	if s := rt.Stats(); s.WriteScans != 1 {
		t.Fatalf("%d writes scanned the list, want 1: the re-run's write of a step logged in an earlier row", s.WriteScans)
	}
}

// A callback for an invoke-log entry that does not exist (the caller finished and was
// collected) is ignored, and counted.
func TestSpuriousCallbackIgnored(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	rt := add(t, h, "caller", 4, func(env *ssf.Env, in json.RawMessage) (any, error) { return nil, nil })
	_, err := rt.Handle(context.Background(), ssf.Request{Kind: ssf.KindCallback, InstanceID: "callee-1",
		Caller: &ssf.CallerRef{SSF: "caller", InstanceID: "gone", Step: 3}, Result: &ssf.Result{Output: json.RawMessage(`1`)}})
	if err != nil {
		t.Fatal(err)
	}
	if st := rt.Stats(); st.SpuriousCallbacks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A batch of callbacks records each result in its own entry, created for a caller that is
// unfinished (its call named the callee instance without writing an entry); one for a finished
// or unknown caller is spurious; one without ids is refused.
func TestCallbackBatch(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	calleeIDs := map[string]string{}
	var mu sync.Mutex
	add(t, h, "callee", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calleeIDs[string(in)] = env.InstanceID()
		return in, nil
	})
	rt := add(t, h, "caller", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		out, err := env.SyncInvoke("callee", in)
		if err == nil && string(in) == "7" {
			return nil, env.Stop(errors.New("not finished yet"))
		}
		return out, err
	})
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "caller", "c1", 7); !errors.Is(err, ssf.ErrStopped) {
		t.Fatalf("the unfinished caller: %v, want ErrStopped", err)
	}
	if _, err := h.Invoke(ctx, "caller", "c2", 8); err != nil {
		t.Fatal(err)
	}
	batch := ssf.Request{Kind: ssf.KindCallback, InstanceID: calleeIDs["7"], Results: []ssf.CalleeResult{
		{CalleeID: calleeIDs["7"], Callee: "callee", Caller: ssf.CallerRef{SSF: "caller", InstanceID: "c1", Step: 0}, Result: ssf.Result{Output: json.RawMessage(`7`)}},
		{CalleeID: calleeIDs["8"], Callee: "callee", Caller: ssf.CallerRef{SSF: "caller", InstanceID: "c2", Step: 0}, Result: ssf.Result{Output: json.RawMessage(`8`)}},
		{CalleeID: "other", Caller: ssf.CallerRef{SSF: "caller", InstanceID: "gone", Step: 3}, Result: ssf.Result{Output: json.RawMessage(`1`)}},
	}}
	if _, err := rt.Handle(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if st := rt.Stats(); st.Callbacks != 3 || st.SpuriousCallbacks != 2 {
		t.Fatalf("stats %+v, want 3 callbacks, 2 spurious", st)
	}
	for id, want := range map[string]int{"c1": 1, "c2": 0} {
		rec, _, err := rt.Steps(ctx, id)
		if err != nil || len(rec.Calls) != want || (want == 1 && (rec.Calls[0].CalleeID != calleeIDs["7"] || rec.Calls[0].Callee != "callee")) {
			t.Fatalf("%s's invoke log: %+v %v, want %d entries naming the callee", id, rec.Calls, err, want)
		}
	}
	batch.Results[1].CalleeID = ""
	if _, err := rt.Handle(ctx, batch); !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("a batch entry without a callee id: %v, want ErrBadInput", err)
	}
}

// The intent collector may re-run an instance while the original is still running: both
// executions return the same result and the effects happen once.
func TestRelaunchWhileOriginalRuns(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	release := make(chan struct{})
	var runs int
	var mu sync.Mutex
	rt := add(t, h, "slow", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		var n int
		if _, err := env.ReadInto("t", "n", &n); err != nil {
			return nil, err
		}
		if err := env.Write("t", "n", n+1); err != nil {
			return nil, err
		}
		mu.Lock()
		runs++
		first := runs == 1
		mu.Unlock()
		if first {
			<-release // the original stalls after its write
		}
		return n + 1, nil
	})
	done := make(chan ssf.Result)
	go func() {
		r, err := h.Invoke(context.Background(), "slow", "r1", nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for {
		mu.Lock()
		started := runs == 1
		mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rep, err := rt.CollectIntents(context.Background())
	if err != nil || rep.Relaunched != 1 {
		t.Fatalf("relaunch: %+v %v", rep, err)
	}
	h.Wait()
	close(release)
	if r := <-done; string(r.Output) != "1" {
		t.Fatalf("original returned %s", r.Output)
	}
	items, _ := rt.Items(context.Background())
	if string(items["t/n"]) != "1" || runs != 2 {
		t.Fatalf("n = %s after %d runs; want 1 after 2", items["t/n"], runs)
	}
}

// External calls are at-least-once: a crash after the call but before its result is logged
// calls it again; once logged, re-executions replay the result instead of calling.
func TestExternalIsAtLeastOnce(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	calls := 0
	rt, err := h.Add(ssf.Config{Name: "legacy", Store: newTable(), RelaunchDelay: time.Nanosecond,
		Faults: &crashOnce{match: func(p ssf.FaultPoint) bool {
			return p.Op == "update" && !p.After && p.Key == store.Key{Partition: "i|r1", Sort: "r|00000000"}
		}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			out, err := env.External(func(context.Context) (json.RawMessage, error) {
				calls++
				return json.RawMessage(fmt.Sprint(calls)), nil
			})
			return json.RawMessage(out), err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Invoke(context.Background(), "legacy", "r1", nil); !errors.Is(err, ssf.ErrCrashed) {
		t.Fatalf("want the crash before the log write, got %v", err)
	}
	r, err := h.Invoke(context.Background(), "legacy", "r1", nil) // the re-run calls again
	if err != nil || string(r.Output) != "2" || calls != 2 {
		t.Fatalf("re-run: %+v %v, %d calls", r, err, calls)
	}
	if _, err := rt.CollectIntents(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if calls != 2 {
		t.Fatalf("a finished instance called the external function again: %d calls", calls)
	}
}

// A finished instance whose holder may still re-send its request (a Temporal workflow that is
// still open) keeps its intent past T; once the holder lets go, the next pass removes it.
// Instances without a holder are collected as usual.
func TestGCKeepsHeldInstances(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	var mu sync.Mutex
	open := true
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{
		Name: "held", Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hold: func(_ context.Context, holder string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if holder != "workflow-1" {
				return false, fmt.Errorf("unexpected holder %q", holder)
			}
			return open, nil
		},
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) { return nil, env.Write("t", "k", in) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, req := range []ssf.Request{{InstanceID: "held-1", Input: json.RawMessage("1"), Holder: "workflow-1"}, {InstanceID: "free-1", Input: json.RawMessage("2")}} {
		if res, err := rt.Handle(ctx, req); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	gc(t, rt) // stamps finish times
	c.Advance(bound + time.Second)
	if r := gc(t, rt); r.Held != 1 || r.IntentsRemoved != 1 {
		t.Fatalf("with the holder open: %+v, want 1 held and 1 removed", r)
	}
	if st, err := rt.Intent(ctx, "held-1"); err != nil || !st.Exists {
		t.Fatalf("the held intent is gone (%v)", err)
	}
	mu.Lock()
	open = false
	mu.Unlock()
	if r := gc(t, rt); r.Held != 0 || r.IntentsRemoved != 1 {
		t.Fatalf("with the holder closed: %+v, want the held intent removed", r)
	}
}

// heldSwitch is the holder of newHeldSSF's instances, which the test opens and closes, and a
// failure it turns on and off.
type heldSwitch struct {
	mu           sync.Mutex
	open, broken bool
}

func (s *heldSwitch) set(open, broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open, s.broken = open, broken
}
func (s *heldSwitch) get() (open, broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.broken
}

// newHeldSSF is an SSF whose instances have a holder (a Temporal activity's workflow, stood in
// by the switch: open and broken at first) and run handler with the switch's failure.
func newHeldSSF(t *testing.T, maxAttempts int, handler func(env *ssf.Env, broken bool) (any, error)) (*local.Host, *ssf.Runtime, *testclock.Manual, *heldSwitch) {
	t.Helper()
	c := testclock.New(time.Unix(1e9, 0))
	holder := &heldSwitch{open: true, broken: true}
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{
		Name: "held", Store: newTable(), Lifetime: lifetime, GCBound: bound, RelaunchDelay: time.Second, Clock: c,
		MaxAttempts: maxAttempts, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hold: func(context.Context, string) (bool, error) { open, _ := holder.get(); return open, nil },
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			_, broken := holder.get()
			return handler(env, broken)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, rt, c, holder
}

// An instance whose holder retries it (a Temporal activity) skips the pending index: the
// intent collector leaves it to the holder. If the holder closes with the instance unfinished
// (an activity timed out for good, a terminated workflow), the holder went on without it: the
// garbage collector records it as abandoned once no execution can run, it never takes effect
// again (its first execution's write stays the only one), and the next pass collects it.
func TestGCAbandonsInstancesTheirHolderClosed(t *testing.T) {
	h, rt, c, holder := newHeldSSF(t, 0, func(env *ssf.Env, broken bool) (any, error) {
		v, err := env.Read("t", "k")
		if err != nil {
			return nil, err
		}
		var n int
		if len(v) > 0 {
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, err
			}
		}
		if err := env.Write("t", "k", n+1); err != nil {
			return nil, err
		}
		if broken {
			_, err := env.SyncInvoke("nobody", nil) // abandons the execution after its write
			return nil, err
		}
		return n + 1, nil
	})
	ctx := context.Background()
	if _, err := rt.Handle(ctx, ssf.Request{InstanceID: "act-1", Holder: "workflow-1"}); err == nil {
		t.Fatal("the first execution should have been abandoned")
	}
	if n, err := rt.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("pending entries for a held instance: %d %v", n, err)
	}
	c.Advance(time.Minute)
	if r, err := rt.CollectIntents(ctx); err != nil || r.Relaunched != 0 {
		t.Fatalf("the intent collector relaunched a held instance: %+v %v", r, err)
	}
	gc(t, rt)
	c.Advance(bound + time.Second)
	if r := gc(t, rt); r.Held != 1 || r.Abandoned != 0 || r.IntentsRemoved != 0 {
		t.Fatalf("with the holder open: %+v, want it held", r)
	}
	holder.set(false, false)
	if r := gc(t, rt); r.Abandoned != 1 || r.IntentsRemoved != 0 {
		t.Fatalf("with the holder closed and the instance unfinished: %+v, want it abandoned", r)
	}
	st, err := rt.Intent(ctx, "act-1")
	if err != nil || !st.Done || !strings.Contains(st.Result.Error, ssf.ErrAbandoned.Error()) {
		t.Fatalf("abandoned instance: %+v %v, want a failed result saying so", st, err)
	}
	c.Advance(time.Hour)
	if r, err := rt.CollectIntents(ctx); err != nil || r.Relaunched != 0 {
		t.Fatalf("intent collector: %+v %v, want nothing relaunched", r, err)
	}
	h.Wait()
	if again, err := rt.Handle(ctx, ssf.Request{InstanceID: "act-1", Holder: "workflow-1"}); err != nil || again.Error != st.Result.Error {
		t.Fatalf("a late retry of the abandoned instance: %+v %v, want its failure", again, err)
	}
	items, err := rt.Items(ctx)
	if err != nil || string(items["t/k"]) != "1" {
		t.Fatalf("items %s %v: want the first execution's write only", items, err)
	}
	gc(t, rt) // the retry restarted the count
	c.Advance(bound + time.Second)
	if r := gc(t, rt); r.IntentsRemoved != 1 {
		t.Fatalf("after it was abandoned: %+v, want it removed", r)
	}
}

// A finished transaction's record and shadow DAALs go once the instances that ended it are
// recyclable, in every SSF it touched; committed values stay.
func TestGCRemovesFinishedTransactions(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	t.Cleanup(h.Close)
	rts, drivers := map[string]*ssf.Runtime{}, map[string]*memstore.Driver{}
	for name, fn := range map[string]ssf.Handler{"accounts": accounts, "teller": teller} {
		d := memstore.New(memstore.DefaultMaxRowBytes)
		rt, err := h.Add(ssf.Config{Name: name, Store: store.NewTable(d, "mem://"+name), Handler: fn, RowCapacity: 2,
			Lifetime: lifetime, GCBound: bound, Clock: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rts[name], drivers[name] = rt, d
	}
	ctx := context.Background()
	for _, a := range []string{"a", "b"} {
		if _, err := h.Invoke(ctx, "accounts", "open-"+a, map[string]any{"account": a, "set": 100}); err != nil {
			t.Fatal(err)
		}
	}
	// Committed, aborted for lack of funds, committed again on the same accounts.
	for i, tr := range []transfer{{"a", "b", 30}, {"a", "b", 500}, {"b", "a", 10}} {
		if _, err := h.Invoke(ctx, "teller", fmt.Sprintf("t%d", i), tr); err != nil {
			t.Fatal(err)
		}
	}
	txData := func() []string {
		var left []string
		for name, d := range drivers {
			for _, p := range d.Partitions() {
				if strings.HasPrefix(p, "s|") || strings.HasPrefix(p, "x|") {
					left = append(left, name+": "+p)
				}
			}
		}
		return left
	}
	if len(txData()) == 0 {
		t.Fatal("no transaction records or shadows to collect: the test does not test anything")
	}
	for _, rt := range rts {
		gc(t, rt)
	}
	c.Advance(bound + time.Second)
	removed := 0
	for _, rt := range rts {
		removed += gc(t, rt).TxsRemoved
	}
	if left := txData(); len(left) != 0 || removed != 3 {
		t.Fatalf("after T: %d transaction records collected (want 3 transactions x the participant's; the owner keeps none); left behind: %v", removed, left)
	}
	if got := balances(t, rts["accounts"]); got["bal/a"] != "80" || got["bal/b"] != "120" {
		t.Fatalf("balances after collection: %v", got)
	}
	noLocks(t, rts)
}

// pausedCollector stalls the first garbage-collector pass at its first scan of the finished
// index, for d, during which an instance finishes (as if the collector were paused that long).
type pausedCollector struct {
	once   sync.Once
	during func()
	clock  *testclock.Manual
	d      time.Duration
}

func (p *pausedCollector) Inject(_ context.Context, fp ssf.FaultPoint) error {
	if fp.Instance == ssf.CollectorGC && fp.Op == "scan" && strings.HasPrefix(fp.Key.Partition, "f|") && !fp.After {
		p.once.Do(func() {
			p.clock.Advance(p.d)
			p.during()
		})
	}
	return nil
}

// A collector paused between starting its pass and scanning the finished index must stamp
// what it finds with the time it found it, not the time the pass began: an instance that
// finished during the pause would otherwise be collected less than T after it finished, while
// an execution of it may still run.
func TestGCStampsFinishTimesAfterAPause(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	p := &pausedCollector{clock: c, d: 90 * time.Second}
	h, rt := newWriter(t, c, p)
	p.during = func() { write(t, h, "finished-during-pause", 1) }
	gc(t, rt)              // paused 90 s; stamps the instance that finished in the pause
	c.Advance(time.Minute) // 60 s after it finished, less than T (2 minutes)
	if r := gc(t, rt); r.Recyclable != 0 || r.IntentsRemoved != 0 {
		t.Fatalf("an instance finished 60 s ago was collected with T = %v: %+v", bound, r)
	}
	c.Advance(time.Minute + time.Second)
	if r := gc(t, rt); r.IntentsRemoved != 1 {
		t.Fatalf("the instance was not collected T after it finished: %+v", r)
	}
}

// An instance id (an idempotency key) sent again with another input is refused with
// ErrInputMismatch, before and after the instance was collected; the same input, however its
// JSON is spaced or its keys ordered, gets the instance's result without running it again.
func TestInputMismatchIsRefused(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	_, rt := newWriter(t, c, nil)
	ctx := context.Background()
	send := func(input string) (ssf.Result, error) {
		return rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: "key-1", Input: json.RawMessage(input)})
	}
	if _, err := send(`{"a": 1, "b": [2, 3]}`); err != nil {
		t.Fatal(err)
	}
	runs := rt.Stats().Executions
	check := func(when string) {
		t.Helper()
		if _, err := send(`{"b":[2,3],"a":1}`); err != nil {
			t.Fatalf("%s: the same input, reordered: %v", when, err)
		}
		_, err := send(`{"a": 2, "b": [2, 3]}`)
		if !errors.Is(err, ssf.ErrInputMismatch) || !errors.Is(err, ssf.ErrBadInput) {
			t.Fatalf("%s: another input under the same id: %v, want ErrInputMismatch", when, err)
		}
		if got := rt.Stats().Executions; got != runs {
			t.Fatalf("%s: %d executions, want %d: a repeated id ran again", when, got, runs)
		}
	}
	check("while kept")
	for range 2 { // stamp, then collect
		c.Advance(bound + time.Second)
		gc(t, rt)
	}
	if st, err := rt.Intent(ctx, "key-1"); err != nil || !st.Collected {
		t.Fatalf("not collected: %+v %v", st, err)
	}
	check("after collection")
	c.Advance(rt.Config().KeyRetention + time.Second)
	gc(t, rt)
	if _, err := send(`{"b":[2,3],"a":1}`); !errors.Is(err, ssf.ErrKeyExpired) {
		t.Fatalf("after expiry, the same input: %v, want ErrKeyExpired", err)
	}
	if _, err := send(`{"a": 2}`); !errors.Is(err, ssf.ErrInputMismatch) {
		t.Fatalf("after expiry, another input: %v, want ErrInputMismatch", err)
	}
	if got := rt.Stats().Executions; got != runs {
		t.Fatalf("after expiry: %d executions, want %d", got, runs)
	}
}

// An instance that can never finish (here: it calls an SSF that does not exist) is launched at
// most MaxAttempts times by the intent collector, with growing delays, then given up once no
// execution can be running: a failed result naming the last error, answered to every later
// request, and no more launches.
func TestPoisonInstanceIsGivenUp(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	defer h.Close()
	base := ssf.Config{Lifetime: time.Minute, GCBound: 2 * time.Minute, RelaunchDelay: time.Second, Clock: c}
	callee := base
	callee.Name, callee.Store, callee.MaxAttempts = "poison", newTable(), 3
	var failures []ssf.Failure
	callee.OnFailure = func(_ context.Context, f ssf.Failure) error { failures = append(failures, f); return nil }
	callee.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		_, err := env.SyncInvoke("nobody", nil)
		return nil, err
	}
	rt, err := h.Add(callee)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "poison", "p-1", nil); err == nil {
		t.Fatal("a poison instance finished")
	}
	pass := func() {
		t.Helper()
		if _, err := rt.CollectIntents(ctx); err != nil {
			t.Fatal(err)
		}
		h.Wait()
	}
	for i := 0; rt.Stats().Relaunched < 3; i++ {
		if i > 10 {
			t.Fatalf("stats %+v: the intent collector stopped launching before MaxAttempts", rt.Stats())
		}
		c.Advance(3 * time.Minute) // past every backoff (RelaunchDelay << 5) and T
		pass()
	}
	// The attempts are spent. A client's retry starts an execution now: the collector must
	// not record a failure while it may be running.
	c.Advance(3 * time.Minute)
	lastRun := c.Now()
	if _, err := h.Invoke(ctx, "poison", "p-1", nil); err == nil {
		t.Fatal("a poison instance finished")
	}
	pass()
	if st, err := rt.Intent(ctx, "p-1"); err != nil || st.Done {
		t.Fatalf("given up while an execution may still run: %+v %v", st, err)
	}
	c.Advance(3 * time.Minute)
	pass()
	st, err := rt.Intent(ctx, "p-1")
	if err != nil || !st.Done || !strings.Contains(st.Result.Error, ssf.ErrGaveUp.Error()) || !strings.Contains(st.Result.Error, `no SSF named "nobody"`) {
		t.Fatalf("after the attempts: %+v %v; want a given-up result naming the last error", st, err)
	}
	if len(failures) != 1 || failures[0].InstanceID != "p-1" || failures[0].Launches != 3 || failures[0].Error != st.Result.Error {
		t.Fatalf("failures reported: %+v, want the one given up", failures)
	}
	// Its failures span its first execution to its last, the client's retry.
	if f := failures[0]; !f.FirstExecution.Equal(time.Unix(1e9, 0)) || !f.LastExecution.Equal(lastRun) || !f.Time.Equal(c.Now()) {
		t.Fatalf("failure %+v: want executions from %v to %v", f, time.Unix(1e9, 0), lastRun)
	}
	if s := rt.Stats(); s.Relaunched != 3 || s.GaveUp != 1 || s.Executions != 5 {
		t.Fatalf("stats %+v: want 3 relaunches, 1 give-up, 5 executions", s)
	}
	res, err := h.Invoke(ctx, "poison", "p-1", nil)
	if err != nil || res.Error != st.Result.Error || !res.Replayed {
		t.Fatalf("asked again: %+v %v", res, err)
	}
}

// A start of an existing instance (an asynchronous start, a relaunch) never creates an intent,
// and one a platform delivers more than T after it was sent is refused with the reason: a
// late redelivery of a collected and forgotten instance cannot run it again from scratch.
func TestLateAndOrphanStartsAreRefused(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	_, rt := newWriter(t, c, nil)
	ctx := context.Background()
	start := func(id string, sent time.Time) error {
		_, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Async: true, Sent: sent.UnixNano()})
		return err
	}
	if err := start("never-created", c.Now()); !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("a start of an instance without intent: %v, want ErrBadInput", err)
	}
	if st, err := rt.Intent(ctx, "never-created"); err != nil || st.Exists {
		t.Fatalf("a start created an intent: %+v %v", st, err)
	}
	if _, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: "w-1", Input: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	runs := rt.Stats().Executions
	sent := c.Now()
	c.Advance(bound + time.Second)
	if err := start("w-1", sent); !errors.Is(err, ssf.ErrLateStart) || !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("a start delivered after T: %v, want ErrLateStart", err)
	}
	if err := start("w-1", c.Now()); err != nil {
		t.Fatalf("a timely start of a finished instance: %v", err)
	}
	// Collected, expired, forgotten: a start sent now still finds nothing to run.
	for _, d := range []time.Duration{bound, bound, rt.Config().KeyRetention, rt.Config().ExpiredKeyRetention} {
		c.Advance(d + time.Second)
		gc(t, rt)
	}
	if st, err := rt.Intent(ctx, "w-1"); err != nil || st.Exists || st.Collected {
		t.Fatalf("not forgotten: %+v %v", st, err)
	}
	if err := start("w-1", c.Now()); !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("a start of a forgotten instance: %v, want ErrBadInput", err)
	}
	if s := rt.Stats(); s.Executions != runs || s.LateStarts != 1 {
		t.Fatalf("stats %+v: want %d executions and 1 late start", s, runs)
	}
}

// An instance that takes a lock of its own is never recorded as failed while unfinished: only
// finishing it releases the lock. Its holder closing hands it to the intent collector, which
// finishes it once.
func TestLockHoldersAreFinishedNotAbandoned(t *testing.T) {
	h, rt, c, holder := newHeldSSF(t, 1, func(env *ssf.Env, broken bool) (any, error) {
		if err := env.Lock("t", "k"); err != nil {
			return nil, err
		}
		if broken {
			_, err := env.SyncInvoke("nobody", nil)
			return nil, err
		}
		return "done", env.Unlock("t", "k")
	})
	ctx := context.Background()
	if _, err := rt.Handle(ctx, ssf.Request{InstanceID: "act-1", Holder: "workflow-1"}); err == nil {
		t.Fatal("the first execution should have been abandoned")
	}
	gc(t, rt)
	c.Advance(bound + time.Second)
	holder.set(false, true)
	if r := gc(t, rt); r.Adopted != 1 || r.Abandoned != 0 {
		t.Fatalf("holder closed, the instance holds a lock: %+v, want it adopted", r)
	}
	// Still failing: the intent collector runs out of attempts but never gives it up.
	for range 4 {
		c.Advance(time.Hour)
		if _, err := rt.CollectIntents(ctx); err != nil {
			t.Fatal(err)
		}
		h.Wait()
	}
	if st, err := rt.Intent(ctx, "act-1"); err != nil || st.Done || rt.Stats().GaveUp != 0 {
		t.Fatalf("an instance holding a lock was given up: %+v %v", st, err)
	}
	holder.set(false, false)
	c.Advance(time.Hour)
	if _, err := rt.CollectIntents(ctx); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if st, err := rt.Intent(ctx, "act-1"); err != nil || !st.Done || string(st.Result.Output) != `"done"` {
		t.Fatalf("the adopted instance: %+v %v, want it finished", st, err)
	}
	if locks, err := rt.Locks(ctx); err != nil || len(locks) != 0 {
		t.Fatalf("locks left: %v %v", locks, err)
	}
}

// A successor created and never linked (its appender crashed) is the row with the highest id
// but not the tail: writes must not go to it on the strength of its summary, or the list that
// traversals and the garbage collector see would end before the rows holding the item's
// newest writes (until some later append happened to link them). The next write scans, finds
// the full row as the tail and links the successor, as Beldi's appender adopts it.
func TestWritesAfterAnUnlinkedSuccessorLinkIt(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h, rt := newWriter(t, c, afterUpdateOfK("appender", "00000000000000000001")) // after creating the successor, before linking it
	write(t, h, "w1", 1)
	write(t, h, "w2", 2) // the head is full
	if _, err := h.Invoke(context.Background(), "writer", "appender", 3); !errors.Is(err, ssf.ErrCrashed) {
		t.Fatalf("want the injected crash after the successor's creation, got %v", err)
	}
	if s := shape(t, rt); s.Reachable != 1 || s.Stored != 2 {
		t.Fatalf("after the crashed append: %+v, want the head linked and an unlinked successor", s)
	}
	write(t, h, "w4", 4) // finds the unlinked row highest, and links it
	if s := shape(t, rt); s.Reachable != 2 || s.Stored != 2 {
		t.Fatalf("after the next write: %+v, want both rows linked", s)
	}
	for i := 5; i <= 9; i++ {
		write(t, h, fmt.Sprintf("w%d", i), i)
	}
	value := func() string {
		items, err := rt.Items(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return string(items["t/k"])
	}
	if got := value(); got != "9" {
		t.Fatalf("t/k = %s, want the last write's 9", got)
	}
	// The crashed instance runs again (its write had not applied), then everything else is
	// collected: no row may stay behind.
	c.Advance(2 * time.Second) // past the relaunch delay
	if _, err := rt.CollectIntents(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if got := value(); got != "3" {
		t.Fatalf("t/k = %s after the re-run, want its 3", got)
	}
	for i := 0; i < 4; i++ {
		c.Advance(bound + time.Second)
		gc(t, rt)
	}
	if s := shape(t, rt); s.Stored != s.Reachable {
		t.Fatalf("after GC: %+v, want every stored row linked", s)
	}
}

// A straggler's last request may meet the collector's work: a write paused after the fence
// let its conditional update go, past T, during which later writes moved the tail on and the
// collector unlinked and deleted the row it targets, finds that row gone. That is the fence at
// work (the execution outlived its lifetime), not corruption: the runtime must say so.
func TestStragglerWriteToACollectedRowIsFenced(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	faults := &pauseBefore{instance: "slow", partition: "d|t|k", paused: make(chan struct{}), release: make(chan struct{})}
	h, rt := newWriter(t, c, faults)
	for i := 1; i <= 3; i++ { // the head fills: the straggler's target is the row after it
		write(t, h, fmt.Sprintf("w-first-%d", i), i)
	}
	done := make(chan error, 1)
	go func() { _, err := h.Invoke(context.Background(), "writer", "slow", 1000); done <- err }()
	<-faults.paused
	writeAndCollect(t, h, rt, c, 12, bound/2, 3)
	if s := shape(t, rt); s.Stored > 3 {
		t.Fatalf("%+v: the rows the straggler read were not collected; the test tests nothing", s)
	}
	close(faults.release)
	if err := <-done; !errors.Is(err, ssf.ErrLifetimeExceeded) {
		t.Fatalf("the straggler's write ended with %v, want ErrLifetimeExceeded", err)
	}
	if n := rt.Stats().Corruptions; n != 0 {
		t.Fatalf("%d corruptions reported for a fenced straggler", n)
	}
}

// pauseBefore holds instance's first update of partition, after the fence let it go, until
// release is closed: one request in flight for as long as the test likes.
type pauseBefore struct {
	instance, partition string
	paused, release     chan struct{}
	once                sync.Once
}

func (p *pauseBefore) Inject(_ context.Context, fp ssf.FaultPoint) error {
	if fp.Instance == p.instance && fp.Op == "update" && !fp.After && fp.Key.Partition == p.partition {
		p.once.Do(func() {
			close(p.paused)
			<-p.release
		})
	}
	return nil
}

// A synchronous callee does not call its result back into the caller's log while it runs; the
// garbage collector does, before it collects the callee. A caller that crashed after the call
// and runs again only after the callee's answer expired (KeyRetention) still finds the result
// in its own log, instead of ErrKeyExpired, and the callee ran once. A pass whose callback
// fails keeps the callee.
func TestCollectedCalleeReportedToItsCaller(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The first callback fails: the pass keeps the callee for the next.
	lost := &crashOnce{match: func(p ssf.FaultPoint) bool { return p.Op == "callback" }}
	callee := addConfig(t, h, ssf.Config{Name: "callee", Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c, Faults: lost, Logger: quiet,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			var n int
			if err := json.Unmarshal(in, &n); err != nil {
				return nil, err
			}
			return n * 2, env.Write("t", "k", n)
		}})
	// The caller crashes once, after the call returned, before its write.
	crash := &crashOnce{match: func(p ssf.FaultPoint) bool {
		return p.Instance == "c1" && p.Op == "update" && !p.After && p.Key.Partition == "d|t|doubled"
	}}
	caller := addConfig(t, h, ssf.Config{Name: "caller", Store: newTable(), Lifetime: lifetime, GCBound: bound, RelaunchDelay: time.Second,
		Clock: c, Faults: crash, Logger: quiet,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			out, err := env.SyncInvoke("callee", in)
			if err != nil {
				return nil, err
			}
			return out, env.Write("t", "doubled", out)
		}})
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "caller", "c1", 21); !errors.Is(err, ssf.ErrCrashed) {
		t.Fatalf("want the injected crash, got %v", err)
	}
	if st := caller.Stats(); st.Callbacks != 0 {
		t.Fatalf("%d callbacks while the callee ran; its result reaches the caller in the response", st.Callbacks)
	}
	c.Advance(bound + time.Second)
	gc(t, callee) // stamps the finish time
	c.Advance(bound + time.Second)
	if r := gc(t, callee); r.Unreported != 1 || r.IntentsRemoved != 0 || r.Lag != time.Second {
		t.Fatalf("a pass whose callback failed: %+v, want the callee kept, 1s past T", r)
	}
	if r := gc(t, callee); r.Unreported != 0 || r.IntentsRemoved != 1 {
		t.Fatalf("the next pass: %+v, want the callee reported and collected", r)
	}
	if st := caller.Stats(); st.Callbacks != 1 || st.SpuriousCallbacks != 0 {
		t.Fatalf("the callee's collection called back %d times (%d spurious), want once", st.Callbacks, st.SpuriousCallbacks)
	}
	c.Advance(callee.Config().KeyRetention + time.Second)
	if r := gc(t, callee); r.KeysExpired != 1 {
		t.Fatalf("the callee's answer did not expire: %+v", r)
	}
	if _, err := caller.CollectIntents(ctx); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	st, err := caller.Intent(ctx, "c1")
	if err != nil || !st.Done || st.Result.Error != "" || string(st.Result.Output) != "42" {
		t.Fatalf("the caller's re-execution: %+v %v", st, err)
	}
	if n := callee.Stats().Executions; n != 1 {
		t.Fatalf("the callee ran %d times", n)
	}
}

// A pass that collects several called instances reports their results to each caller SSF in
// batches of at most 32, and to the callers side by side.
func TestCollectorCallsBackSideBySide(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	t.Cleanup(h.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	callers := map[string]int{"a": 33, "b": 1, "c": 1} // caller SSF -> its calls
	// Each callback request waits until one to each caller is in flight.
	r := faults.NewBarrier(len(callers), 10*time.Second, func(p ssf.FaultPoint) bool { return p.Op == "callback" && !p.After })
	callee := addConfig(t, h, ssf.Config{Name: "callee", Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c, Faults: r, Logger: quiet,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) { return in, nil }})
	for name, calls := range callers {
		// Unfinished callers: each callback creates its entry.
		addConfig(t, h, ssf.Config{Name: name, Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c, Logger: quiet,
			Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
				for i := range calls {
					if _, err := env.SyncInvoke("callee", i); err != nil {
						return nil, err
					}
				}
				return nil, env.Stop(errors.New("not finished yet"))
			}})
		if _, err := h.Invoke(context.Background(), name, "i1", nil); !errors.Is(err, ssf.ErrStopped) {
			t.Fatalf("caller %s: %v, want ErrStopped", name, err)
		}
	}
	c.Advance(bound + time.Second)
	gc(t, callee)
	c.Advance(bound + time.Second)
	if rep := gc(t, callee); rep.IntentsRemoved != 35 || r.GaveUp() {
		t.Fatalf("%+v: the callbacks to the three callers went out one after the other", rep)
	}
	if n := r.Arrived(); n != 4 {
		t.Fatalf("%d callback requests, want 4 (a's 33 results in two)", n)
	}
	for name, calls := range callers {
		rt, _ := h.Runtime(name)
		if st := rt.Stats(); st.Callbacks != int64(calls) || st.SpuriousCallbacks != 0 {
			t.Fatalf("caller %s got %d callbacks (%d spurious), want %d", name, st.Callbacks, st.SpuriousCallbacks, calls)
		}
	}
}

// A caller instance id reused after it was forgotten is a new incarnation, whose calls name new
// callee instances: a callee that still remembers the old call (it keeps answers longer) must
// not answer the new call with the old result.
func TestReusedCallerIDCallsANewCallee(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	t.Cleanup(h.Close)
	callee := addConfig(t, h, ssf.Config{Name: "callee", Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c,
		KeyRetention: 10 * time.Hour, ExpiredKeyRetention: 100 * time.Hour,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			var runs int
			if _, err := env.ReadInto("t", "runs", &runs); err != nil {
				return nil, err
			}
			return in, env.Write("t", "runs", runs+1)
		}})
	caller := addConfig(t, h, ssf.Config{Name: "caller", Store: newTable(), Lifetime: lifetime, GCBound: bound, Clock: c,
		KeyRetention: time.Hour, ExpiredKeyRetention: time.Hour,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) { return env.SyncInvoke("callee", in) }})
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "caller", "c1", 1); err != nil {
		t.Fatal(err)
	}
	for range 2 { // stamp, then collect
		c.Advance(bound + time.Second)
		gc(t, callee)
		gc(t, caller)
	}
	for range 2 { // the caller's answer expires, then its id is forgotten
		c.Advance(time.Hour + time.Second)
		gc(t, caller)
	}
	if st, err := caller.Intent(ctx, "c1"); err != nil || st.Exists {
		t.Fatalf("the caller's id is still known: %+v %v", st, err)
	}
	if _, err := h.Invoke(ctx, "caller", "c1", 1); err != nil {
		t.Fatal(err)
	}
	items, err := callee.Items(ctx)
	if err != nil || string(items["t/runs"]) != "2" {
		t.Fatalf("the callee ran %s times (%v) for two incarnations of the caller, want 2", items["t/runs"], err)
	}
}
