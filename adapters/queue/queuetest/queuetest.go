// Package queuetest is the conformance suite every queue driver must pass, in the style of
// adapters/store/storetest. A driver's test wires it up with a harness that returns a fresh,
// empty queue:
//
//	func TestConformance(t *testing.T) {
//		queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue { ... })
//	}
//
// The suite uses only the public queue API, so every backend runs it unchanged. It pins down
// the contract the runtime and Serve rely on: bodies round-trip byte for byte, an acknowledged
// message is gone, a retried or expired one comes back with its attempt count incremented, a
// lease hides a message from every other receiver, and size limits send nothing.
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/internal/suite"
)

// RunConformanceTests runs the suite. newQueue must return a fresh, empty queue on each call;
// the suite closes it. Subtests run in parallel, each on its own queue, because several wait
// for leases to run out.
func RunConformanceTests(t *testing.T, newQueue func(t *testing.T) *queue.Queue) {
	Suite(t, func(t suite.T) *queue.Queue { return newQueue(t.(*testing.T)) })
}

// Suite runs the conformance tests as subtests of t, under go test or from `ssfkit
// conformance -queue` against a live backend.
func Suite(t suite.T, newQueue func(t suite.T) *queue.Queue) {
	for _, tc := range []struct {
		name string
		fn   func(suite.T, *queue.Queue)
	}{
		{"RoundTrip", testRoundTrip},
		{"BinaryBody", testBinaryBody},
		{"AckRemoves", testAckRemoves},
		{"RetryRedelivers", testRetryRedelivers},
		{"LeaseExpiryRedelivers", testLeaseExpiry},
		{"LeaseHidesMessage", testLeaseHides},
		{"ExtendKeepsLease", testExtend},
		{"ConcurrentReceivers", testConcurrentReceivers},
		{"SizeLimit", testSizeLimit},
		{"EmptyReceiveReturns", testEmptyReceive},
		{"Close", testClose},
	} {
		suite.Run(t, tc.name, func(t suite.T) {
			suite.Parallel(t)
			q := newQueue(t)
			t.Cleanup(func() {
				if err := q.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, q)
		})
	}
}

// longLease outlasts any test, so a message received with it stays hidden until the test
// acknowledges or retries it.
const longLease = 10 * time.Minute

// maxEmptyPolls bounds how long receiveN waits for messages that must arrive: a hang guard, not
// a timing assertion (each poll waits a second).
const maxEmptyPolls = 60

func send(t suite.T, q *queue.Queue, body string) string {
	t.Helper()
	id, err := q.Send(t.Context(), []byte(body))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if id == "" {
		t.Fatal("Send returned an empty message id")
	}
	return id
}

// receiveN receives until it holds n messages, leased for lease, failing on more than n.
func receiveN(t suite.T, q *queue.Queue, n int, lease time.Duration) []*queue.Message {
	t.Helper()
	var out []*queue.Message
	for empty := 0; len(out) < n; {
		ms, err := q.Receive(t.Context(), queue.ReceiveOptions{Max: n - len(out), Wait: time.Second, Lease: lease})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(ms) > n-len(out) {
			t.Fatalf("Receive with Max %d returned %d messages", n-len(out), len(ms))
		}
		if len(ms) == 0 {
			if empty++; empty == maxEmptyPolls {
				t.Fatalf("received %d of %d messages, then nothing for %d polls", len(out), n, maxEmptyPolls)
			}
		}
		for _, m := range ms {
			if m.Attempts < 1 {
				t.Fatalf("message %s: Attempts = %d, want at least 1", m.ID, m.Attempts)
			}
		}
		out = append(out, ms...)
	}
	return out
}

func receiveOne(t suite.T, q *queue.Queue, lease time.Duration) *queue.Message {
	t.Helper()
	return receiveN(t, q, 1, lease)[0]
}

// expectNothing receives for at least d and fails if any message arrives.
func expectNothing(t suite.T, q *queue.Queue, d time.Duration, why string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; {
		ms, err := q.Receive(t.Context(), queue.ReceiveOptions{Max: 10, Wait: time.Second, Lease: longLease})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(ms) > 0 {
			t.Fatalf("%s, but received message %s (attempt %d, body %.40q)", why, ms[0].ID, ms[0].Attempts, ms[0].Body)
		}
	}
}

func check(t suite.T, m *queue.Message, id, body string, attempts int) {
	t.Helper()
	if m.ID != id || string(m.Body) != body || m.Attempts != attempts {
		t.Fatalf("got message %s (attempt %d, body %.40q), want %s (attempt %d, body %.40q)", m.ID, m.Attempts, m.Body, id, attempts, body)
	}
}

func ack(t suite.T, q *queue.Queue, ms ...*queue.Message) {
	t.Helper()
	for _, m := range ms {
		if err := q.Ack(t.Context(), m); err != nil {
			t.Fatalf("Ack %s: %v", m.ID, err)
		}
	}
}

func testRoundTrip(t suite.T, q *queue.Queue) {
	body := []byte(`{"kind":"invoke","instance_id":"a<b>&c","note":"é ✓ 😀"}`)
	id, err := q.Send(t.Context(), body)
	if err != nil {
		t.Fatal(err)
	}
	sent := string(body)
	body[0] = 'X' // the queue holds its own copy
	m := receiveOne(t, q, longLease)
	check(t, m, id, sent, 1)
	ack(t, q, m)
}

func testBinaryBody(t suite.T, q *queue.Queue) {
	var b []byte
	for i := range 256 {
		b = append(b, byte(i))
	}
	b = append(b, 0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80) // invalid UTF-8 and a surrogate
	id := send(t, q, string(b))
	m := receiveOne(t, q, longLease)
	check(t, m, id, string(b), 1)
	ack(t, q, m)
}

func testAckRemoves(t suite.T, q *queue.Queue) {
	const lease = 2 * time.Second
	a := send(t, q, "a")
	ack(t, q, receiveOne(t, q, lease))
	b := send(t, q, "b")
	m := receiveOne(t, q, longLease)
	check(t, m, b, "b", 1)
	if err := q.Retry(t.Context(), m, 0); err != nil {
		t.Fatal(err)
	}
	m = receiveOne(t, q, lease)
	check(t, m, b, "b", 2)
	ack(t, q, m)
	// Past the leases the messages were acknowledged under, nothing comes back.
	expectNothing(t, q, 2*lease, fmt.Sprintf("messages %s and %s were acknowledged", a, b))
}

func testRetryRedelivers(t suite.T, q *queue.Queue) {
	id := send(t, q, "again")
	for attempt := 1; attempt <= 3; attempt++ {
		m := receiveOne(t, q, longLease)
		check(t, m, id, "again", attempt)
		if attempt == 3 {
			ack(t, q, m)
			break
		}
		if err := q.Retry(t.Context(), m, 0); err != nil {
			t.Fatalf("Retry: %v", err)
		}
	}
}

func testLeaseExpiry(t suite.T, q *queue.Queue) {
	id := send(t, q, "crash")
	m := receiveOne(t, q, time.Second)
	check(t, m, id, "crash", 1)
	// The receiver "crashes": no ack, no retry. The lease runs out and the message returns.
	m = receiveOne(t, q, longLease)
	check(t, m, id, "crash", 2)
	ack(t, q, m)
}

func testLeaseHides(t suite.T, q *queue.Queue) {
	id := send(t, q, "mine")
	m := receiveOne(t, q, longLease)
	check(t, m, id, "mine", 1)
	expectNothing(t, q, 2*time.Second, "the only message is leased")
	if err := q.Retry(t.Context(), m, longLease); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, q, time.Second, "the only message was retried with a long delay")
}

func testExtend(t suite.T, q *queue.Queue) {
	const lease = 3 * time.Second // time enough to extend it on a loaded machine
	id := send(t, q, "slow")
	m := receiveOne(t, q, lease)
	if err := q.Extend(t.Context(), m, longLease); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	expectNothing(t, q, 2*lease, "the message's lease was extended")
	check(t, m, id, "slow", 1)
	ack(t, q, m) // the handle is still valid after an extension
}

func testConcurrentReceivers(t suite.T, q *queue.Queue) {
	const n, receivers = 20, 4
	var wg sync.WaitGroup
	sent := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := q.Send(t.Context(), fmt.Appendf(nil, "m%d", i))
			if err != nil {
				t.Errorf("Send: %v", err)
			}
			sent[i] = id
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var mu sync.Mutex
	got := map[string][]string{} // id -> bodies, one per delivery
	total := 0
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for empty := 0; empty < maxEmptyPolls; {
				mu.Lock()
				done := total >= n
				mu.Unlock()
				if done {
					return
				}
				ms, err := q.Receive(t.Context(), queue.ReceiveOptions{Max: 3, Wait: time.Second, Lease: longLease})
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				if len(ms) > 3 {
					t.Errorf("Receive with Max 3 returned %d messages", len(ms))
				}
				if len(ms) == 0 {
					empty++
				}
				mu.Lock()
				for _, m := range ms {
					got[m.ID] = append(got[m.ID], string(m.Body))
					total++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, id := range sent {
		if want := fmt.Sprintf("m%d", i); len(got[id]) != 1 || got[id][0] != want {
			t.Errorf("message %s (%s) delivered as %q, want exactly once within its lease", id, want, got[id])
		}
	}
	if len(got) != n {
		t.Errorf("received %d distinct messages, sent %d", len(got), n)
	}
}

func testSizeLimit(t suite.T, q *queue.Queue) {
	limit := q.Limits().MaxMessageBytes
	big := bytes.Repeat([]byte("x"), limit)
	id, err := q.Send(t.Context(), big)
	if err != nil {
		t.Fatalf("Send of exactly MaxMessageBytes (%d): %v", limit, err)
	}
	if _, err := q.Send(t.Context(), append(big, 'y')); !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("Send of MaxMessageBytes+1: got %v, want ErrTooLarge", err)
	}
	if _, err := q.Send(t.Context(), nil); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Send of an empty body: got %v, want ErrInvalid", err)
	}
	m := receiveOne(t, q, longLease)
	if m.ID != id || !bytes.Equal(m.Body, big) {
		t.Fatalf("got message %s of %d bytes, want %s of %d", m.ID, len(m.Body), id, limit)
	}
	ack(t, q, m)
	expectNothing(t, q, time.Second, "the rejected messages must not have been sent")
}

func testEmptyReceive(t suite.T, q *queue.Queue) {
	// The deadline only detects a Receive that ignores its wait and blocks until ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, wait := range []time.Duration{0, time.Second} {
		ms, err := q.Receive(ctx, queue.ReceiveOptions{Max: 5, Wait: wait})
		if err != nil || len(ms) != 0 {
			t.Fatalf("Receive(wait %v) on an empty queue: %d messages, %v", wait, len(ms), err)
		}
		if ctx.Err() != nil {
			t.Fatalf("Receive(wait %v) on an empty queue returned only when its context ended", wait)
		}
	}
}

func testClose(t suite.T, q *queue.Queue) {
	send(t, q, "left behind")
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := q.Send(t.Context(), []byte("x")); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if _, err := q.Receive(t.Context(), queue.ReceiveOptions{}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Receive after Close: %v, want ErrClosed", err)
	}
}
