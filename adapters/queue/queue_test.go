package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/memqueue"
)

func memQueue(limit int) *queue.Queue {
	return queue.New(memqueue.New(limit), "mem://test")
}

// recorder is a driver decorator that records the durations the Queue passes down.
type recorder struct {
	queue.Driver
	mu        sync.Mutex
	max       int
	durations []time.Duration
	extends   chan *queue.Message
	retries   chan time.Duration
}

func (r *recorder) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	r.mu.Lock()
	r.max, r.durations = n, append(r.durations, lease)
	r.mu.Unlock()
	return r.Driver.Receive(ctx, n, wait, lease)
}

func (r *recorder) Retry(ctx context.Context, m *queue.Message, delay time.Duration) error {
	r.mu.Lock()
	r.durations = append(r.durations, delay)
	r.mu.Unlock()
	select {
	case r.retries <- delay:
	default:
	}
	return r.Driver.Retry(ctx, m, delay)
}

func (r *recorder) Extend(ctx context.Context, m *queue.Message, lease time.Duration) error {
	select {
	case r.extends <- m: // a nil channel, or no test waiting: not reported
	default:
	}
	return r.Driver.Extend(ctx, m, lease)
}

func TestArguments(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{Driver: memqueue.New(100)}
	q := queue.New(rec, "mem://args")
	if _, err := q.Send(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1000, Lease: 1500 * time.Millisecond})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive: %v %v", ms, err)
	}
	if err := q.Retry(ctx, ms[0], time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if rec.max != q.Limits().MaxBatch || rec.durations[0] != 2*time.Second || rec.durations[1] != time.Second {
		t.Errorf("driver got max %d (want %d) and durations %v (want [2s 1s]): whole seconds, rounded up", rec.max, q.Limits().MaxBatch, rec.durations)
	}
	for name, err := range map[string]error{
		"lease over the maximum": func() error {
			_, err := q.Receive(ctx, queue.ReceiveOptions{Lease: q.Limits().MaxLease + time.Second})
			return err
		}(),
		"negative wait":  func() error { _, err := q.Receive(ctx, queue.ReceiveOptions{Wait: -1}); return err }(),
		"negative delay": q.Retry(ctx, ms[0], -time.Second),
		"zero extension": q.Extend(ctx, ms[0], 0),
		"empty body":     func() error { _, err := q.Send(ctx, nil); return err }(),
	} {
		if !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := q.Send(ctx, make([]byte, 101)); !errors.Is(err, queue.ErrTooLarge) || !strings.Contains(err.Error(), "mem://args") {
		t.Errorf("oversized body: %v, want ErrTooLarge naming the queue", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, bad := range []string{"", "  ", "jobs", "mem:jobs", "mem://q?a=%zz", "://x"} {
		if _, err := queue.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) succeeded", bad)
		}
	}
	u, err := queue.ParseURL("SQS://id:secret@jobs?region=eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "sqs" || u.Host != "jobs" || u.User.Username() != "id" || u.Param("region", "") != "eu-west-1" || u.Param("x", "d") != "d" {
		t.Errorf("parsed %+v", u)
	}
	if r := u.Redacted(); strings.Contains(r, "secret") {
		t.Errorf("Redacted() = %q reveals the secret", r)
	}
	_, err = queue.Open(context.Background(), "nosuch://id:secret@x")
	if err == nil || !strings.Contains(err.Error(), `unknown URL scheme "nosuch"`) || !strings.Contains(err.Error(), "mem") || strings.Contains(err.Error(), "secret") {
		t.Errorf("unknown scheme: %v", err)
	}
}

// serve runs queue.Serve until the returned stop is called; stop returns Serve's error.
func serve(t *testing.T, q *queue.Queue, h queue.Handler, o queue.ServeOptions) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if o.Backoff == nil {
		o.Backoff = func(int) time.Duration { return 0 }
	}
	if o.Wait == 0 {
		o.Wait = 100 * time.Millisecond
	}
	o.Logger = slog.New(slog.DiscardHandler)
	go func() { done <- queue.Serve(ctx, q, h, o) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// deadLetters receives n records from dlq.
func deadLetters(t *testing.T, dlq *queue.Queue, n int) []queue.DeadLetter {
	t.Helper()
	var out []queue.DeadLetter
	for len(out) < n {
		ms, err := dlq.Receive(t.Context(), queue.ReceiveOptions{Max: n - len(out), Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			rec, err := queue.ParseDeadLetter(m.Body)
			if err != nil {
				t.Fatalf("dead-letter queue holds %q: %v", m.Body, err)
			}
			out = append(out, rec)
		}
	}
	return out
}

func TestServe(t *testing.T) {
	q, dlq := memQueue(1<<10), memQueue(1<<10)
	const n = 20
	var mu sync.Mutex
	runs := map[string]int{}
	handled := make(chan string, 100)
	stop := serve(t, q, func(ctx context.Context, m *queue.Message) error {
		mu.Lock()
		runs[string(m.Body)]++
		r := runs[string(m.Body)]
		mu.Unlock()
		switch {
		case string(m.Body) == "undecodable":
			return queue.Poison(errors.New("body is not JSON"))
		case string(m.Body) == "always fails":
			return fmt.Errorf("failure %d", r)
		case string(m.Body) == "panics":
			panic("boom")
		case r == 1 && m.Attempts == 1:
			return errors.New("transient") // every good message fails once
		}
		handled <- string(m.Body)
		return nil
	}, queue.ServeOptions{DeadLetter: dlq, Concurrency: 4, MaxAttempts: 3})
	ids := map[string]string{}
	for _, body := range []string{"undecodable", "always fails", "panics"} {
		id, err := q.Send(t.Context(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		ids[body] = id
	}
	for i := range n {
		if _, err := q.Send(t.Context(), fmt.Appendf(nil, "job %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-handled
	}
	recs := deadLetters(t, dlq, 3)
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, r := range recs {
		body := string(r.Body)
		want := map[string]struct {
			attempts int
			err      string
		}{
			"undecodable":  {1, "poison message: body is not JSON"},
			"always fails": {3, "failure 3"},
			"panics":       {3, "handler panicked: boom"},
		}[body]
		if r.Source != "mem://test" || r.MessageID != ids[body] || r.Attempts != want.attempts || r.Error != want.err || r.Time.IsZero() {
			t.Errorf("dead-letter record %+v, want attempts %d and error %q", r, want.attempts, want.err)
		}
	}
	for body, r := range runs {
		if want := map[string]int{"undecodable": 1, "always fails": 3, "panics": 3}[body]; want != 0 && r != want {
			t.Errorf("%s ran %d times, want %d", body, r, want)
		} else if want == 0 && r != 2 {
			t.Errorf("%s ran %d times, want 2 (one failure, one success)", body, r)
		}
	}
	if ms, err := q.Receive(t.Context(), queue.ReceiveOptions{Lease: time.Second}); err != nil || len(ms) != 0 {
		t.Errorf("messages left in the queue: %d, %v", len(ms), err)
	}
}

// A message whose handlers never finished (crashed consumers) is dead-lettered without running.
func TestServeExhaustedAttempts(t *testing.T) {
	q, dlq := memQueue(1<<10), memQueue(1<<10)
	id, _ := q.Send(t.Context(), []byte("crashes the process"))
	for range 3 { // three consumers took it and died
		ms, err := q.Receive(t.Context(), queue.ReceiveOptions{})
		if err != nil || len(ms) != 1 {
			t.Fatal(ms, err)
		}
		q.Retry(t.Context(), ms[0], 0)
	}
	var ran atomic.Bool
	serve(t, q, func(context.Context, *queue.Message) error { ran.Store(true); return nil }, queue.ServeOptions{DeadLetter: dlq, MaxAttempts: 3})
	r := deadLetters(t, dlq, 1)[0]
	if r.MessageID != id || r.Attempts != 4 || !strings.Contains(r.Error, "delivered 4 times (limit 3)") || string(r.Body) != "crashes the process" {
		t.Errorf("record %+v", r)
	}
	if ran.Load() {
		t.Error("the handler ran on a message past its attempts")
	}
}

// A record too large for the dead-letter queue says so, and the message stays in its queue.
func TestServeDeadLetterTooLarge(t *testing.T) {
	q, dlq := memQueue(1<<11), memQueue(1000) // a record and its attributes take about 500 bytes
	rec := &recorder{Driver: q.Driver(), retries: make(chan time.Duration, 1)}
	q = queue.New(rec, "mem://test")
	id, _ := q.Send(t.Context(), []byte(strings.Repeat("x", 1000)))
	serve(t, q, func(context.Context, *queue.Message) error { return queue.Poison(errors.New("bad")) }, queue.ServeOptions{DeadLetter: dlq})
	r := deadLetters(t, dlq, 1)[0]
	if r.MessageID != id || r.Body != nil || r.BodyOmittedBytes != 1000 {
		t.Errorf("record %+v, want the body omitted", r)
	}
	// Parked: retried with the longest delay the backend allows, not acknowledged.
	if d := <-rec.retries; d != q.Limits().MaxLease {
		t.Errorf("retried with delay %v, want %v", d, q.Limits().MaxLease)
	}
}

func TestServeRenewsLease(t *testing.T) {
	rec := &recorder{Driver: memqueue.New(100), extends: make(chan *queue.Message)}
	q, dlq := queue.New(rec, "mem://test"), memQueue(1<<10)
	q.Send(t.Context(), []byte("slow"))
	done := make(chan struct{})
	serve(t, q, func(ctx context.Context, m *queue.Message) error {
		<-done
		return nil
	}, queue.ServeOptions{DeadLetter: dlq, Lease: time.Second})
	for range 2 { // the handler outlives two half-leases: two renewals
		if m := <-rec.extends; string(m.Body) != "slow" {
			t.Fatalf("renewed %q", m.Body)
		}
	}
	close(done)
	for { // acknowledged: the queue ends up empty
		ms, err := q.Receive(t.Context(), queue.ReceiveOptions{Wait: 100 * time.Millisecond, Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		q.Retry(t.Context(), ms[0], 0)
	}
}

func TestServeErrors(t *testing.T) {
	q := memQueue(100)
	if err := queue.Serve(context.Background(), q, nil, queue.ServeOptions{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("without a dead-letter queue: %v", err)
	}
	if err := queue.Serve(context.Background(), q, nil, queue.ServeOptions{DeadLetter: q}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("dead-lettering into the queue itself: %v", err)
	}
	done := make(chan error)
	go func() {
		done <- queue.Serve(context.Background(), q, func(context.Context, *queue.Message) error { return nil },
			queue.ServeOptions{DeadLetter: memQueue(100), Wait: 10 * time.Millisecond})
	}()
	q.Close()
	if err := <-done; !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Serve on a closed queue: %v, want ErrClosed", err)
	}
}

func TestDeadLetterEncoding(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		rec  queue.DeadLetter
		wire string
	}{
		{queue.DeadLetter{Source: "s", MessageID: "1", Attempts: 2, Error: "e", Time: at, Body: []byte(`{"a":"<b>"}`)},
			`{"source":"s","message_id":"1","attempts":2,"error":"e","time":"2025-01-02T03:04:05.000000006Z","body":"{\"a\":\"<b>\"}"}`},
		{queue.DeadLetter{Source: "s", MessageID: "1", Time: at, Body: []byte{0xff, 0}},
			`{"source":"s","message_id":"1","attempts":0,"error":"","time":"2025-01-02T03:04:05.000000006Z","body_base64":"/wA="}`},
		{queue.DeadLetter{Source: "s", MessageID: "1", Time: at, BodyOmittedBytes: 70000},
			`{"source":"s","message_id":"1","attempts":0,"error":"","time":"2025-01-02T03:04:05.000000006Z","body_omitted_bytes":70000}`},
		{queue.DeadLetter{Source: "s", MessageID: "1", Attempts: 3, Error: "e", FirstFailure: at.Add(-time.Minute), LastFailure: at, Time: at,
			Attributes: map[string]string{"k": "v"}, Body: []byte("b")},
			`{"source":"s","message_id":"1","attempts":3,"error":"e","first_failure":"2025-01-02T03:03:05.000000006Z","last_failure":"2025-01-02T03:04:05.000000006Z","time":"2025-01-02T03:04:05.000000006Z","attributes":{"k":"v"},"body":"b"}`},
	} {
		if got := string(tc.rec.Encode()); got != tc.wire {
			t.Errorf("Encode:\n got %s\nwant %s", got, tc.wire)
		}
		back, err := queue.ParseDeadLetter([]byte(tc.wire))
		if err != nil || fmt.Sprint(back) != fmt.Sprint(tc.rec) {
			t.Errorf("ParseDeadLetter(%s) = %+v, %v", tc.wire, back, err)
		}
	}
	for _, bad := range []string{"", "{}", `{"source":"s"}`, "[1]"} {
		if _, err := queue.ParseDeadLetter([]byte(bad)); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("ParseDeadLetter(%q): %v", bad, err)
		}
	}
}

func TestRedrive(t *testing.T) {
	ctx := t.Context()
	dlq, target := memQueue(1<<10), memQueue(1<<10)
	for _, body := range [][]byte{
		queue.DeadLetter{Source: "s", MessageID: "1", Body: []byte("one")}.Encode(),
		[]byte("not a record"),
		queue.DeadLetter{Source: "s", MessageID: "2", BodyOmittedBytes: 5000}.Encode(),
		queue.DeadLetter{Source: "s", MessageID: "3", Body: []byte{0xff}}.Encode(),
	} {
		if _, err := dlq.Send(ctx, body); err != nil {
			t.Fatal(err)
		}
	}
	moved, skipped, err := queue.Redrive(ctx, dlq, target, 100)
	if err != nil || moved != 2 || skipped != 2 {
		t.Fatalf("Redrive: moved %d, skipped %d, %v; want 2, 2", moved, skipped, err)
	}
	ms, err := target.Receive(ctx, queue.ReceiveOptions{Max: 10})
	if err != nil || len(ms) != 2 || string(ms[0].Body) != "one" || string(ms[1].Body) != "\xff" || ms[0].Attempts != 1 {
		t.Fatalf("target holds %v, %v", ms, err)
	}
}

func TestAttributeValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "-",
		"plain":                 "plain",
		"tab\tand\nline":        "tab\tand\nline",
		"nul\x00esc\x1b":        "nul\ufffdesc\ufffd",
		"bad \xff utf8":         "bad \ufffd utf8",
		"non-character \uffff.": "non-character \ufffd.",
	} {
		if got := queue.AttributeValue(in); got != want || queue.CheckAttributes(map[string]string{"a": got}) != nil {
			t.Errorf("AttributeValue(%q) = %q, want %q (a valid value)", in, got, want)
		}
	}
	// Long values are cut at a character boundary and marked.
	for _, unit := range []string{"x", "é", "✓", "😀"} {
		long := strings.Repeat(unit, 2000)
		got := queue.AttributeValue(long)
		if len(got) > queue.MaxAttributeValueBytes || len(got) < queue.MaxAttributeValueBytes-len(unit)-3 ||
			!strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) || queue.CheckAttributes(map[string]string{"a": got}) != nil {
			t.Errorf("AttributeValue of 2000 × %q: %d bytes, %q...", unit, len(got), got[:20])
		}
	}
	if exact := strings.Repeat("x", queue.MaxAttributeValueBytes); queue.AttributeValue(exact) != exact {
		t.Error("AttributeValue cut a value at the limit")
	}
}

func TestEnvelope(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []queue.Envelope{
		{Body: []byte("plain")},
		{Body: []byte(queue.EnvelopePrefix + "{}}\nlooks like one")},
		{Attributes: map[string]string{"a": "1", "b": "<&>\n\"x\"\u2028"}, Body: []byte("body\nwith lines")},
		{Attributes: map[string]string{"a": "1"}, FirstReceived: at, Body: []byte{0xff, '\n', 0}},
		{FirstReceived: at, Body: []byte("x")},
	} {
		b := e.Encode()
		if len(b) != e.Size() {
			t.Errorf("%+v: Size %d, encoded %d", e, e.Size(), len(b))
		}
		if len(e.Attributes) == 0 && e.FirstReceived.IsZero() && !bytes.HasPrefix(e.Body, []byte(queue.EnvelopePrefix)) && !bytes.Equal(b, e.Body) {
			t.Errorf("a body without attributes was enveloped: %q", b)
		}
		back := queue.DecodeEnvelope(b)
		if !bytes.Equal(back.Body, e.Body) || !maps.Equal(back.Attributes, e.Attributes) || !back.FirstReceived.Equal(e.FirstReceived) {
			t.Errorf("%q decoded as %+v, want %+v", b, back, e)
		}
	}
	// What is not a valid header is body.
	for _, b := range []string{queue.EnvelopePrefix + `5}` + "\nx", queue.EnvelopePrefix + `{}}`, "x" + queue.EnvelopePrefix + "{}}\nx"} {
		if e := queue.DecodeEnvelope([]byte(b)); string(e.Body) != b || e.Attributes != nil {
			t.Errorf("DecodeEnvelope(%q) = %+v, want all body", b, e)
		}
	}
	if got := string(queue.Envelope{Attributes: map[string]string{"k": "v"}, Body: []byte("b")}.Encode()); got != `{"ssfkit-attributes":{"k":"v"}}`+"\nb" {
		t.Errorf("the documented format changed: %q", got)
	}
}

func TestAttributesChecked(t *testing.T) {
	q := memQueue(100)
	if _, err := q.SendWithAttributes(t.Context(), []byte("x"), map[string]string{"a b": "v"}); !errors.Is(err, queue.ErrInvalid) ||
		!strings.Contains(err.Error(), `"a b"`) || !strings.Contains(err.Error(), "mem://test") {
		t.Errorf("a bad name: %v, want ErrInvalid naming the attribute and the queue", err)
	}
	if _, err := q.SendWithAttributes(t.Context(), make([]byte, 90), map[string]string{"k": "v"}); !errors.Is(err, queue.ErrTooLarge) ||
		!strings.Contains(err.Error(), "with its attributes") {
		t.Errorf("body and attributes over the limit: %v, want ErrTooLarge", err)
	}
}

func TestNewDeadLetter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	sent, first := now.Add(-time.Hour), now.Add(-time.Minute)
	for _, tc := range []struct {
		m    queue.Message
		want time.Time
	}{
		{queue.Message{Attempts: 1, Sent: sent, FirstReceived: first}, now}, // first delivery: it failed now
		{queue.Message{Attempts: 3, Sent: sent, FirstReceived: first}, first},
		{queue.Message{Attempts: 3, Sent: sent}, sent},
		{queue.Message{Attempts: 0, Sent: sent}, sent}, // not counted: perhaps not the first
		{queue.Message{Attempts: 3}, now},
		{queue.Message{Attempts: 3, FirstReceived: now.Add(time.Minute)}, now}, // a clock ahead of ours
	} {
		tc.m.ID = "id"
		rec := queue.NewDeadLetter("mem://q", &tc.m, errors.New("why"), now)
		if !rec.FirstFailure.Equal(tc.want) || !rec.LastFailure.Equal(now) || !rec.Time.Equal(now) {
			t.Errorf("%+v: first failure %v, last %v; want %v, %v", tc.m, rec.FirstFailure, rec.LastFailure, tc.want, now)
		}
	}
	long := strings.Repeat("é", queue.MaxErrorBytes)
	rec := queue.NewDeadLetter("mem://q", &queue.Message{ID: "id", Attempts: 2, FirstReceived: first, Attributes: map[string]string{"x": "y"}}, errors.New(long), now)
	if len(rec.Error) > queue.MaxErrorBytes || !utf8.ValidString(rec.Error) || !strings.HasSuffix(rec.Error, "...") {
		t.Errorf("error of %d bytes kept as %d bytes (valid UTF-8: %v)", len(long), len(rec.Error), utf8.ValidString(rec.Error))
	}
	want := map[string]string{queue.AttrSource: "mem://q", queue.AttrMessageID: "id", queue.AttrAttempts: "2",
		queue.AttrFirstFailure: "2025-06-01T11:59:00Z", queue.AttrLastFailure: "2025-06-01T12:00:00Z", queue.AttrError: queue.AttributeValue(rec.Error)}
	if got := rec.MessageAttributes(); !maps.Equal(got, want) || queue.CheckAttributes(got) != nil {
		t.Errorf("MessageAttributes() = %q, want %q", got, want)
	}
	if rec.Attributes["x"] != "y" {
		t.Errorf("the record lost the message's attributes: %v", rec.Attributes)
	}
}
