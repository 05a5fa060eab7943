package queue_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

// Every dead-lettered message counts in ssf.queue.dead_letters, under the queue it came from,
// including one whose body was too large to keep; a queue's depth is ssf.queue.depth.
func TestDeadLettersAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	ctx := context.Background()
	dlq := memQueue(400)
	for _, body := range []string{"small", string(make([]byte, 1000))} {
		rec := queue.DeadLetter{Source: "sqs://orders", MessageID: "m", Error: "boom", Time: time.Now(), Body: []byte(body)}
		if _, err := queue.WriteDeadLetter(ctx, dlq, rec); err != nil {
			t.Fatal(err)
		}
	}
	// The dead-letter queue holds both records: its depth says so (one provider per binary, so
	// the same test checks both instruments).
	if err := queue.RecordDepth(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	depth := int64(-1)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "ssf.queue.depth" {
				for _, p := range g.DataPoints {
					if v, _ := p.Attributes.Value("ssf.queue"); v.AsString() == dlq.Name() {
						depth = p.Value
					}
				}
			}
		}
	}
	if depth != 2 {
		t.Fatalf("ssf.queue.depth of %s = %d, want 2", dlq.Name(), depth)
	}
	var got int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "ssf.queue.dead_letters" {
				for _, p := range sum.DataPoints {
					if v, _ := p.Attributes.Value("ssf.queue"); v.AsString() == "sqs://orders" {
						got += p.Value
					}
				}
			}
		}
	}
	if got != 2 {
		t.Fatalf("ssf.queue.dead_letters = %d, want 2", got)
	}
}
