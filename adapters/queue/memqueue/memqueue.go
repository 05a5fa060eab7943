// Package memqueue is the in-process queue driver, for `ssfkit dev` and tests.
//
// URL: mem://NAME opens the process-wide queue NAME (every Open of the same name shares it, the
// way separate functions share one cloud queue); mem:// opens a fresh private queue. Parameter
// max_message_bytes lowers the size limit (default 48 KiB, the smallest of the clouds', Azure
// Storage Queues', so that a message that fits here fits everywhere).
//
// Leases, retry delays and attempt counts behave as in the cloud queues; messages are
// delivered in the order they become visible. Attributes are kept as they are; messages record
// when they were sent and first delivered.
package memqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

func init() { queue.Register("mem", open) }

// Limits of the in-process queue.
const (
	DefaultMaxMessageBytes = 48 << 10
	maxMessageBytes        = 1 << 30
	maxBatch               = 32
	maxLease               = 12 * time.Hour
)

var (
	sharedMu sync.Mutex
	shared   = map[string]*broker{}
)

// broker is one queue's state, shared by every driver opened on its name.
type broker struct {
	mu     sync.Mutex
	seq    int64
	msgs   []*entry // in send order
	byID   map[string]*entry
	change chan struct{} // closed and replaced whenever a message may have become visible
}

type entry struct {
	id       string
	body     []byte
	attrs    map[string]string
	sent     time.Time
	first    time.Time // first delivery; zero until then
	attempts int
	visible  time.Time // hidden until then
	lease    int64     // the current lease's number; 0 when none is valid
}

// Driver is a handle on one in-process queue.
type Driver struct {
	b      *broker
	limits queue.Limits
}

// New returns a driver on a fresh private queue with the given size limit.
func New(maxMessageBytes int) *Driver {
	return &Driver{b: newBroker(), limits: queue.Limits{MaxMessageBytes: maxMessageBytes, MaxBatch: maxBatch, MaxLease: maxLease}}
}

func newBroker() *broker {
	return &broker{byID: map[string]*entry{}, change: make(chan struct{})}
}

func open(_ context.Context, u *queue.URL) (queue.Driver, error) {
	if err := u.CheckParams("max_message_bytes"); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: mem URL takes a name, not a path: want mem://NAME, got path %q", queue.ErrInvalid, u.Path)
	}
	limit, err := queue.MaxMessageBytes(u, DefaultMaxMessageBytes, maxMessageBytes)
	if err != nil {
		return nil, err
	}
	d := New(limit)
	if u.Host == "" {
		return d, nil
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	b, ok := shared[u.Host]
	if !ok {
		b = d.b
		shared[u.Host] = b
	}
	d.b = b
	return d, nil
}

// notify wakes waiting receivers; b.mu must be held.
func (b *broker) notify() {
	close(b.change)
	b.change = make(chan struct{})
}

// Send implements queue.Driver.
func (d *Driver) Send(_ context.Context, body []byte, attrs map[string]string) (string, error) {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e := &entry{id: strconv.FormatInt(b.seq, 10), body: slices.Clone(body), attrs: queue.CloneAttributes(attrs), sent: time.Now()}
	b.msgs = append(b.msgs, e)
	b.byID[e.id] = e
	b.notify()
	return e.id, nil
}

// Receive implements queue.Driver.
func (d *Driver) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	b := d.b
	deadline := time.Now().Add(wait)
	for {
		b.mu.Lock()
		now := time.Now()
		var out []*queue.Message
		next := deadline // when to look again if nothing is visible
		for _, e := range b.msgs {
			if len(out) == n {
				break
			}
			if e.visible.After(now) {
				next = minTime(next, e.visible)
				continue
			}
			b.seq++
			e.lease, e.attempts, e.visible = b.seq, e.attempts+1, now.Add(lease)
			if e.first.IsZero() {
				e.first = now
			}
			out = append(out, &queue.Message{ID: e.id, Body: slices.Clone(e.body), Attributes: queue.CloneAttributes(e.attrs),
				Attempts: e.attempts, Sent: e.sent, FirstReceived: e.first, Handle: e.lease})
		}
		change := b.change
		b.mu.Unlock()
		if len(out) > 0 || !now.Before(deadline) {
			return out, nil
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-change:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// leased returns m's entry if m's lease is still the current one; b.mu must be held. Like
// SQS and Azure, a lease that ran out stays valid until the message is received again.
func (b *broker) leased(m *queue.Message) (*entry, error) {
	n, ok := m.Handle.(int64)
	if !ok {
		return nil, fmt.Errorf("%w: message %s was not received from an in-process queue", queue.ErrInvalid, m.ID)
	}
	e := b.byID[m.ID]
	if e == nil || e.lease != n {
		return nil, fmt.Errorf("%w: message %s is not leased under this handle (acknowledged or retried already, or received again after its lease expired)", queue.ErrNotFound, m.ID)
	}
	return e, nil
}

// Ack implements queue.Driver.
func (d *Driver) Ack(_ context.Context, m *queue.Message) error {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.leased(m)
	if err != nil {
		return err
	}
	delete(b.byID, e.id)
	b.msgs = slices.DeleteFunc(b.msgs, func(x *entry) bool { return x == e })
	return nil
}

// Retry implements queue.Driver.
func (d *Driver) Retry(_ context.Context, m *queue.Message, delay time.Duration) error {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.leased(m)
	if err != nil {
		return err
	}
	e.lease, e.visible = 0, time.Now().Add(delay)
	b.notify()
	return nil
}

// Extend implements queue.Driver.
func (d *Driver) Extend(_ context.Context, m *queue.Message, lease time.Duration) error {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.leased(m)
	if err != nil {
		return err
	}
	e.visible = time.Now().Add(lease)
	b.notify() // a shorter lease may make it visible sooner than waiters expect
	return nil
}

// Limits implements queue.Driver.
func (d *Driver) Limits() queue.Limits { return d.limits }

// Depth is the number of messages not yet acknowledged.
func (d *Driver) Depth(context.Context) (int64, error) {
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	return int64(len(d.b.byID)), nil
}

// Close implements queue.Driver. A shared queue keeps its messages for later Opens.
func (d *Driver) Close() error { return nil }
