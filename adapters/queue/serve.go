package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"
)

// Handler processes one message. Returning nil acknowledges it; an error retries it after a
// backoff, or moves it to the dead-letter queue once it has been delivered MaxAttempts times;
// an error wrapped by Poison moves it there at once. The handler must not use m.Handle, which
// lease renewal updates concurrently.
type Handler func(ctx context.Context, m *Message) error

// PoisonError marks a message no retry can fix, such as a body that does not decode.
type PoisonError struct{ Err error }

func (e *PoisonError) Error() string { return "poison message: " + e.Err.Error() }
func (e *PoisonError) Unwrap() error { return e.Err }

// Poison wraps err so that Serve dead-letters the message without retrying it.
func Poison(err error) error { return &PoisonError{Err: err} }

// ServeOptions configure Serve.
type ServeOptions struct {
	// DeadLetter receives a DeadLetter record for each poison message (required). Serve writes
	// the record before it acknowledges the message, so a crash in between duplicates the
	// record rather than losing the message.
	DeadLetter *Queue
	// Concurrency bounds the handlers running at once (default 8).
	Concurrency int
	// MaxAttempts is how many deliveries a failing message gets before it is dead-lettered
	// (default 5). A message that arrives with more attempts than that (its handlers crashed or
	// outlived their leases) is dead-lettered without running the handler.
	MaxAttempts int
	// Lease is how long a received message stays hidden (default DefaultLease); Serve renews
	// it every Lease/2 while the handler runs, so it bounds how soon a crashed consumer's
	// messages are delivered again, not how long a handler may take.
	Lease time.Duration
	// Wait is how long one Receive waits for messages (default 20 s, SQS's longest long poll).
	Wait time.Duration
	// Backoff gives the delay before a failed message is delivered again, from the attempts so
	// far. The default doubles from 1 s up to 5 min, with jitter; it is capped at the queue's
	// Limits().MaxLease.
	Backoff func(attempts int) time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Serve defaults.
const (
	DefaultConcurrency = 8
	DefaultMaxAttempts = 5
	DefaultWait        = 20 * time.Second
)

// settleTimeout bounds an ack, retry or dead-letter write, which run even while Serve stops:
// a handler's outcome is worth recording, but a hung backend must not hang shutdown.
const settleTimeout = 30 * time.Second

// Serve receives messages from q and runs h on each, at most Concurrency at a time, until ctx
// ends; then it waits for running handlers (whose context is cancelled) and returns nil. It
// returns an error if the queue is closed, missing or misconfigured; other receive failures
// are logged and retried with backoff.
func Serve(ctx context.Context, q *Queue, h Handler, o ServeOptions) error {
	if o.DeadLetter == nil || o.DeadLetter == q {
		return fmt.Errorf("%w: queue %s: ServeOptions.DeadLetter must be a second queue, where poison messages go", ErrInvalid, q.Name())
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Backoff == nil {
		o.Backoff = defaultBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &server{q: q, h: h, o: o, log: o.Logger.With("queue", q.Name())}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	failures := 0
	for {
		// Wait for one free slot, then take every other free one, so one Receive fills them.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	fill:
		for n < o.Concurrency {
			select {
			case sem <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		ms, err := q.Receive(ctx, ReceiveOptions{Max: n, Wait: o.Wait, Lease: o.Lease})
		for range n - len(ms) {
			<-sem
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
				return err
			}
			failures++
			delay := min(100*time.Millisecond<<min(failures, 6), 5*time.Second)
			s.log.Warn("receive failed; retrying", "err", err, "in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		failures = 0
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				s.process(ctx, m)
			}()
		}
	}
}

func defaultBackoff(attempts int) time.Duration {
	d := min(time.Second<<min(max(attempts-1, 0), 9), 5*time.Minute)
	return d/2 + rand.N(d/2+1) // jitter spreads a burst of failures out
}

type server struct {
	q      *Queue
	h      Handler
	o      ServeOptions
	log    *slog.Logger
	warned sync.Once
}

func (s *server) process(ctx context.Context, m *Message) {
	log := s.log.With("message", m.ID, "attempts", m.Attempts)
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if m.Attempts == 0 {
		s.warned.Do(func() {
			s.log.Warn("the queue does not count deliveries, so MaxAttempts cannot apply: a message that always fails is retried until the backend drops it (for Pub/Sub, give the subscription a dead-letter policy)")
		})
	}
	if m.Attempts > s.o.MaxAttempts {
		s.deadLetter(settle, log, m, fmt.Errorf("delivered %d times (limit %d) without being acknowledged: its handler crashed or outlived its lease", m.Attempts, s.o.MaxAttempts))
		return
	}
	err := s.run(ctx, m)
	var poison *PoisonError
	switch {
	case err == nil:
		if err := s.q.Ack(settle, m); err != nil {
			log.Warn("ack failed; the message will be delivered again", "err", err)
		}
	case errors.As(err, &poison):
		s.deadLetter(settle, log, m, err)
	case ctx.Err() != nil:
		// Serve is stopping, which is no fault of the message: hand it back at once rather
		// than at the lease's end.
		s.retry(settle, log, m, 0)
	case m.Attempts >= s.o.MaxAttempts:
		s.deadLetter(settle, log, m, err)
	default:
		delay := s.o.Backoff(m.Attempts)
		log.Info("handler failed; retrying later", "err", err, "in", delay)
		s.retry(settle, log, m, delay)
	}
}

// run calls the handler, renewing the lease while it runs and turning a panic into an error.
func (s *server) run(ctx context.Context, m *Message) (err error) {
	hctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(s.o.Lease / 2)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				// Not under hctx: an extension cut off mid-request could change the lease
				// handle (Azure's pop receipt) without telling us.
				ectx, ecancel := context.WithTimeout(context.WithoutCancel(hctx), s.o.Lease/2)
				if err := s.q.Extend(ectx, m, s.o.Lease); err != nil {
					s.log.Warn("lease renewal failed; the message may be delivered again while its handler runs", "message", m.ID, "err", err)
				}
				ecancel()
			}
		}
	}()
	defer func() {
		cancel()
		<-renewed // the handle is ours again
	}()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", "message", m.ID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return s.h(hctx, m)
}

func (s *server) retry(ctx context.Context, log *slog.Logger, m *Message, delay time.Duration) {
	if err := s.q.Retry(ctx, m, min(delay, s.q.Limits().MaxLease)); err != nil {
		log.Warn("retry failed; the message will be delivered again when its lease ends", "err", err)
	}
}

// deadLetter writes m's record to the dead-letter queue, then acknowledges m. If the record
// cannot be written, m stays in its queue.
func (s *server) deadLetter(ctx context.Context, log *slog.Logger, m *Message, cause error) {
	rec := NewDeadLetter(s.q.Name(), m, cause, time.Now())
	omitted, err := WriteDeadLetter(ctx, s.o.DeadLetter, rec)
	switch {
	case omitted:
		// Keep the message where it is, out of the way for as long as the backend allows (its
		// native dead-letter policy, if any, takes it from there); the record says why.
		if err != nil {
			log.Error("writing a dead-letter record failed", "err", err)
		}
		log.Error("poison message too large for the dead-letter queue; parked in its own queue", "cause", rec.Error, "bytes", len(m.Body))
		s.retry(ctx, log, m, s.q.Limits().MaxLease)
	case err != nil:
		log.Error("dead-letter queue unavailable; the poison message stays in its queue", "cause", rec.Error, "err", err)
		s.retry(ctx, log, m, s.o.Backoff(m.Attempts))
	default:
		log.Warn("poison message moved to the dead-letter queue", "dead_letter", s.o.DeadLetter.Name(), "cause", rec.Error)
		if err := s.q.Ack(ctx, m); err != nil {
			log.Warn("ack after dead-lettering failed; the message will be delivered (and dead-lettered) again", "err", err)
		}
	}
}
