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
