// Package queue is ssfkit's portable view of a message queue with leases: what carries
// asynchronous starts between SSFs (SQS to Lambda, Storage Queues to Functions, Pub/Sub to Cloud
// Run, or an in-process queue under `ssfkit dev`).
//
// Queues deliver at least once: a message can arrive twice, or again after its receiver crashed
// before acknowledging it. That is all the runtime needs, because it keys every effect on the
// instance id in the intent table: a duplicate delivery re-executes the same instance, which
// replays its logs. The Driver interface is therefore small: send, receive with a lease
// (visibility timeout), acknowledge, retry after a delay, extend a lease.
//
// Drivers register a URL scheme with Register; applications open queues with Open. Serve is a
// consumer loop with bounded concurrency, retries with backoff, lease renewal and a dead-letter
// queue for poison messages.
//
// Imports (docs/architecture.md): no package of this module but internal/driverurl; drivers
// (adapters/queue/*) import only this one (logqueue, on the shared log, also the store API).
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/internal/driverurl"
)

// Message is one delivery of a message. It is leased to its receiver, hidden from other
// receivers, until the receiver acknowledges it, retries it, or the lease expires.
type Message struct {
	// ID is the backend's id of the message, the same on every delivery.
	ID string
	// Body is the message as sent.
	Body []byte
	// Attributes are the message's attributes as sent (SendWithAttributes), nil if it has
	// none. SQS and Pub/Sub carry them natively; Azure Storage Queues and the log queue carry
	// them in an Envelope around the body.
	Attributes map[string]string
	// Attempts counts the deliveries of this message, this one included (so it is at least 1),
	// or is 0 when the backend does not count them (a Pub/Sub subscription without a dead-letter
	// policy). Backends count approximately: a lease that expires counts as an attempt.
	Attempts int
	// Sent is when the backend stored the message (SQS SentTimestamp, Azure's insertion time,
	// Pub/Sub's publish time, the in-process queue's clock), zero if it does not say.
	Sent time.Time
	// FirstReceived is when the message was first delivered, zero if unknown: SQS
	// ApproximateFirstReceiveTimestamp; the in-process and log queues record it; the Azure
	// driver records it in the message when Retry or Extend rewrites it (a message that was
	// never retried or extended is known only on its first delivery); Pub/Sub does not say.
	// Dead-letter records take the first failure from it (see NewDeadLetter).
	FirstReceived time.Time
	// Handle is the driver's lease handle (a receipt handle, pop receipt, ack id). Drivers may
	// replace it when they extend or renew a lease.
	Handle any
}

// Limits are a backend's limits; Queue checks arguments against them before calling the driver.
type Limits struct {
	// MaxMessageBytes is the largest body Send accepts.
	MaxMessageBytes int
	// MaxBatch is the most messages one Receive can return.
	MaxBatch int
	// MaxLease is the longest lease, and the longest retry delay, the backend supports.
	MaxLease time.Duration
}

// Driver is the interface a backend implements. Methods must be safe for concurrent use; the
// Message passed to Ack, Retry and Extend is one Receive returned. Durations reach a driver in
// whole seconds (Queue rounds them up), the granularity of every cloud queue.
type Driver interface {
	// Send enqueues body with its attributes (nil or valid: CheckAttributes) and returns the
	// new message's id once the backend has stored it. A message too large for the backend
	// with its attributes fails with ErrTooLarge.
	Send(ctx context.Context, body []byte, attrs map[string]string) (id string, err error)
	// Receive leases up to max visible messages for lease. If none is visible it waits up to
	// wait for one, then returns an empty result.
	Receive(ctx context.Context, max int, wait, lease time.Duration) ([]*Message, error)
	// Ack deletes the message. It fails with ErrNotFound, or is ignored (Pub/Sub), if the lease
	// expired and the message may be delivered again.
	Ack(ctx context.Context, m *Message) error
	// Retry ends the lease: the message becomes visible again after delay.
	Retry(ctx context.Context, m *Message, delay time.Duration) error
	// Extend makes the lease end lease from now.
	Extend(ctx context.Context, m *Message, lease time.Duration) error
	// Limits reports the backend's limits.
	Limits() Limits
	// Close releases the driver's resources.
	Close() error
}

// Depther is an optional Driver interface: the backend's count of the messages it holds
// (visible, leased or delayed; approximate where the backend says so, as SQS and Azure
// Storage queues do). Pub/Sub's API has none (its backlog is a Cloud Monitoring metric).
type Depther interface {
	Depth(ctx context.Context) (int64, error)
}

// Errors every driver maps its native errors onto, so callers can test with errors.Is.
var (
	// ErrTooLarge: the message exceeds the backend's size limit. Nothing was sent.
	ErrTooLarge = errors.New("message exceeds the queue's size limit")
	// ErrInvalid: an argument, URL or setting the queue cannot accept.
	ErrInvalid = driverurl.ErrInvalid
	// ErrNotFound: the queue does not exist, or the message is no longer leased under this
	// handle (acknowledged already, or its lease expired).
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the backend could not be reached; the operation may or may not have applied.
	ErrUnavailable = errors.New("queue unavailable")
	// ErrClosed: the queue was used after Close.
	ErrClosed = errors.New("queue is closed")
)

// DefaultLease is the lease Receive takes when ReceiveOptions.Lease is zero.
const DefaultLease = 30 * time.Second

// ReceiveOptions shape one Receive.
type ReceiveOptions struct {
	// Max is the most messages to return: at least 1, at most Limits().MaxBatch (larger values
	// are lowered to it).
	Max int
	// Wait is how long to wait for a message when none is visible; zero polls once.
	Wait time.Duration
	// Lease is how long received messages stay hidden from other receivers (DefaultLease if
	// zero, at most Limits().MaxLease).
	Lease time.Duration
}

// Queue is the portable handle applications and the runtime use. It validates arguments
// before they reach a driver and names the queue in every error.
type Queue struct {
	drv    Driver
	name   string
	closed atomic.Bool
}

// New wraps a driver; name (usually the redacted URL) appears in errors.
func New(d Driver, name string) *Queue { return &Queue{drv: d, name: name} }

// Name is the queue's display name (its redacted URL).
func (q *Queue) Name() string { return q.name }

// Limits reports the backend's limits.
func (q *Queue) Limits() Limits { return q.drv.Limits() }

// Driver returns the underlying driver, for escape hatches to native features.
func (q *Queue) Driver() Driver { return q.drv }

func (q *Queue) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("queue %s: %s: %w", q.name, op, err)
}

// seconds rounds d up to whole seconds, checking it against the backend's longest lease. Only
// a retry delay may be zero.
func (q *Queue) seconds(what string, d time.Duration, zeroOK bool) (time.Duration, error) {
	if d < 0 || d == 0 && !zeroOK {
		want := "positive"
		if zeroOK {
			want = "zero or positive"
		}
		return 0, fmt.Errorf("%w: %s must be %s, got %v", ErrInvalid, what, want, d)
	}
	d = (d + time.Second - 1).Truncate(time.Second)
	if limit := q.drv.Limits().MaxLease; d > limit {
		return 0, fmt.Errorf("%w: %s %v exceeds the backend's maximum %v", ErrInvalid, what, d, limit)
	}
	return d, nil
}

// Send enqueues body, which must not be empty, and returns the message id. A body over
// Limits().MaxMessageBytes fails with ErrTooLarge and nothing is sent.
func (q *Queue) Send(ctx context.Context, body []byte) (string, error) {
	return q.SendWithAttributes(ctx, body, nil)
}

// SendWithAttributes is Send with message attributes, which must follow the rules of
// CheckAttributes (else ErrInvalid, and nothing is sent). The body and attributes count
// together against Limits().MaxMessageBytes, measured as their Envelope (the body alone when
// there are no attributes): over it, the send fails with ErrTooLarge.
func (q *Queue) SendWithAttributes(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	if q.closed.Load() {
		return "", q.wrap("send", ErrClosed)
	}
	if len(body) == 0 {
		return "", q.wrap("send", fmt.Errorf("%w: empty message (SQS and Pub/Sub refuse them)", ErrInvalid))
	}
	if err := CheckAttributes(attrs); err != nil {
		return "", q.wrap("send", err)
	}
	if size, limit := (Envelope{Attributes: attrs, Body: body}).Size(), q.drv.Limits().MaxMessageBytes; size > limit {
		what := "bytes"
		if size != len(body) {
			what = fmt.Sprintf("bytes with its attributes (a body of %d)", len(body))
		}
		return "", q.wrap("send", fmt.Errorf("%w: %d %s (at most %d)", ErrTooLarge, size, what, limit))
	}
	id, err := q.drv.Send(ctx, body, CloneAttributes(attrs))
	return id, q.wrap("send", err)
}

// Receive leases messages (see ReceiveOptions). An empty result with a nil error means no
// message became visible within the wait.
func (q *Queue) Receive(ctx context.Context, o ReceiveOptions) ([]*Message, error) {
	if q.closed.Load() {
		return nil, q.wrap("receive", ErrClosed)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	lease, err := q.seconds("lease", o.Lease, false)
	if err != nil {
		return nil, q.wrap("receive", err)
	}
	if o.Wait < 0 {
		return nil, q.wrap("receive", fmt.Errorf("%w: negative wait %v", ErrInvalid, o.Wait))
	}
	o.Max = min(max(o.Max, 1), q.drv.Limits().MaxBatch)
	ms, err := q.drv.Receive(ctx, o.Max, o.Wait, lease)
	return ms, q.wrap("receive", err)
}

// Ack deletes a received message: it will not be delivered again.
func (q *Queue) Ack(ctx context.Context, m *Message) error {
	if q.closed.Load() {
		return q.wrap("ack", ErrClosed)
	}
	return q.wrap("ack "+m.ID, q.drv.Ack(ctx, m))
}

// Retry ends a received message's lease; it becomes visible again after delay (rounded up to
// whole seconds; zero makes it visible at once).
func (q *Queue) Retry(ctx context.Context, m *Message, delay time.Duration) error {
	if q.closed.Load() {
		return q.wrap("retry", ErrClosed)
	}
	d, err := q.seconds("retry delay", delay, true)
	if err != nil {
		return q.wrap("retry "+m.ID, err)
	}
	return q.wrap("retry "+m.ID, q.drv.Retry(ctx, m, d))
}

// Extend renews a received message's lease: it ends lease from now (rounded up to seconds).
func (q *Queue) Extend(ctx context.Context, m *Message, lease time.Duration) error {
	if q.closed.Load() {
		return q.wrap("extend", ErrClosed)
	}
	d, err := q.seconds("lease", lease, false)
	if err != nil {
		return q.wrap("extend "+m.ID, err)
	}
	return q.wrap("extend "+m.ID, q.drv.Extend(ctx, m, d))
}

// Close releases the driver; later calls fail with ErrClosed. Closing twice is harmless.
func (q *Queue) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	return q.drv.Close()
}

// Opener opens a driver from a parsed URL.
type Opener func(ctx context.Context, u *URL) (Driver, error)

var registry = driverurl.NewRegistry[Driver]("queue", "mem://jobs or sqs://QUEUE?region=REGION",
	"github.com/ssfkit/ssfkit/adapters/queue/memqueue")

// Register makes a driver available under a URL scheme. It panics on a duplicate, like
// database/sql.Register, because two drivers claiming one scheme is a programming error.
func Register(scheme string, open Opener) { registry.Register(scheme, open) }

// Schemes lists the registered URL schemes.
func Schemes() []string { return registry.Schemes() }

// Open opens the queue named by rawURL with the driver registered for its scheme.
func Open(ctx context.Context, rawURL string) (*Queue, error) {
	d, u, err := registry.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return New(d, u.Redacted()), nil
}

// Depth returns the number of messages the queue holds, and false if its driver cannot tell.
func (q *Queue) Depth(ctx context.Context) (int64, bool, error) {
	d, ok := q.drv.(Depther)
	if !ok {
		return 0, false, nil
	}
	n, err := d.Depth(ctx)
	return n, true, q.wrap("depth", err)
}
