package queue

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// deadLetters counts the records written to dead-letter queues, by the queue the message came
// from (ssf.queue, its redacted URL): OpenTelemetry's global meter provider, a no-op until one
// is installed (internal/telemetry).
var deadLetters = sync.OnceValue(func() metric.Int64Counter {
	c, _ := otel.Meter("github.com/ssfkit/ssfkit/adapters/queue").Int64Counter("ssf.queue.dead_letters",
		metric.WithUnit("{message}"), metric.WithDescription("messages and failed instances dead-lettered, by the queue they came from"))
	return c
})

func countDeadLetter(ctx context.Context, source string) {
	if c := deadLetters(); c != nil {
		c.Add(ctx, 1, metric.WithAttributes(attribute.String("ssf.queue", source)))
	}
}

var depthGauge = sync.OnceValue(func() metric.Int64Gauge {
	g, _ := otel.Meter("github.com/ssfkit/ssfkit/adapters/queue").Int64Gauge("ssf.queue.depth",
		metric.WithUnit("{message}"), metric.WithDescription("messages the queue holds (visible, leased or delayed), as the backend counts them"))
	return g
})

// RecordDepth records the queue's depth (ssf.queue.depth, by ssf.queue), if its driver can
// tell: one request to the backend. The hosts call it from the intent collector's pass, which
// is when a backlog matters.
func RecordDepth(ctx context.Context, q *Queue) error {
	n, ok, err := q.Depth(ctx)
	if err != nil || !ok {
		return err
	}
	if g := depthGauge(); g != nil {
		g.Record(ctx, n, metric.WithAttributes(attribute.String("ssf.queue", q.Name())))
	}
	return nil
}
