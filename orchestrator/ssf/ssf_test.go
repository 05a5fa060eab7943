package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func newTable() *store.Table {
	return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://test")
}

// stepByStep hides tbl's all-or-nothing batches (store.AtomicBatcher) from the runtime, so that
// a transaction end writes each commit in a request of its own, as on the emulators.
func stepByStep(tbl *store.Table) *store.Table {
	return store.NewTable(struct{ store.Driver }{tbl.Driver()}, tbl.Name())
}

func add(t *testing.T, h *local.Host, name string, n int, fn ssf.Handler) *ssf.Runtime {
	t.Helper()
	return addConfig(t, h, ssf.Config{Name: name, Store: newTable(), Handler: fn, RowCapacity: n, RelaunchDelay: time.Nanosecond})
}

func addConfig(t *testing.T, h *local.Host, cfg ssf.Config) *ssf.Runtime {
	t.Helper()
	rt, err := h.Add(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestReadWriteCondWriteAcrossRows(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	add(t, h, "counter", 2, func(env *ssf.Env, in json.RawMessage) (any, error) {
		var n int
		if _, err := env.ReadInto("c", "x", &n); err != nil {
			return nil, err
		}
		if err := env.Write("c", "x", n+1); err != nil {
			return nil, err
		}
		ok, err := env.CondWrite("c", "x", n+10, store.MustParseCond("$ == "+fmt.Sprint(n+1)))
		if err != nil {
			return nil, err
		}
		bad, err := env.CondWrite("c", "x", -1, store.MustParseCond("$ == -5"))
		if err != nil {
			return nil, err
		}
		return []any{n, ok, bad}, nil
	})
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		res, err := h.Invoke(ctx, "counter", fmt.Sprintf("req-%d", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`[%d,true,false]`, i*10)
		if string(res.Output) != want {
			t.Fatalf("request %d: got %s want %s", i, res.Output, want)
		}
		// A duplicate request returns the recorded result and changes nothing.
		again, err := h.Invoke(ctx, "counter", fmt.Sprintf("req-%d", i), nil)
		if err != nil || string(again.Output) != want {
			t.Fatalf("duplicate request %d: %s %v", i, again.Output, err)
		}
	}
}

func TestNestedSyncAsyncInvoke(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	add(t, h, "front", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		out, err := env.SyncInvoke("mid", 5)
		if err != nil {
			return nil, err
		}
		if err := env.AsyncInvoke("leaf", "audit"); err != nil {
			return nil, err
		}
		return out, nil
	})
	add(t, h, "mid", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		var n int
		_ = json.Unmarshal(in, &n)
		out, err := env.SyncInvoke("leaf", n*2)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(out), nil
	})
	add(t, h, "leaf", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.Write("t", "last", in); err != nil {
			return nil, err
		}
		return in, nil
	})
	res, err := h.Invoke(context.Background(), "front", "r1", nil)
	if err != nil || string(res.Output) != "10" {
		t.Fatalf("got %s, %v", res.Output, err)
	}
	h.Wait()
}

func TestErrorsAreClear(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	add(t, h, "big", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		err := env.Write("t", "k", strings.Repeat("x", memstore.DefaultMaxRowBytes))
		if !errors.Is(err, ssf.ErrValueTooLarge) {
			return nil, fmt.Errorf("want ErrValueTooLarge, got %v", err)
		}
		if err := env.Write("bad-name", "k", 1); !errors.Is(err, ssf.ErrBadInput) {
			return nil, fmt.Errorf("want ErrBadInput, got %v", err)
		}
		_, err = env.SyncInvoke("nobody", nil)
		return nil, err
	})
	_, err := h.Invoke(context.Background(), "big", "r1", nil)
	var ee *ssf.ExecutionError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), `no SSF named "nobody"`) {
		t.Fatalf("want an abandoned execution naming the missing SSF, got %v", err)
	}
	if _, err := h.Invoke(context.Background(), "big", "", nil); !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("empty request id: %v", err)
	}
	// The oversized write left nothing behind.
	rt, _ := h.Runtime("big")
	if items, err := rt.Items(context.Background()); err != nil || len(items) != 0 {
		t.Fatalf("an oversized value was written half-way: %v %v", items, err)
	}
	// Malformed input is refused before an intent exists, so nothing re-runs it.
	_, err = rt.Handle(context.Background(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: "bad-json", Input: json.RawMessage(`{"amount": `)})
	if !errors.Is(err, ssf.ErrBadInput) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("malformed input: %v", err)
	}
	if st, err := rt.Intent(context.Background(), "bad-json"); err != nil || st.Exists {
		t.Fatalf("malformed input registered an intent: %+v %v", st, err)
	}
	if n, err := rt.Pending(context.Background()); err != nil || n != 1 { // only r1, abandoned above
		t.Fatalf("pending intents: %d %v", n, err)
	}
}

// What would fail the same way on every execution is refused before any effect (an input or
// a key over the portable limits) or recorded as the instance's failed result (an output that
// cannot be stored), never treated as a crash to run again.
func TestLimitsFailOnceAndTheSameOnEveryStore(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	ctx := context.Background()
	rt := add(t, h, "limits", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		var size int
		if err := json.Unmarshal(in, &size); err != nil {
			return nil, err
		}
		if err := env.Write("t", strings.Repeat("k", ssf.MaxItemKeyBytes), 1); !errors.Is(err, ssf.ErrBadInput) {
			return nil, fmt.Errorf("a key over MaxItemKeyBytes: %v, want ErrBadInput", err)
		}
		if err := env.AsyncInvoke("limits", strings.Repeat("x", ssf.MaxInputBytes)); !errors.Is(err, ssf.ErrInputTooLarge) {
			return nil, fmt.Errorf("a call with an input over MaxInputBytes: %v, want ErrInputTooLarge", err)
		}
		return strings.Repeat("y", size), nil
	})
	res, err := h.Invoke(ctx, "limits", "big-output", json.RawMessage(fmt.Sprint(store.PortableMaxRowBytes)))
	if err != nil || !strings.Contains(res.Error, "does not fit the intent row") {
		t.Fatalf("an output too large to store: %v, %+v; want a recorded failure", err, res)
	}
	runs := rt.Stats().Executions
	if again, err := h.Invoke(ctx, "limits", "big-output", json.RawMessage(fmt.Sprint(store.PortableMaxRowBytes))); err != nil || again.Error != res.Error || !again.Replayed {
		t.Fatalf("asked again: %+v %v, want the recorded failure", again, err)
	}
	if res, err := h.Invoke(ctx, "limits", "small", json.RawMessage(`3`)); err != nil || string(res.Output) != `"yyy"` {
		t.Fatalf("a small output: %+v %v", res, err)
	}
	huge := json.RawMessage(`"` + strings.Repeat("z", ssf.MaxInputBytes) + `"`)
	if _, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: "huge-input", Input: huge}); !errors.Is(err, ssf.ErrInputTooLarge) || !errors.Is(err, ssf.ErrBadInput) {
		t.Fatalf("an input over MaxInputBytes: %v, want ErrInputTooLarge", err)
	}
	if st, err := rt.Intent(ctx, "huge-input"); err != nil || st.Exists {
		t.Fatalf("an oversized input left an intent: %+v %v", st, err)
	}
	if got := rt.Stats().Executions; got != runs+1 {
		t.Fatalf("%d executions, want %d", got, runs+1)
	}
}

// Two SSFs on one table would answer each other's keys and see each other's items: the second
// is refused when a host opens it, and the owner can open its table again.
func TestTwoSSFsOnOneTableAreRefused(t *testing.T) {
	tbl := newTable()
	echo := func(env *ssf.Env, in json.RawMessage) (any, error) { return in, nil }
	h := local.NewHost()
	defer h.Close()
	if _, err := h.Add(ssf.Config{Name: "first", Store: tbl, Handler: echo}); err != nil {
		t.Fatal(err)
	}
	_, err := h.Add(ssf.Config{Name: "second", Store: tbl, Handler: echo})
	if !errors.Is(err, ssf.ErrTableOwned) || !errors.Is(err, ssf.ErrBadInput) || !strings.Contains(err.Error(), "belongs to SSF first") {
		t.Fatalf("a second SSF on the first's table: %v, want ErrTableOwned naming the owner", err)
	}
	again := local.NewHost()
	defer again.Close()
	if _, err := again.Add(ssf.Config{Name: "first", Store: tbl, Handler: echo}); err != nil {
		t.Fatalf("the owner reopening its table: %v", err)
	}
}

// getCounter counts a table's Gets.
type getCounter struct {
	store.Driver
	gets atomic.Int64
}

func (c *getCounter) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	c.gets.Add(1)
	return c.Driver.Get(ctx, key)
}

// recordingTransport delivers in-process, keeping the calls it delivered.
type recordingTransport struct {
	mu    sync.Mutex
	rts   map[string]*ssf.Runtime
	calls []ssf.Request
}

func (r *recordingTransport) Call(ctx context.Context, name string, req ssf.Request) (ssf.Result, error) {
	r.mu.Lock()
	r.calls = append(r.calls, req)
	rt := r.rts[name]
	r.mu.Unlock()
	return rt.Handle(ctx, req)
}

func (r *recordingTransport) Spawn(ctx context.Context, name string, req ssf.Request) error {
	_, err := r.Call(ctx, name, req)
	return err
}

// A call whose caller just created its invoke-log entry is new: the callee creates its intent
// without reading it first. The same request delivered again (a transport's redelivery) meets
// the intent in the creation's answer and returns the recorded result without running again.
func TestFreshCallCreatesWithoutARead(t *testing.T) {
	ctx := context.Background()
	tr := &recordingTransport{rts: map[string]*ssf.Runtime{}}
	var runs atomic.Int64
	calleeStore := &getCounter{Driver: memstore.New(memstore.DefaultMaxRowBytes)}
	for name, c := range map[string]struct {
		tbl *store.Table
		fn  ssf.Handler
	}{
		"callee": {store.NewTable(calleeStore, "mem://callee"), func(env *ssf.Env, in json.RawMessage) (any, error) {
			runs.Add(1)
			var n int
			if _, err := env.ReadInto("t", "n", &n); err != nil {
				return nil, err
			}
			return json.RawMessage(in), env.Write("t", "n", n+1)
		}},
		"caller": {newTable(), func(env *ssf.Env, in json.RawMessage) (any, error) { return env.SyncInvoke("callee", 7) }},
	} {
		rt, err := ssf.New(ssf.Config{Name: name, Store: c.tbl, Handler: c.fn, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		tr.rts[name] = rt
	}
	res, err := tr.rts["caller"].Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: "c1"})
	if err != nil || string(res.Output) != "7" {
		t.Fatalf("call: %+v %v", res, err)
	}
	var call ssf.Request
	for _, c := range tr.calls {
		if c.Caller != nil && c.Kind == ssf.KindInvoke {
			call = c
		}
	}
	if !call.Fresh {
		t.Fatalf("the first call was not marked fresh: %+v", call)
	}
	if n := calleeStore.gets.Load(); n != 0 {
		t.Errorf("the callee read %d rows for a fresh call, want none", n)
	}
	// A delivery of the same fresh call again runs the handler up to its first write, which
	// finds the intent written and starts over as a replay of the finished instance.
	again, err := tr.rts["callee"].Handle(ctx, call)
	if err != nil || string(again.Output) != "7" || !again.Replayed {
		t.Fatalf("the fresh call delivered again: %+v %v; want the recorded 7, replayed", again, err)
	}
	items, err := tr.rts["callee"].Items(ctx)
	if err != nil || string(items["t/n"]) != "1" {
		t.Fatalf("after the call delivered twice (%d runs of the handler) the counter is %s (%v), want 1", runs.Load(), items["t/n"], err)
	}
}
