package ssftemporal

import (
	"context"
	"encoding/json"
	"path/filepath"
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
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
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
	sink, err := sqlitesink.Open(context.Background(), filepath.Join(t.TempDir(), "provenance.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	rt, err := h.Add(ssf.Config{Name: "counter", Store: testtables.Mem(t, "counter"), Handler: counter, Logger: quiet,
		Provenance: provenance.CaptureMetadata, ProvenanceSink: sink})
	if err != nil {
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

	// The instance's provenance names the workflow run it ran for and the trace it ran in.
	list, err := rt.ListInstances(ctx, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("instances: %+v, %v", list, err)
	}
	record, found, err := rt.Steps(ctx, list[0].ID)
	if err != nil || !found {
		t.Fatalf("steps: %v %v", found, err)
	}
	var holder struct {
		WF  string `json:"wf"`
		Run string `json:"run"`
	}
	if err := json.Unmarshal([]byte(record.Invocation.Holder), &holder); err != nil || holder.WF != run.GetID() || holder.Run != run.GetRunID() {
		t.Errorf("the record's holder %q does not name workflow %s run %s", record.Invocation.Holder, run.GetID(), run.GetRunID())
	}
	if record.Invocation.TraceID != root.SpanContext().TraceID().String() {
		t.Errorf("the record names trace %q, the caller's is %s", record.Invocation.TraceID, root.SpanContext().TraceID())
	}
}
