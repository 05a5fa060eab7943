package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

func add(t *testing.T, h *local.Host, name string, n int, fn ssf.Handler) *ssf.Runtime {
	t.Helper()
	rt, err := h.Add(ssf.Config{Name: name, Store: newTable(), Handler: fn, RowCapacity: n, RelaunchDelay: time.Nanosecond})
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
