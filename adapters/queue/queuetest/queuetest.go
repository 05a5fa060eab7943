// Package queuetest is the conformance suite every queue driver must pass, in the style of
// adapters/store/storetest. A driver's test wires it up with a harness that returns a fresh,
// empty queue:
//
//	func TestConformance(t *testing.T) {
//		queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue { ... })
//	}
//
// The suite uses only the public queue API, so every backend runs it unchanged. It pins down
// the contract the runtime and Serve rely on: bodies and attributes round-trip byte for byte,
// an acknowledged message is gone, a retried or expired one comes back with its attempt count
// incremented, a lease hides a message from every other receiver, size and attribute limits
// send nothing, and a dead-lettered message's record carries its reason as attributes.
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

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
		{"Attributes", testAttributes},
		{"AttributeLimits", testAttributeLimits},
		{"DeliveryTimes", testDeliveryTimes},
		{"DeadLetterAttributes", func(t suite.T, q *queue.Queue) {
			dlq, target := newQueue(t), newQueue(t)
			t.Cleanup(func() { dlq.Close(); target.Close() })
			testDeadLetterAttributes(t, q, dlq, target)
		}},
		{"EmptyReceiveReturns", testEmptyReceive},
		{"Depth", testDepth},
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

// sameAttributes fails unless m carries exactly want (none: nil or empty).
func sameAttributes(t suite.T, m *queue.Message, want map[string]string) {
	t.Helper()
	if len(m.Attributes) != len(want) || !maps.Equal(m.Attributes, want) {
		t.Fatalf("message %s (body %.40q) has attributes %q, want %q", m.ID, m.Body, m.Attributes, want)
	}
}

// byID receives n messages and indexes them by id.
func byID(t suite.T, q *queue.Queue, n int) map[string]*queue.Message {
	t.Helper()
	out := map[string]*queue.Message{}
	for _, m := range receiveN(t, q, n, longLease) {
		out[m.ID] = m
	}
	if len(out) != n {
		t.Fatalf("received %d distinct messages, want %d", len(out), n)
	}
	return out
}

func testAttributes(t suite.T, q *queue.Queue) {
	attrs := map[string]string{
		"plain":             "v",
		"Mixed.Case_name-1": "é ✓ 😀 <a&b> \"quoted\" \\ line\nbreak\ttab",
		"json":              `{"x":[1,2],"y":null}`,
		"longest":           strings.Repeat("ü", queue.MaxAttributeValueBytes/2),
	}
	binary := []byte{0, 1, 2, 0xff, 0xfe, 0xc0, 0x80}
	// A body that looks like an envelope must come back as it was, without attributes.
	lookalike := queue.EnvelopePrefix + `{"a":"b"}}` + "\nnot a header"
	want := map[string]struct {
		body  string
		attrs map[string]string
	}{}
	sendAttrs := func(body string, a map[string]string) {
		t.Helper()
		id, err := q.SendWithAttributes(t.Context(), []byte(body), a)
		if err != nil {
			t.Fatalf("SendWithAttributes(%.40q, %q): %v", body, a, err)
		}
		want[id] = struct {
			body  string
			attrs map[string]string
		}{body, maps.Clone(a)}
	}
	sendAttrs(`{"kind":"invoke"}`, attrs)
	sendAttrs(string(binary), map[string]string{"kind": "binary body"})
	sendAttrs("none", nil)
	sendAttrs(lookalike, nil)
	sendAttrs(lookalike, map[string]string{"kind": "lookalike"})
	attrs["plain"] = "changed after sending" // the queue holds its own copy
	got := byID(t, q, len(want))
	for id, w := range want {
		m := got[id]
		if m == nil {
			t.Fatalf("message %s (body %.40q) not received", id, w.body)
		}
		if string(m.Body) != w.body {
			t.Fatalf("message %s: body %q, want %q", id, m.Body, w.body)
		}
		sameAttributes(t, m, w.attrs)
	}
	// Attributes survive a redelivery.
	for _, m := range got {
		if err := q.Retry(t.Context(), m, 0); err != nil {
			t.Fatalf("Retry: %v", err)
		}
	}
	for id, m := range byID(t, q, len(want)) {
		if m.Attempts != 2 || string(m.Body) != want[id].body {
			t.Fatalf("redelivered message %s: attempt %d, body %.40q", id, m.Attempts, m.Body)
		}
		sameAttributes(t, m, want[id].attrs)
		ack(t, q, m)
	}
}

func testAttributeLimits(t suite.T, q *queue.Queue) {
	many := map[string]string{}
	for i := range queue.MaxAttributes + 1 {
		many[fmt.Sprintf("a%d", i)] = "v"
	}
	for name, attrs := range map[string]map[string]string{
		"too many attributes": many,
		"empty name":          {"": "v"},
		"name with a space":   {"a b": "v"},
		"non-ASCII name":      {"é": "v"},
		"name with a slash":   {"a/b": "v"},
		"leading dot":         {".a": "v"},
		"trailing dot":        {"a.": "v"},
		"double dot":          {"a..b": "v"},
		"AWS prefix":          {"aws.trace": "v"},
		"Amazon prefix":       {"Amazon.x": "v"},
		"goog prefix":         {"Google-x": "v", "googx": "v"},
		"reserved name":       {queue.ReservedAttribute: "base64"},
		"name too long":       {strings.Repeat("n", queue.MaxAttributeNameBytes+1): "v"},
		"empty value":         {"a": ""},
		"value too long":      {"a": strings.Repeat("v", queue.MaxAttributeValueBytes+1)},
		"value not UTF-8":     {"a": "\xff"},
		"NUL in value":        {"a": "x\x00y"},
		"control in value":    {"a": "\x1b[31m"},
		"non-character value": {"a": "\uffff"},
	} {
		if _, err := q.SendWithAttributes(t.Context(), []byte("refused"), attrs); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: SendWithAttributes got %v, want ErrInvalid", name, err)
		}
	}
	if t.Failed() {
		return
	}
	// At every limit at once: accepted, and delivered as sent.
	most := map[string]string{strings.Repeat("N", queue.MaxAttributeNameBytes): "name at the limit",
		"value": strings.Repeat("😀", queue.MaxAttributeValueBytes/4)}
	for i := len(most); i < queue.MaxAttributes; i++ {
		most[fmt.Sprintf("x-%d.y_z", i)] = strconv.Itoa(i)
	}
	// The body and its attributes share the size limit.
	limit := q.Limits().MaxMessageBytes
	small := map[string]string{"k": "v"}
	if _, err := q.SendWithAttributes(t.Context(), bytes.Repeat([]byte("x"), limit), small); !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("a body of MaxMessageBytes with an attribute: got %v, want ErrTooLarge", err)
	}
	room := limit - queue.Envelope{Attributes: most}.Size()
	if room < 1 {
		t.Fatalf("MaxMessageBytes %d leaves no room for a body beside %d bytes of attributes", limit, queue.Envelope{Attributes: most}.Size())
	}
	big := bytes.Repeat([]byte("y"), room)
	id, err := q.SendWithAttributes(t.Context(), big, most)
	if err != nil {
		t.Fatalf("a body of %d bytes with attributes at every limit (MaxMessageBytes %d in all): %v", room, limit, err)
	}
	m := receiveOne(t, q, longLease)
	if m.ID != id || !bytes.Equal(m.Body, big) {
		t.Fatalf("got message %s of %d bytes, want %s of %d", m.ID, len(m.Body), id, room)
	}
	sameAttributes(t, m, most)
	ack(t, q, m)
	expectNothing(t, q, time.Second, "the refused messages must not have been sent")
}

// clockSlack allows for a backend's clock and the test's disagreeing, and for millisecond
// timestamps.
const clockSlack = 2 * time.Second

func within(t suite.T, what string, at, from, to time.Time) {
	t.Helper()
	if at.Before(from.Add(-clockSlack)) || at.After(to.Add(clockSlack)) {
		t.Fatalf("%s is %v, want between %v and %v", what, at, from, to)
	}
}

// testDeliveryTimes checks the times a dead-letter record's first failure comes from.
func testDeliveryTimes(t suite.T, q *queue.Queue) {
	before := time.Now()
	id := send(t, q, "when")
	m := receiveOne(t, q, longLease)
	received := time.Now()
	check(t, m, id, "when", 1)
	if m.Sent.IsZero() && m.FirstReceived.IsZero() {
		t.Fatal("the message has neither Sent nor FirstReceived: a dead-letter record could not tell when it first failed")
	}
	if !m.Sent.IsZero() {
		within(t, "Sent", m.Sent, before, received)
	}
	if !m.FirstReceived.IsZero() {
		within(t, "FirstReceived", m.FirstReceived, before, received)
	}
	if err := q.Retry(t.Context(), m, 0); err != nil {
		t.Fatal(err)
	}
	again := receiveOne(t, q, longLease)
	check(t, again, id, "when", 2)
	if !m.Sent.IsZero() && !again.Sent.Equal(m.Sent) {
		t.Errorf("Sent changed between deliveries: %v, then %v", m.Sent, again.Sent)
	}
	if d := again.FirstReceived.Sub(m.FirstReceived); !m.FirstReceived.IsZero() && (d < -time.Second || d > time.Second) {
		t.Errorf("FirstReceived changed between deliveries: %v, then %v", m.FirstReceived, again.FirstReceived)
	}
	ack(t, q, again)
}

// testDeadLetterAttributes runs Serve on q with dlq as its dead-letter queue and checks the
// records of a poison message and of one that fails on every attempt: their message
// attributes give the reason, and agree with the records' bodies. Then it redrives the records
// to target. (Not to q: a receive cut short when Serve stopped may still lease, unseen, what
// arrives in q within its wait, on SQS.)
func testDeadLetterAttributes(t suite.T, q, dlq, target *queue.Queue) {
	const maxAttempts = 2
	// An error longer than an attribute value: the attribute is cut, the record keeps more.
	longErr := strings.Repeat("é", queue.MaxAttributeValueBytes) + " and a NUL \x00"
	origin := map[string]string{"origin": "conformance"}
	start := time.Now()
	poison, err := q.SendWithAttributes(t.Context(), []byte("poison body"), origin)
	if err != nil {
		t.Fatal(err)
	}
	failing := send(t, q, "failing body")
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- queue.Serve(ctx, q, func(_ context.Context, m *queue.Message) error {
			if string(m.Body) == "poison body" {
				return queue.Poison(errors.New(longErr))
			}
			return fmt.Errorf("failure on attempt %d", m.Attempts)
		}, queue.ServeOptions{DeadLetter: dlq, MaxAttempts: maxAttempts, Wait: time.Second, Lease: time.Minute,
			Backoff: func(int) time.Duration { return 0 }, Logger: slog.New(slog.DiscardHandler)})
	}()
	recs := receiveN(t, dlq, 2, longLease)
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	end := time.Now()
	for _, m := range recs {
		rec, err := queue.ParseDeadLetter(m.Body)
		if err != nil {
			t.Fatalf("dead-letter message %s: %v", m.ID, err)
		}
		var wantID, wantErr, wantAttempts string
		var wantAttrs map[string]string
		switch string(rec.Body) {
		case "poison body":
			wantID, wantErr, wantAttempts, wantAttrs = poison, "poison message: "+longErr, "1", origin
		case "failing body":
			wantID, wantErr, wantAttempts = failing, "failure on attempt 2", "2"
		default:
			t.Fatalf("a dead-letter record of body %q", rec.Body)
		}
		a := m.Attributes
		for name, want := range map[string]string{queue.AttrSource: q.Name(), queue.AttrMessageID: wantID, queue.AttrAttempts: wantAttempts} {
			if a[name] != queue.AttributeValue(want) {
				t.Errorf("record of %s: attribute %s = %q, want %q (all: %q)", wantID, name, a[name], want, a)
			}
		}
		errAttr := a[queue.AttrError]
		if len(wantErr) <= queue.MaxAttributeValueBytes {
			if errAttr != wantErr {
				t.Errorf("record of %s: attribute %s = %q, want %q", wantID, queue.AttrError, errAttr, wantErr)
			}
		} else if len(errAttr) > queue.MaxAttributeValueBytes || !utf8.ValidString(errAttr) || !strings.HasSuffix(errAttr, "…") ||
			!strings.HasPrefix(wantErr, strings.TrimSuffix(errAttr, "…")) || len(errAttr) < queue.MaxAttributeValueBytes-8 {
			t.Errorf("record of %s: attribute %s = %q (%d bytes), want the error cut to at most %d bytes, ending with …", wantID, queue.AttrError, errAttr, len(errAttr), queue.MaxAttributeValueBytes)
		}
		first, err1 := time.Parse(time.RFC3339, a[queue.AttrFirstFailure])
		last, err2 := time.Parse(time.RFC3339, a[queue.AttrLastFailure])
		if err1 != nil || err2 != nil {
			t.Fatalf("record of %s: failure times %q and %q are not RFC 3339: %v %v", wantID, a[queue.AttrFirstFailure], a[queue.AttrLastFailure], err1, err2)
		}
		within(t, "the first failure", first, start, end)
		within(t, "the last failure", last, start, end)
		if first.After(last) {
			t.Errorf("record of %s: first failure %v after the last, %v", wantID, first, last)
		}
		if wantAttempts == "1" && !first.Equal(last) {
			t.Errorf("record of %s: failed once, but first failure %v and last %v differ", wantID, first, last)
		}
		// The body says the same, in full.
		if rec.Source != q.Name() || rec.MessageID != wantID || strconv.Itoa(rec.Attempts) != wantAttempts ||
			!strings.HasPrefix(wantErr, rec.Error) || len(rec.Error) < min(len(wantErr), queue.MaxErrorBytes-8) ||
			!rec.FirstFailure.Equal(first) || !rec.LastFailure.Equal(last) || len(rec.Attributes) != len(wantAttrs) || !maps.Equal(rec.Attributes, wantAttrs) {
			t.Errorf("record %+v disagrees with its attributes %q, or with the message (%s, attempts %s, attributes %q)", rec, a, wantID, wantAttempts, wantAttrs)
		}
	}
	if t.Failed() {
		return
	}
	// Redrive sends the originals on with their own attributes.
	for _, m := range recs {
		if err := dlq.Retry(t.Context(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if moved, skipped, err := queue.Redrive(t.Context(), dlq, target, 2); err != nil || moved != 2 || skipped != 0 {
		t.Fatalf("Redrive: moved %d, skipped %d, %v; want 2 moved", moved, skipped, err)
	}
	for _, m := range receiveN(t, target, 2, longLease) {
		switch string(m.Body) {
		case "poison body":
			sameAttributes(t, m, origin)
		case "failing body":
			sameAttributes(t, m, nil)
		default:
			t.Fatalf("redriven body %q", m.Body)
		}
		if m.Attempts != 1 {
			t.Errorf("redriven message %s: attempt %d, want a new message", m.ID, m.Attempts)
		}
		ack(t, target, m)
	}
}

// testDepth: a driver that reports a depth counts sent messages, leased ones included, and
// forgets acknowledged ones. SQS and Azure count approximately; their emulators exactly.
func testDepth(t suite.T, q *queue.Queue) {
	ctx := context.Background()
	depth := func() int64 {
		t.Helper()
		n, ok, err := q.Depth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return -1
		}
		return n
	}
	if depth() < 0 {
		t.Logf("%T reports no depth (queue.Depther); nothing to check", q.Driver())
		return
	}
	if n := depth(); n != 0 {
		t.Fatalf("a fresh queue holds %d messages", n)
	}
	for i := range 3 {
		if _, err := q.Send(ctx, []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := depth(); n != 3 {
		t.Fatalf("depth after 3 sends: %d", n)
	}
	ms, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: 5 * time.Second, Lease: time.Minute})
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v %v", ms, err)
	}
	if n := depth(); n != 3 {
		t.Fatalf("depth with one message leased: %d, want 3", n)
	}
	if err := q.Ack(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	if n := depth(); n != 2 {
		t.Fatalf("depth after an ack: %d, want 2", n)
	}
}
