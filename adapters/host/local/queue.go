package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ssfkit/ssfkit/adapters/host"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// UseQueue routes the asynchronous starts of the SSF name through q, the way cloud hosts start
// them (SQS to Lambda, Storage Queues to Functions, Pub/Sub to Cloud Run): Spawn sends the
// JSON-encoded ssf.Request to q instead of starting a goroutine, and ServeQueues runs what q
// delivers. Queues deliver at least once, and that is enough: a duplicate delivery re-executes
// the same instance, which replays its logs. Wait does not wait for queued starts.
func (h *Host) UseQueue(name string, q *queue.Queue) error {
	if _, err := h.lookup(name); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.queues[name]; dup {
		return fmt.Errorf("local: SSF %s already has a queue", name)
	}
	if h.queues == nil {
		h.queues = map[string]*queue.Queue{}
	}
	h.queues[name] = q
	return nil
}

func (h *Host) queueFor(name string) *queue.Queue {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.queues[name]
}

// enqueue sends an asynchronous start. If it fails, the runtime logs it and the intent
// collector runs the instance later, as for any lost start.
func enqueue(ctx context.Context, q *queue.Queue, req ssf.Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = q.Send(ctx, b)
	return err
}

// ServeQueues consumes the queue of every SSF given to UseQueue, running each request on its
// SSF with queue.Serve and the options o (o.DeadLetter, which receives the records of poison
// messages from every queue, is required). It returns nil once ctx ends and every consumer has
// stopped, or the first consumer's error, after stopping the others.
func (h *Host) ServeQueues(ctx context.Context, o queue.ServeOptions) error {
	h.mu.RLock()
	serving := map[*ssf.Runtime]*queue.Queue{}
	for name, q := range h.queues {
		serving[h.runtimes[name]] = q
	}
	h.mu.RUnlock()
	if len(serving) == 0 {
		return errors.New("local: no SSF has a queue; call UseQueue first")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(serving))
	for rt, q := range serving {
		go func() { errs <- queue.Serve(ctx, q, host.QueueHandler(rt), o) }()
	}
	var first error
	for range serving {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
