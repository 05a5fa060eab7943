package ssftemporal

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/temporaltest"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func addFive(ctx workflow.Context) (int, error) {
	var total int
	return total, Call(ctx, "counter", 5, &total)
}

// With the tracing interceptor, the trace of the code that starts a workflow runs through the
// workflow and its activity into the SSF instance's execution and steps.
func TestTraceRunsFromTheClientThroughTheWorkflowIntoTheSSF(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	tracing, err := TracingInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: temporaltest.Temporal.Addr(t), Namespace: temporaltest.Namespace,
		Interceptors: []interceptor.ClientInterceptor{tracing}, Logger: sdklog.NewStructuredLogger(quiet)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := local.NewHost()
	h.Logger = quiet
	t.Cleanup(h.Close)
	if _, err := h.Add(ssf.Config{Name: "counter", Store: testtables.Mem(t, "counter"), Handler: counter, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	queue := serveWorkflows(t, c, h, addFive)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, root := otel.Tracer("test").Start(ctx, "the caller")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, addFive)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	if err := run.Get(ctx, &total); err != nil || total != 5 {
		t.Fatalf("workflow: %d, %v", total, err)
	}
	root.End()
	byName := map[string]sdktrace.ReadOnlySpan{}
	var names []string
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
		names = append(names, s.Name())
	}
	instance, ok := byName["ssf counter"]
	if !ok {
		t.Fatalf("no span of the SSF's execution among %v", names)
	}
	if instance.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("the SSF's execution is in trace %s, the caller's is %s (spans: %v)", instance.SpanContext().TraceID(), root.SpanContext().TraceID(), names)
	}
	parent := instance.Parent().SpanID()
	var parentName string
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == parent {
			parentName = s.Name()
		}
	}
	if parentName != "RunActivity:ssf.counter" {
		t.Errorf("the SSF's execution's parent is %q, want the activity's run (spans: %v)", parentName, names)
	}
	if write, ok := byName["ssf.write"]; !ok || write.Parent().SpanID() != instance.SpanContext().SpanID() {
		t.Errorf("the write step is not the execution's child (spans: %v)", names)
	}
}
