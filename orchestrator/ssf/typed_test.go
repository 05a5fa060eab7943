package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

type acctOp struct {
	Account string `json:"account"`
	Delta   int64  `json:"delta"`
	Set     *int64 `json:"set,omitempty"`
}

// typedAccounts is accounts (tx_test.go) written as a typed handler.
func typedAccounts(env *ssf.Env, op acctOp) (int64, error) {
	if op.Set != nil {
		return 0, env.Write("bal", op.Account, *op.Set)
	}
	var bal int64
	if _, err := env.ReadInto("bal", op.Account, &bal); err != nil {
		return 0, err
	}
	if bal+op.Delta < 0 {
		return 0, env.AbortTx()
	}
	return bal + op.Delta, env.Write("bal", op.Account, bal+op.Delta)
}

// typedTeller is teller (tx_test.go) written as a typed handler with typed calls.
func typedTeller(env *ssf.Env, t transfer) (bool, error) {
	for {
		if err := env.BeginTx(); err != nil {
			return false, err
		}
		_, err := ssf.Call[int64](env, "accounts", map[string]any{"account": t.From, "delta": -t.Amount})
		if err == nil {
			_, err = ssf.Call[int64](env, "accounts", map[string]any{"account": t.To, "delta": t.Amount})
		}
		if err != nil && !errors.Is(err, ssf.ErrTxAborted) {
			return false, err
		}
		committed, err := env.EndTx()
		if err != nil || committed {
			return committed, err
		}
		have, err := ssf.Call[int64](env, "accounts", map[string]any{"account": t.From, "delta": 0})
		if err != nil || have < t.Amount {
			return false, err
		}
	}
}

type point struct{ X, Y int }

// A typed handler's output is what the JSON handler returning the same value records; its input
// is decoded as json.Unmarshal decodes it, into a value or a pointer, or passed through.
func TestTypedHandlerInputAndOutput(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	var gotPtr []*point
	add(t, h, "value", 4, ssf.Typed(func(env *ssf.Env, p point) (int, error) { return p.X + p.Y, nil }))
	add(t, h, "pointer", 4, ssf.Typed(func(env *ssf.Env, p *point) (*point, error) {
		gotPtr = append(gotPtr, p)
		if p == nil {
			return nil, nil // a nil pointer is recorded as null
		}
		return &point{p.Y, p.X}, nil
	}))
	add(t, h, "raw", 4, ssf.Typed(func(env *ssf.Env, in json.RawMessage) (json.RawMessage, error) { return in, nil }))
	add(t, h, "zero", 4, ssf.Typed(func(env *ssf.Env, _ struct{}) (int, error) { return 0, nil }))
	add(t, h, "nothing", 4, ssf.Typed(func(env *ssf.Env, _ any) (any, error) { return nil, nil }))
	add(t, h, "nilslice", 4, ssf.Typed(func(env *ssf.Env, _ any) ([]string, error) { return nil, nil }))
	// The JSON forms of the last three, to compare what is recorded.
	add(t, h, "json_zero", 4, func(env *ssf.Env, _ json.RawMessage) (any, error) { return 0, nil })
	add(t, h, "json_nothing", 4, func(env *ssf.Env, _ json.RawMessage) (any, error) { return nil, nil })
	add(t, h, "json_nilslice", 4, func(env *ssf.Env, _ json.RawMessage) (any, error) { return []string(nil), nil })

	ctx := context.Background()
	for i, c := range []struct {
		ssf   string
		input any
		want  string
	}{
		{"value", point{2, 3}, `5`},
		{"value", nil, `0`},                                    // null leaves a value In zero
		{"value", json.RawMessage(`{"X":1,"Y":1,"Z":7}`), `2`}, // unknown fields are ignored
		{"pointer", point{2, 3}, `{"X":3,"Y":2}`},
		{"pointer", nil, `null`},
		{"raw", json.RawMessage(`{"b": [1, 2]}`), `{"b":[1,2]}`}, // stored compact, as any output
		{"zero", nil, `0`},
		{"json_zero", nil, `0`},
		{"nothing", nil, ``},
		{"json_nothing", nil, ``},
		{"nilslice", nil, `null`},
		{"json_nilslice", nil, `null`},
	} {
		res, err := h.Invoke(ctx, c.ssf, fmt.Sprint("r", i), c.input)
		if err != nil || res.Error != "" || string(res.Output) != c.want {
			t.Errorf("%s(%v): output %q error %q %v, want %q", c.ssf, c.input, res.Output, res.Error, err, c.want)
		}
	}
	if len(gotPtr) != 2 || gotPtr[0] == nil || *gotPtr[0] != (point{2, 3}) || gotPtr[1] != nil {
		t.Fatalf("pointer In: got %v, want a pointer to {2 3}, then nil for null", gotPtr)
	}
}

// Input that does not decode into In is refused before the code runs, with an application
// error naming the SSF and the Go type, recorded once and returned to callers as the JSON form's
// unmarshal failure would be.
func TestTypedHandlerMalformedInput(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	ran := 0
	var seen error
	typed := ssf.Typed(func(env *ssf.Env, op acctOp) (int64, error) { ran++; return 0, nil })
	rt := add(t, h, "typed", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		out, err := typed(env, in)
		seen = err
		return out, err
	})
	add(t, h, "caller", 4, ssf.Typed(func(env *ssf.Env, in json.RawMessage) (string, error) {
		_, err := ssf.Call[int64](env, "typed", in)
		var app *ssf.AppError
		if !errors.As(err, &app) {
			return "", fmt.Errorf("want an *AppError from a callee refusing its input, got %T %v", err, err)
		}
		return app.Message, nil
	}))
	bad := json.RawMessage(`{"account": 5}`)
	jerr := json.Unmarshal(bad, &acctOp{})
	want := "ssf typed: input does not decode into ssf_test.acctOp: " + jerr.Error()

	ctx := context.Background()
	res, err := h.Invoke(ctx, "typed", "bad-1", bad)
	if err != nil || res.Error != want || res.Output != nil {
		t.Fatalf("malformed input: %+v %v, want the recorded error %q", res, err, want)
	}
	if ran != 0 {
		t.Fatalf("the handler ran %d times on input that does not decode", ran)
	}
	var de *ssf.DecodeError
	var ute *json.UnmarshalTypeError
	if !errors.As(seen, &de) || de.SSF != "typed" || de.What != "input" || de.Type != "ssf_test.acctOp" ||
		!errors.Is(seen, ssf.ErrBadInput) || !errors.As(seen, &ute) {
		t.Fatalf("the adapter's error %#v: want a *DecodeError wrapping ErrBadInput and the decoder's error", seen)
	}
	runs := rt.Stats().Executions
	again, err := h.Invoke(ctx, "typed", "bad-1", bad)
	if err != nil || !again.Replayed || again.Error != want || rt.Stats().Executions != runs {
		t.Fatalf("the same request again: %+v %v; want the recorded error, nothing run", again, err)
	}
	if st, err := rt.Intent(ctx, "bad-1"); err != nil || !st.Done || st.Result.Error != want {
		t.Fatalf("intent %+v %v: want done with the error", st, err)
	}
	// Not JSON of the right shape at all: a syntax-level mismatch names the type too.
	if res, err := h.Invoke(ctx, "typed", "bad-2", "a string"); err != nil ||
		!strings.HasPrefix(res.Error, "ssf typed: input does not decode into ssf_test.acctOp: json: cannot unmarshal string") {
		t.Fatalf("a string for a struct: %+v %v", res, err)
	}
	// Through a call, the caller sees the message as an *AppError.
	if res, err := h.Invoke(ctx, "caller", "c1", bad); err != nil || res.Error != "" || string(res.Output) != mustJSON(t, want) {
		t.Fatalf("a caller of the typed SSF: %+v %v, want its AppError %q", res, err, want)
	}
	if ran != 0 {
		t.Fatalf("the handler ran %d times", ran)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Call decodes the callee's output, names the callee and the type when it cannot, passes the
// callee's errors through as SyncInvoke returns them, and leaves the execution usable.
func TestCallDecodesOutput(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	add(t, h, "callee", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		var what string
		_ = json.Unmarshal(in, &what)
		switch what {
		case "text":
			return "ten", nil
		case "point":
			return point{1, 2}, nil
		case "none":
			return nil, nil
		case "null":
			return json.RawMessage("null"), nil
		case "fail":
			return nil, errors.New("no such thing")
		}
		return nil, fmt.Errorf("unknown %q", what)
	})
	var checks []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			checks = append(checks, fmt.Sprintf(format, args...))
		}
	}
	add(t, h, "caller", 4, func(env *ssf.Env, _ json.RawMessage) (any, error) {
		n, err := ssf.Call[int](env, "callee", "text")
		var de *ssf.DecodeError
		var ute *json.UnmarshalTypeError
		check(n == 0 && errors.As(err, &de) && de.SSF == "callee" && de.What == "output" && de.Type == "int" &&
			errors.Is(err, ssf.ErrBadInput) && errors.As(err, &ute) &&
			strings.HasPrefix(err.Error(), "ssf callee: output does not decode into int: json: cannot unmarshal string"),
			"a string for an int: %d %v", n, err)
		p, err := ssf.Call[*point](env, "callee", "point")
		check(err == nil && p != nil && *p == point{1, 2}, "pointer Out: %v %v", p, err)
		v, err := ssf.Call[point](env, "callee", "point")
		check(err == nil && v == point{1, 2}, "value Out: %v %v", v, err)
		raw, err := ssf.Call[json.RawMessage](env, "callee", "point")
		check(err == nil && string(raw) == `{"X":1,"Y":2}`, "json.RawMessage Out: %s %v", raw, err)
		none, err := ssf.Call[*point](env, "callee", "none")
		check(err == nil && none == nil, "no output: %v %v", none, err)
		zero, err := ssf.Call[point](env, "callee", "null")
		check(err == nil && zero == point{}, "null output: %v %v", zero, err)
		// An application error is SyncInvoke's, unchanged.
		_, typedErr := ssf.Call[point](env, "callee", "fail")
		_, jsonErr := env.SyncInvoke("callee", "fail")
		var a1, a2 *ssf.AppError
		check(errors.As(typedErr, &a1) && errors.As(jsonErr, &a2) && *a1 == *a2 && reflect.TypeOf(typedErr) == reflect.TypeOf(jsonErr),
			"callee's error: typed %#v, JSON %#v", typedErr, jsonErr)
		// A decode failure did not poison the execution: it goes on and finishes.
		return "finished", env.Write("t", "k", 1)
	})
	res, err := h.Invoke(context.Background(), "caller", "r1", nil)
	if err != nil || res.Error != "" || string(res.Output) != `"finished"` {
		t.Fatalf("caller: %+v %v", res, err)
	}
	if len(checks) > 0 {
		t.Fatal(strings.Join(checks, "\n"))
	}
}

// Inside a transaction, Call returns what SyncInvoke returns when a participant aborts: an
// error wrapping ErrTxAborted, the same message, and the transaction aborts the same way.
func TestCallPassesTxAbortThrough(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]error{}
	caller := func(form string, call func(env *ssf.Env) error) ssf.Handler {
		return func(env *ssf.Env, _ json.RawMessage) (any, error) {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			err := call(env)
			mu.Lock()
			seen[form] = err
			mu.Unlock()
			committed, err := env.EndTx()
			return committed, err
		}
	}
	broke := map[string]any{"account": "a", "delta": -500}
	results := map[string]ssf.Result{}
	for form, fn := range map[string]ssf.Handler{
		"json": caller("json", func(env *ssf.Env) error { _, err := env.SyncInvoke("accounts", broke); return err }),
		"typed": caller("typed", func(env *ssf.Env) error {
			n, err := ssf.Call[int64](env, "accounts", broke)
			if n != 0 {
				return fmt.Errorf("Out %d with an abort", n)
			}
			return err
		}),
	} {
		h := local.NewHost()
		defer h.Close()
		accts := ssf.Handler(accounts)
		if form == "typed" {
			accts = ssf.Typed(typedAccounts)
		}
		add(t, h, "accounts", 4, accts)
		add(t, h, "teller", 4, fn)
		if _, err := h.Invoke(context.Background(), "accounts", "open-a", map[string]any{"account": "a", "set": 100}); err != nil {
			t.Fatal(err)
		}
		res, err := h.Invoke(context.Background(), "teller", "t1", nil)
		if err != nil {
			t.Fatal(err)
		}
		results[form] = res
	}
	if !errors.Is(seen["typed"], ssf.ErrTxAborted) || seen["typed"].Error() != seen["json"].Error() ||
		reflect.TypeOf(seen["typed"]) != reflect.TypeOf(seen["json"]) {
		t.Fatalf("a participant's abort: typed %#v, JSON %#v", seen["typed"], seen["json"])
	}
	if results["typed"].Error != results["json"].Error || string(results["typed"].Output) != string(results["json"].Output) ||
		string(results["typed"].Output) != "false" {
		t.Fatalf("the transaction's outcome: typed %+v, JSON %+v; want both false", results["typed"], results["json"])
	}
}

// traceInjector records every injection point it passes while enabled, and crashes the
// crashAt-th once.
type traceInjector struct {
	mu      sync.Mutex
	enabled bool
	crashAt int
	points  []ssf.FaultPoint
	crashed []ssf.FaultPoint
}

func (in *traceInjector) Inject(_ context.Context, p ssf.FaultPoint) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.enabled {
		return nil
	}
	in.points = append(in.points, p)
	if len(in.points) != in.crashAt {
		return nil
	}
	in.crashed = append(in.crashed, p)
	return ssf.ErrCrashed
}

func (in *traceInjector) set(on bool) {
	in.mu.Lock()
	in.enabled = on
	in.mu.Unlock()
}

var (
	uuidPattern  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	shardPattern = regexp.MustCompile(`^([pfce])\|\d+$`)
)

// normalized renders a trace with the random callee ids numbered by first appearance and the
// index shards they hash to dropped, so that two runs of the same steps render the same.
func normalized(points []ssf.FaultPoint) []string {
	ids := map[string]string{}
	name := func(s string) string {
		return uuidPattern.ReplaceAllStringFunc(s, func(id string) string {
			if _, ok := ids[id]; !ok {
				ids[id] = fmt.Sprintf("<id%d>", len(ids)+1)
			}
			return ids[id]
		})
	}
	out := make([]string, len(points))
	for i, p := range points {
		part := shardPattern.ReplaceAllString(p.Key.Partition, "$1|*")
		out[i] = fmt.Sprintf("%s %s %s %s/%s after=%v", p.SSF, name(p.Instance), p.Op, name(part), name(p.Key.Sort), p.After)
	}
	return out
}

// firstDifference returns the first index where a and b differ, or -1.
func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(trace []string, i int) string {
	if i < len(trace) {
		return trace[i]
	}
	return "(end of trace)"
}

type bankRun struct {
	result ssf.Result
	state  map[string]map[string]string
	trace  []string
}

// runBank opens accounts a and b with 100 each, then runs one transfer with the injector on and
// lets the intent collectors finish it.
func runBank(t *testing.T, handlers map[string]ssf.Handler, amount int64, inj *traceInjector) bankRun {
	t.Helper()
	w := &sagaWorld{host: local.NewHost(), rts: map[string]*ssf.Runtime{}, clock: testclock.New(time.Unix(1e9, 0))}
	w.host.Sequential = true
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.host.Logger = quiet
	t.Cleanup(w.host.Close)
	for name, h := range handlers {
		rt, err := w.host.Add(ssf.Config{Name: name, Store: newTable(), Handler: h, RowCapacity: 2,
			RelaunchDelay: time.Nanosecond, Clock: w.clock, Faults: inj, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	for _, a := range []string{"a", "b"} {
		w.invoke(t, "accounts", "open-"+a, map[string]any{"account": a, "set": 100})
	}
	inj.set(true)
	w.submit(t, "teller", "t1", transfer{"a", "b", amount})
	w.drain(t)
	inj.set(false)
	noLocks(t, w.rts)
	return bankRun{result: w.result(t, "teller", "t1"), state: w.state(t), trace: normalized(inj.points)}
}

// A typed handler making typed calls runs the same steps as its JSON form, and replays the same
// way: crashed once at each injection point of a clean run, in turn, it ends with the JSON
// form's result and state, having crashed at the same point.
func TestTypedReplaysLikeJSON(t *testing.T) {
	forms := map[string]map[string]ssf.Handler{
		"json":  {"accounts": accounts, "teller": teller},
		"typed": {"accounts": ssf.Typed(typedAccounts), "teller": ssf.Typed(typedTeller)},
	}
	for _, sc := range []struct {
		name   string
		amount int64
		output string
		state  map[string]string
	}{
		{"commit", 30, "true", map[string]string{"bal/a": "70", "bal/b": "130"}},
		{"abort", 500, "false", map[string]string{"bal/a": "100", "bal/b": "100"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			clean := map[string]bankRun{}
			for form, hs := range forms {
				clean[form] = runBank(t, hs, sc.amount, &traceInjector{})
			}
			js, ty := clean["json"], clean["typed"]
			if string(ty.result.Output) != sc.output || ty.result.Error != "" || !reflect.DeepEqual(ty.state["accounts"], sc.state) {
				t.Fatalf("typed clean run: %+v %v, want %s and %v", ty.result, ty.state, sc.output, sc.state)
			}
			if !reflect.DeepEqual(ty.result, js.result) || !reflect.DeepEqual(ty.state, js.state) {
				t.Fatalf("clean runs differ: typed %+v %v, JSON %+v %v", ty.result, ty.state, js.result, js.state)
			}
			if i := firstDifference(ty.trace, js.trace); i >= 0 {
				t.Fatalf("the typed form's steps differ from the JSON form's at injection point %d (of %d typed, %d JSON):\ntyped: %s\nJSON:  %s",
					i+1, len(ty.trace), len(js.trace), at(ty.trace, i), at(js.trace, i))
			}
			points := len(js.trace)
			if points < 50 {
				t.Fatalf("only %d injection points", points)
			}
			for k := 1; k <= points; k++ {
				got := map[string]bankRun{}
				crashes := map[string][]string{}
				for form, hs := range forms {
					inj := &traceInjector{crashAt: k}
					got[form] = runBank(t, hs, sc.amount, inj)
					crashes[form] = normalized(inj.crashed)
				}
				if len(crashes["typed"]) != 1 || !reflect.DeepEqual(crashes["typed"], crashes["json"]) {
					t.Fatalf("crash %d: typed crashed at %v, JSON at %v", k, crashes["typed"], crashes["json"])
				}
				if !reflect.DeepEqual(got["typed"].result, js.result) || !reflect.DeepEqual(got["typed"].state, js.state) ||
					!reflect.DeepEqual(got["json"].result, js.result) || !reflect.DeepEqual(got["json"].state, js.state) {
					t.Fatalf("crash %d at %v: typed %+v %v, JSON %+v %v; want the clean run's %+v %v", k, crashes["typed"],
						got["typed"].result, got["typed"].state, got["json"].result, got["json"].state, js.result, js.state)
				}
			}
			t.Logf("%d injection points: the typed form crashed and replayed like the JSON form at each", points)
		})
	}
}
