package telemetry_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/telemetry"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// receiver is an OTLP/HTTP trace endpoint on 127.0.0.1: it decodes what exporters POST to
// /v1/traces (ExportTraceServiceRequest, protobuf) as a collector does.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	sums     map[string]int64 // counter name and ssf.name attribute -> the last value exported
}

func startReceiver(t *testing.T) (*receiver, string) {
	rc := &receiver{sums: map[string]int64{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP export", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/v1/metrics" {
			rc.metrics(w, body)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					rc.services = append(rc.services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// metrics keeps the last value of each sum and gauge, and each histogram's count, under the
// metric's name followed by its data point's attribute values in key order.
func (rc *receiver) metrics(w http.ResponseWriter, body []byte) {
	var req collectormetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := func(name string, attrs []*commonpb.KeyValue) string {
		sorted := slices.Clone(attrs)
		slices.SortFunc(sorted, func(a, b *commonpb.KeyValue) int { return strings.Compare(a.Key, b.Key) })
		for _, a := range sorted {
			name += " " + a.GetValue().GetStringValue()
		}
		return name
	}
	rc.mu.Lock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, p := range append(m.GetSum().GetDataPoints(), m.GetGauge().GetDataPoints()...) {
					rc.sums[key(m.Name, p.Attributes)] = p.GetAsInt()
				}
				for _, p := range m.GetHistogram().GetDataPoints() {
					rc.sums[key(m.Name, p.Attributes)] = int64(p.GetCount())
				}
			}
		}
	}
	rc.mu.Unlock()
	b, _ := proto.Marshal(&collectormetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// attrs are a span's attributes as Go values (strings, int64s, bools).
func attrs(s *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, a := range s.Attributes {
		v := a.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[a.Key] = v.GetStringValue()
		case v.GetBoolValue():
			m[a.Key] = true
		default:
			m[a.Key] = v.GetIntValue()
		}
	}
	return m
}

// stock takes one item from its count (one before the first take), if there is one left.
func stock(env *ssf.Env, item string) (bool, error) {
	n, cur := int64(1), any(nil)
	found, err := env.ReadInto("stock", item, &n)
	if err != nil || n == 0 {
		return false, err
	}
	if found {
		cur = n
	}
	return env.CondWrite("stock", item, n-1, store.Equal(nil, cur))
}

// order records an order once stock has it.
func order(env *ssf.Env, item string) (bool, error) {
	out, err := env.SyncInvoke("stock", item)
	if err != nil {
		return false, err
	}
	if string(out) == "true" {
		return true, env.Write("orders", env.InstanceID(), item)
	}
	return false, nil
}

// With OTEL_EXPORTER_OTLP_ENDPOINT naming a receiver, an SSF request's executions and steps
// reach it as one trace (a span per execution, a child per step, the callee's execution a child
// of the caller's invoke step), and the runtime's counters as metrics.
func TestRuntimeTelemetryReachesAnOTLPReceiver(t *testing.T) {
	rc, url := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_SERVICE_NAME", "")
	ctx := context.Background()
	shutdown, err := telemetry.Start(ctx, "ssfkit-test")
	if err != nil {
		t.Fatal(err)
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	host := local.NewHost()
	defer host.Close()
	clock := testclock.New(time.Unix(1e9, 0))
	for name, h := range map[string]ssf.Handler{"stock": ssf.Typed(stock), "order": ssf.Typed(order)} {
		tbl, err := store.Open(ctx, "mem://telemetry-"+name)
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Close()
		if _, err := host.Add(ssf.Config{Name: name, Store: tbl, Handler: h, Clock: clock}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := host.Invoke(ctx, "order", "order-1", "apple")
	if err != nil || string(res.Output) != "true" {
		t.Fatalf("order: %+v %v", res, err)
	}
	orderRuntime, _ := host.Runtime("order")
	if _, err := orderRuntime.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := orderRuntime.CollectIntents(ctx); err != nil {
		t.Fatal(err)
	}
	// The callee's garbage collector calls its result back to the order when it collects it.
	stockRuntime, _ := host.Runtime("stock")
	for range 2 { // stamp, then collect
		clock.Advance(stockRuntime.Config().GCBound + time.Second)
		if _, err := stockRuntime.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Flush exports now, as the Lambda host does after each invocation: everything is there
	// before the providers shut down.
	if err := telemetry.Flush(ctx); err != nil {
		t.Fatalf("flushing the exporters: %v", err)
	}
	rc.mu.Lock()
	flushed := len(rc.spans)
	rc.mu.Unlock()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutting the exporters down: %v", err)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if flushed != len(rc.spans) || flushed == 0 {
		t.Errorf("%d spans exported by Flush, %d in all", flushed, len(rc.spans))
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range rc.spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	if len(rc.services) == 0 || rc.services[0] != "ssfkit-test" {
		t.Errorf("service.name %v, want ssfkit-test", rc.services)
	}
	one := func(name string) *tracepb.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			var names []string
			for _, s := range rc.spans {
				names = append(names, s.Name)
			}
			t.Fatalf("%d spans named %q among %v", len(byName[name]), name, names)
		}
		return byName[name][0]
	}
	orderSpan, stockSpan, invoke := one("ssf order"), one("ssf stock"), one("ssf.invoke")
	read, cond, write := one("ssf.read"), one("ssf.condwrite"), one("ssf.write")
	id := hex.EncodeToString
	for _, s := range rc.spans {
		if id(s.TraceId) != id(orderSpan.TraceId) {
			t.Errorf("span %s is in another trace", s.Name)
		}
	}
	for _, c := range []struct {
		child, parent *tracepb.Span
	}{{invoke, orderSpan}, {stockSpan, invoke}, {read, stockSpan}, {cond, stockSpan}, {write, orderSpan}} {
		if id(c.child.ParentSpanId) != id(c.parent.SpanId) {
			t.Errorf("%s's parent is %s, want %s", c.child.Name, id(c.child.ParentSpanId), c.parent.Name)
		}
	}
	// The steps' store requests are their children.
	storeUnder := map[string]int{}
	for _, s := range rc.spans {
		if strings.HasPrefix(s.Name, "store.") {
			for _, step := range []*tracepb.Span{read, cond, write} {
				if id(s.ParentSpanId) == id(step.SpanId) {
					storeUnder[step.Name]++
				}
			}
		}
	}
	if storeUnder["ssf.read"] == 0 || storeUnder["ssf.condwrite"] == 0 || storeUnder["ssf.write"] == 0 {
		t.Errorf("store requests under the steps: %v", storeUnder)
	}
	if a := attrs(orderSpan); a["ssf.instance.id"] != "order-1" || a["ssf.name"] != "order" || a["ssf.outcome"] != "ok" {
		t.Errorf("the order's span: %v", a)
	}
	if a := attrs(stockSpan); a["ssf.caller.name"] != "order" || a["ssf.caller.instance.id"] != "order-1" {
		t.Errorf("the callee's span: %v", a)
	}
	if a := attrs(read); a["ssf.item.table"] != "stock" || a["ssf.item.key"] != "apple" || a["ssf.step"] != int64(0) {
		t.Errorf("the read's span: %v", a)
	}
	if a := attrs(write); a["ssf.item.table"] != "orders" || a["ssf.step"] != int64(1) {
		t.Errorf("the write's span: %v", a)
	}
	for name, want := range map[string]int64{
		"ssf.executions order": 1, "ssf.executions stock": 1, "ssf.steps order": 2, "ssf.steps stock": 2,
		"ssf.callbacks order": 1, "ssf.abandoned order": 0,
		"ssf.collector.passes gc order ok": 1, "ssf.collector.passes ic order ok": 1, "ssf.collector.duration gc order": 1,
		"ssf.gc.items order": 1, "ssf.ic.pending order": 0, "ssf.gc.intents_removed order": 0, "ssf.gc.intents_removed stock": 1,
	} {
		if got := rc.sums[name]; got != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, got, want, rc.sums)
		}
	}
}

// A setting ssfkit cannot honour is refused, naming it; with no endpoint nothing is exported
// and nothing fails.
func TestStartReadsTheStandardEnvironment(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, ""},
		{map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, "OTEL_METRICS_EXPORTER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json"},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "zipkin"}, ""},
	} {
		for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			t.Setenv(k, c.env[k])
		}
		shutdown, err := telemetry.Start(context.Background(), "ssfkit-test")
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
		case err == nil:
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("%v: shutdown: %v", c.env, err)
			}
		}
	}
}
