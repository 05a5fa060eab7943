package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// crashAfterFirstWrite kills the execution right after its first item write took effect.
type crashAfterFirstWrite struct {
	mu      sync.Mutex
	crashed bool
}

func (c *crashAfterFirstWrite) Inject(_ context.Context, p ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.After && p.Op != "get" && p.Op != "scan" && strings.HasPrefix(p.Key.Partition, "d|") && !c.crashed {
		c.crashed = true
		return errors.New("injected crash")
	}
	return nil
}

// recordSpans installs a tracer provider that records every span, until t ends.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	return rec
}

// Every execution of an instance is a span, a child of the step that invoked it (the request's
// traceparent, kept in the intent, so a relaunch without it is placed the same): an abandoned
// execution shows as such, and its re-execution as a re-execution.
func TestExecutionsAreSpansUnderTheirInvoker(t *testing.T) {
	rec := recordSpans(t)
	h := local.NewHost()
	defer h.Close()
	rt, err := h.Add(ssf.Config{Name: "w", Store: newTable(), Faults: &crashAfterFirstWrite{}, Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
		if _, err := env.Read("t", "k"); err != nil {
			return nil, err
		}
		return nil, env.Write("t", "k", "v")
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := rt.Handle(ctx, ssf.Request{InstanceID: "w-1", Input: json.RawMessage(`1`), Trace: parent}); err == nil {
		t.Fatal("the first execution did not crash")
	}
	if res, err := rt.Handle(ctx, ssf.Request{InstanceID: "w-1", Input: json.RawMessage(`1`)}); err != nil || res.Error != "" {
		t.Fatalf("the re-execution: %+v %v", res, err)
	}
	var execs []sdktrace.ReadOnlySpan
	steps := map[string]int{}
	for _, s := range rec.Ended() {
		if s.Name() == "ssf w" {
			execs = append(execs, s)
		} else {
			steps[s.Name()]++
		}
	}
	if len(execs) != 2 {
		t.Fatalf("%d execution spans, want 2", len(execs))
	}
	for i, want := range []struct {
		outcome string
		reexec  bool
		status  codes.Code
	}{{"abandoned", false, codes.Error}, {"ok", true, codes.Unset}} {
		s := execs[i]
		got := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			got[a.Key] = a.Value
		}
		if got["ssf.outcome"].AsString() != want.outcome || got["ssf.reexecution"].AsBool() != want.reexec || s.Status().Code != want.status {
			t.Errorf("execution %d: %v, status %v", i+1, got, s.Status())
		}
		if s.Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || s.Parent().SpanID().String() != "b7ad6b7169203331" {
			t.Errorf("execution %d's parent is %v, want the invoking step", i+1, s.Parent())
		}
	}
	// Two reads and two writes, the first write failed by the crash.
	if steps["ssf.read"] != 2 || steps["ssf.write"] != 2 {
		t.Errorf("step spans %v", steps)
	}
}

// A request's traceparent comes from outside: one that is not W3C's is ignored (the execution is
// a root), and never fills the intent row, however long.
func TestMalformedTraceparentIsIgnored(t *testing.T) {
	rec := recordSpans(t)
	h := local.NewHost()
	defer h.Close()
	rt, err := h.Add(ssf.Config{Name: "m", Store: newTable(), Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
		return nil, env.Write("t", "k", "v")
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tp := range []string{"not a traceparent", "00-" + strings.Repeat("ab", store.PortableMaxRowBytes) + "-01"} {
		res, err := rt.Handle(context.Background(), ssf.Request{InstanceID: fmt.Sprintf("m-%d", i), Input: json.RawMessage(`1`), Trace: tp})
		if err != nil || res.Error != "" {
			t.Fatalf("traceparent %.20q: %+v %v", tp, res, err)
		}
	}
	for _, s := range rec.Ended() {
		if s.Name() == "ssf m" && s.Parent().IsValid() {
			t.Errorf("an execution took a malformed traceparent's parent %v", s.Parent())
		}
	}
}
