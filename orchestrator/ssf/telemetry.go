package ssf

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracer is OpenTelemetry's global tracer provider's, which internal/telemetry installs from
// the standard OTEL_* environment (looked up on use: a provider installed later, or replaced,
// is the one used). Without one nothing records, and a step does not even start a span.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := cachedTracer.Load(); c != nil && sameProvider(c.provider, tp) {
		return c.tracer
	}
	c := &providerTracer{provider: tp, tracer: tp.Tracer("github.com/ssfkit/ssfkit/orchestrator/ssf")}
	cachedTracer.Store(c)
	return c.tracer
}

// cachedTracer saves the provider's lookup (a lock and a map) on every execution and step.
var cachedTracer atomic.Pointer[providerTracer]

type providerTracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
}

// sameProvider compares two providers; one whose type cannot be compared never matches.
func sameProvider(a, b trace.TracerProvider) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// traceContext carries a span's identity across an invocation in W3C form (traceparent), as
// the Request's Trace and the intent's, so every execution of an instance, the first or a
// relaunch by the intent collector on another machine, is a child of the step that invoked it.
var traceContext = propagation.TraceContext{}

// traceparent is the W3C traceparent of the span in ctx ("" when none records).
func traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// traceID is the id of the sampled trace ctx is in, or "".
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}

// validTraceparent returns tp as W3C traceparent when it is one, else "": a request's Trace
// comes from outside, and only a well-formed one (55 bytes) is kept in the intent.
func validTraceparent(tp string) string {
	if tp == "" {
		return ""
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// instanceSpan starts the span of one execution of an instance: a child of the step that
// invoked it when the intent names one, else of whatever span ctx holds (a host's request).
func (rt *Runtime) instanceSpan(ctx context.Context, in *intent, replaying bool) (context.Context, trace.Span) {
	if in.trace != "" {
		ctx = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": in.trace})
	}
	attrs := []attribute.KeyValue{
		attribute.String("ssf.name", rt.cfg.Name),
		attribute.String("ssf.instance.id", in.id),
		attribute.Bool("ssf.reexecution", replaying),
	}
	if in.caller != nil {
		attrs = append(attrs, attribute.String("ssf.caller.name", in.caller.SSF),
			attribute.String("ssf.caller.instance.id", in.caller.InstanceID), attribute.Int("ssf.caller.step", in.caller.Step))
	}
	if in.tx != nil {
		attrs = append(attrs, attribute.String("ssf.tx.id", in.tx.ID))
	}
	if in.builtin != "" {
		attrs = append(attrs, attribute.String("ssf.builtin", in.builtin))
	}
	return tracer().Start(ctx, "ssf "+rt.cfg.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endInstanceSpan ends an execution's span with its outcome: "ok", "error" (the instance
// finished with an application error) or "abandoned" (the execution stopped without deciding;
// another one finishes the instance).
func endInstanceSpan(span trace.Span, res Result, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, "execution abandoned")
		span.SetAttributes(attribute.String("ssf.outcome", "abandoned"))
	case res.Error != "":
		span.SetStatus(codes.Error, res.Error)
		span.SetAttributes(attribute.String("ssf.outcome", "error"))
	default:
		span.SetAttributes(attribute.String("ssf.outcome", "ok"))
	}
	span.End()
}

// traceStep starts the span of a step the handler takes (kind: read, write, invoke...) with
// attributes given as name, value pairs: a child of the execution's span, or of the step that
// takes it (a transaction's conditional write reads, then writes). Until the returned func ends
// it with the step's error, the Env's context carries it, so the step's store requests and the
// invocation it sends are its children. When nothing records it builds nothing.
func (e *Env) traceStep(kind string, kv ...string) func(*error) {
	if !trace.SpanFromContext(e.ctx).IsRecording() {
		return noStep
	}
	attrs := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
	}
	outerCtx, outerSpan := e.ctx, e.stepSpan
	ctx, span := tracer().Start(e.ctx, "ssf."+kind, trace.WithAttributes(attrs...))
	e.ctx, e.stepSpan = ctx, span
	end := endSpan(span)
	return func(err *error) {
		e.ctx, e.stepSpan = outerCtx, outerSpan
		end(err)
	}
}

func noStep(*error) {}

// storeSpan starts the span of one store request (get, update, scan, delete, batch) when the
// step or collector sending it records; end ends it with the request's error.
func storeSpan(ctx context.Context, op, partition string) (context.Context, func(*error)) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noStep
	}
	ctx, span := tracer().Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.operation.name", op), attribute.String("ssf.store.partition", partition)))
	return ctx, endSpan(span)
}

// endSpan ends span with the error its operation returned, if any.
func endSpan(span trace.Span) func(*error) {
	return func(err *error) {
		if *err != nil {
			span.RecordError(*err)
			span.SetStatus(codes.Error, (*err).Error())
		}
		span.End()
	}
}

// stat is one of a runtime's counters: kept for Stats, and added to the OpenTelemetry counter
// of its name with the SSF's name as attribute (a no-op until a meter provider is installed).
type stat struct {
	atomic.Int64
	counter metric.Int64Counter
	attrs   metric.AddOption
}

func (s *stat) inc() { s.incBy(1) }

func (s *stat) incBy(n int64) {
	s.Add(n)
	if s.counter != nil {
		s.counter.Add(context.Background(), n, s.attrs)
	}
}

// metrics are the runtime's counters as OpenTelemetry names them.
var metrics = []struct {
	name, desc string
	of         func(*counters) *stat
}{
	{"ssf.executions", "executions of instances started (first runs and re-runs)", func(c *counters) *stat { return &c.executions }},
	{"ssf.reexecutions", "executions of instances that had started before", func(c *counters) *stat { return &c.reexecutions }},
	{"ssf.abandoned", "executions stopped before deciding (crashes, lost fences, store errors, divergences)", func(c *counters) *stat { return &c.abandoned }},
	{"ssf.callbacks", "callbacks received from callees", func(c *counters) *stat { return &c.callbacks }},
	{"ssf.callbacks.spurious", "callbacks for invocations this SSF does not know", func(c *counters) *stat { return &c.spuriousCallbacks }},
	{"ssf.relaunches", "instances the intent collector launched again", func(c *counters) *stat { return &c.relaunched }},
	{"ssf.gave_up", "instances given up after their maximum attempts", func(c *counters) *stat { return &c.gaveUp }},
	{"ssf.late_starts", "starts refused for arriving more than T after they were sent", func(c *counters) *stat { return &c.lateStarts }},
	{"ssf.corruptions", "invariant violations found in stored state (must stay 0)", func(c *counters) *stat { return &c.corruptions }},
	{"ssf.steps", "steps taken by executions, replayed ones included", func(c *counters) *stat { return &c.steps }},
	{"ssf.write_scans", "item writes that scanned the whole list (the last row's summary could not rule out an earlier entry)", func(c *counters) *stat { return &c.writeScans }},
}

// instruments are the metrics' counters, one per process for every SSF, made through the
// global meter provider, which forwards them to one installed later.
var instruments = sync.OnceValue(func() []metric.Int64Counter {
	meter := otel.Meter("github.com/ssfkit/ssfkit/orchestrator/ssf")
	out := make([]metric.Int64Counter, len(metrics))
	for i, m := range metrics {
		out[i], _ = meter.Int64Counter(m.name, metric.WithDescription(m.desc), metric.WithUnit("{event}"))
	}
	return out
})

// meter binds the counters to their instruments, attributed to the SSF's name.
func (c *counters) meter(ssfName string) {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("ssf.name", ssfName)))
	for i, inst := range instruments() {
		if inst != nil {
			s := metrics[i].of(c)
			s.counter, s.attrs = inst, attrs
		}
	}
}

// collectorInstruments are the collectors' metrics: passes and their duration by collector and
// outcome, what the last pass found, and what the garbage collector removed.
type collectorInstruments struct {
	passes                                   metric.Int64Counter
	duration                                 metric.Float64Histogram
	pending, held, items                     metric.Int64Gauge
	intentsRemoved, logRowsDeleted, daalRows metric.Int64Counter
	gcLag                                    metric.Float64Gauge
	daalLength                               metric.Int64Histogram
	exported, exportFailures                 metric.Int64Counter
	exportDuration                           metric.Float64Histogram
}

var collectorInstrumentsOnce = sync.OnceValue(func() collectorInstruments {
	meter := otel.Meter("github.com/ssfkit/ssfkit/orchestrator/ssf")
	var c collectorInstruments
	c.passes, _ = meter.Int64Counter("ssf.collector.passes", metric.WithUnit("{pass}"),
		metric.WithDescription("collector passes, by ssf.collector (ic, gc) and ssf.outcome (ok, error)"))
	c.duration, _ = meter.Float64Histogram("ssf.collector.duration", metric.WithUnit("s"),
		metric.WithDescription("how long a collector pass took, by ssf.collector"))
	c.pending, _ = meter.Int64Gauge("ssf.ic.pending", metric.WithUnit("{instance}"),
		metric.WithDescription("unfinished instances the intent collector's last pass found"))
	c.held, _ = meter.Int64Gauge("ssf.gc.held", metric.WithUnit("{instance}"),
		metric.WithDescription("instances finished more than T ago that the last pass kept: for their holder, or because their result could not be called back to their caller"))
	c.items, _ = meter.Int64Gauge("ssf.gc.items", metric.WithUnit("{item}"),
		metric.WithDescription("linked DAALs the last garbage collector pass visited"))
	c.intentsRemoved, _ = meter.Int64Counter("ssf.gc.intents_removed", metric.WithUnit("{instance}"),
		metric.WithDescription("instances collected (their intents replaced by tombstones)"))
	c.logRowsDeleted, _ = meter.Int64Counter("ssf.gc.log_rows_deleted", metric.WithUnit("{row}"),
		metric.WithDescription("read- and invoke-log rows deleted"))
	c.daalRows, _ = meter.Int64Counter("ssf.gc.daal_rows_deleted", metric.WithUnit("{row}"),
		metric.WithDescription("unreachable DAAL rows deleted"))
	c.gcLag, _ = meter.Float64Gauge("ssf.gc.lag", metric.WithUnit("s"),
		metric.WithDescription("how long past T the oldest finished instance the last pass kept has waited (held by its holder, unreported to its caller, or its export failed)"))
	c.daalLength, _ = meter.Int64Histogram("ssf.daal.length", metric.WithUnit("{row}"),
		metric.WithDescription("rows linked in each item's DAAL, as the garbage collector found them"))
	c.exported, _ = meter.Int64Counter("ssf.provenance.exported", metric.WithUnit("{instance}"),
		metric.WithDescription("instances whose provenance records the garbage collector exported (again after a crash: the sink keeps one)"))
	c.exportFailures, _ = meter.Int64Counter("ssf.provenance.export_failures", metric.WithUnit("{export}"),
		metric.WithDescription("exports the provenance sink refused; their instances are kept until it takes them"))
	c.exportDuration, _ = meter.Float64Histogram("ssf.provenance.export_duration", metric.WithUnit("s"),
		metric.WithDescription("how long one export to the provenance sink took"))
	return c
})

// collectorMetrics records one SSF's collector passes.
type collectorMetrics struct {
	inst        collectorInstruments
	ssf, ic, gc attribute.KeyValue
}

func newCollectorMetrics(ssfName string) collectorMetrics {
	return collectorMetrics{inst: collectorInstrumentsOnce(), ssf: attribute.String("ssf.name", ssfName),
		ic: attribute.String("ssf.collector", "ic"), gc: attribute.String("ssf.collector", "gc")}
}

func (m collectorMetrics) pass(which attribute.KeyValue, took time.Duration, err error) {
	if m.inst.passes == nil {
		return
	}
	ctx := context.Background()
	outcome := attribute.String("ssf.outcome", "ok")
	if err != nil {
		outcome = attribute.String("ssf.outcome", "error")
	}
	m.inst.passes.Add(ctx, 1, metric.WithAttributes(m.ssf, which, outcome))
	m.inst.duration.Record(ctx, took.Seconds(), metric.WithAttributes(m.ssf, which))
}

func (m collectorMetrics) icPass(took time.Duration, rep ICReport, err error) {
	m.pass(m.ic, took, err)
	if err == nil && m.inst.pending != nil {
		m.inst.pending.Record(context.Background(), int64(rep.Pending), metric.WithAttributes(m.ssf))
	}
}

func (m collectorMetrics) gcPass(took time.Duration, rep GCReport, err error) {
	m.pass(m.gc, took, err)
	if m.inst.passes == nil {
		return
	}
	ctx, attrs := context.Background(), metric.WithAttributes(m.ssf)
	if err == nil {
		m.inst.held.Record(ctx, int64(rep.Held+rep.Unreported), attrs)
		m.inst.items.Record(ctx, int64(rep.Items), attrs)
		m.inst.gcLag.Record(ctx, rep.Lag.Seconds(), attrs)
	}
	// What a failed pass removed before it stopped was removed all the same.
	m.inst.intentsRemoved.Add(ctx, int64(rep.IntentsRemoved), attrs)
	m.inst.logRowsDeleted.Add(ctx, int64(rep.LogRowsDeleted), attrs)
	m.inst.daalRows.Add(ctx, int64(rep.RowsDeleted), attrs)
}

func (m collectorMetrics) daalLength(rows int) {
	if m.inst.daalLength != nil {
		m.inst.daalLength.Record(context.Background(), int64(rows), metric.WithAttributes(m.ssf))
	}
}

func (m collectorMetrics) exported(ctx context.Context, n int, took time.Duration) {
	if m.inst.exported != nil {
		m.inst.exported.Add(ctx, int64(n), metric.WithAttributes(m.ssf))
		m.inst.exportDuration.Record(ctx, took.Seconds(), metric.WithAttributes(m.ssf))
	}
}

func (m collectorMetrics) exportFailed(ctx context.Context) {
	if m.inst.exportFailures != nil {
		m.inst.exportFailures.Add(ctx, 1, metric.WithAttributes(m.ssf))
	}
}
