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
// including one whose body was too large to keep.
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
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
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
