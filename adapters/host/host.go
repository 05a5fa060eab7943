// Package host holds what every cloud function host shares: the SSF's configuration as the
// Terraform modules set it (SSFKIT_* settings, docs/modules.md) and opening the SSF's store,
// queue and runtime from it. The hosts themselves are lambdahost (AWS Lambda) and httphost
// (Azure Functions custom handlers and Cloud Run).
//
// Imports (docs/architecture.md): the runtime and the portable store and queue APIs; never a
// host of its own wing (they import it) or the test kit.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Config is one SSF's configuration, from its function's environment (ConfigFromEnv).
type Config struct {
	SSF         string // SSFKIT_SSF
	Environment string // SSFKIT_ENVIRONMENT: the environment's name
	Store       string // SSFKIT_STORE
	Queue       string // SSFKIT_QUEUE
	// DeadLetterQueue (SSFKIT_DEAD_LETTER_QUEUE, optional) receives a queue.DeadLetter record
	// for every instance the collectors record as failed (given up or abandoned).
	DeadLetterQueue string
	Lifetime        time.Duration
	GCBound         time.Duration
	RelaunchDelay   time.Duration
	// KeyRetention and ExpiredKeyRetention: how long a collected instance's answer is kept,
	// and then how long its expired id is still refused (ssf.Config).
	KeyRetention        time.Duration
	ExpiredKeyRetention time.Duration
	// MaxAttempts bounds the intent collector's launches of an unfinished instance
	// (SSFKIT_MAX_ATTEMPTS; ssf.Config.MaxAttempts).
	MaxAttempts int
	// MaxReceiveCount is how many times the platform delivers a failing start before its own
	// dead-letter policy moves it (SSFKIT_MAX_RECEIVE_COUNT, the module's max_receive_count:
	// SQS's maxReceiveCount, the queue trigger's maxDequeueCount, Pub/Sub's
	// max_delivery_attempts); 0 if unknown. On that delivery the host dead-letters a start
	// that fails itself, with the reason (Function.HandleQueued).
	MaxReceiveCount int
	// Peers are the base URLs of the functions of the SSFs this one calls, by SSF name
	// (SSFKIT_PEERS, a JSON object; the HTTP hosts' modules set it).
	Peers map[string]string
	// Provenance is what the SSF records for provenance (SSFKIT_PROVENANCE: off, the default,
	// metadata or full), exported by its garbage collector to ProvenanceSink
	// (SSFKIT_PROVENANCE_SINK, a sink URL: the environment's bucket; docs/provenance.md).
	Provenance     provenance.Capture
	ProvenanceSink string
}

// ConfigFromEnv reads an SSF's configuration; getenv is os.Getenv outside tests. The errors
// name the setting, for the function's init failure report.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{SSF: getenv("SSFKIT_SSF"), Environment: getenv("SSFKIT_ENVIRONMENT"),
		Store: getenv("SSFKIT_STORE"), Queue: getenv("SSFKIT_QUEUE"), DeadLetterQueue: getenv("SSFKIT_DEAD_LETTER_QUEUE")}
	for _, s := range []struct{ name, value string }{{"SSFKIT_SSF", c.SSF}, {"SSFKIT_ENVIRONMENT", c.Environment}, {"SSFKIT_STORE", c.Store}, {"SSFKIT_QUEUE", c.Queue}} {
		if s.value == "" {
			return c, fmt.Errorf("%s is not set (the ssf module sets it)", s.name)
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"SSFKIT_LIFETIME_SECONDS", &c.Lifetime}, {"SSFKIT_GC_BOUND_SECONDS", &c.GCBound}, {"SSFKIT_RELAUNCH_DELAY_SECONDS", &c.RelaunchDelay},
		{"SSFKIT_KEY_RETENTION_SECONDS", &c.KeyRetention}, {"SSFKIT_EXPIRED_KEY_RETENTION_SECONDS", &c.ExpiredKeyRetention}} {
		raw := getenv(d.name)
		if raw == "" {
			continue // the runtime's default
		}
		s, err := strconv.Atoi(raw)
		if err != nil || s <= 0 {
			return c, fmt.Errorf("%s=%q must be a positive whole number of seconds", d.name, raw)
		}
		*d.to = time.Duration(s) * time.Second
	}
	for _, n := range []struct {
		name string
		to   *int
	}{{"SSFKIT_MAX_ATTEMPTS", &c.MaxAttempts}, {"SSFKIT_MAX_RECEIVE_COUNT", &c.MaxReceiveCount}} {
		raw := getenv(n.name)
		if raw == "" {
			continue
		}
		v, err := strconv.Atoi(raw)
		if err != nil || v <= 0 {
			return c, fmt.Errorf("%s=%q must be a positive whole number", n.name, raw)
		}
		*n.to = v
	}
	if raw := getenv("SSFKIT_QUEUE_MESSAGE_TTL_SECONDS"); raw != "" {
		// The ssf module bounds how long a start may wait in the queue below T (docs/protocol.md,
		// "Delivery windows"); only Azure Storage queues take it from the sender.
		u, err := queue.ParseURL(c.Queue)
		if err != nil {
			return c, fmt.Errorf("SSFKIT_QUEUE: %w", err)
		}
		if s, err := strconv.Atoi(raw); err != nil || s <= 0 {
			return c, fmt.Errorf("SSFKIT_QUEUE_MESSAGE_TTL_SECONDS=%q must be a positive whole number of seconds", raw)
		}
		if u.Scheme != "azqueue" {
			return c, fmt.Errorf("SSFKIT_QUEUE_MESSAGE_TTL_SECONDS is set, but queue %s takes no time-to-live from its sender (only azqueue:// does)", u.Redacted())
		}
		sep := "?"
		if strings.Contains(c.Queue, "?") {
			sep = "&"
		}
		c.Queue += sep + "message_ttl=" + raw
	}
	capture, err := provenance.ParseCapture(getenv("SSFKIT_PROVENANCE"))
	if err != nil {
		return c, fmt.Errorf("SSFKIT_PROVENANCE: %v", err)
	}
	c.Provenance, c.ProvenanceSink = capture, getenv("SSFKIT_PROVENANCE_SINK")
	if capture != provenance.CaptureOff && c.ProvenanceSink == "" {
		return c, fmt.Errorf("SSFKIT_PROVENANCE=%s needs SSFKIT_PROVENANCE_SINK, the sink URL its records go to", capture)
	}
	if raw := getenv("SSFKIT_PEERS"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Peers); err != nil {
			return c, fmt.Errorf("SSFKIT_PEERS must be a JSON object of SSF names to URLs: %v", err)
		}
		for name, base := range c.Peers {
			if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return c, fmt.Errorf("SSFKIT_PEERS: the URL of %s, %q, is not an http(s) URL", name, base)
			}
		}
	}
	return c, nil
}

// Function is an SSF opened from its configuration: its runtime and its own queue.
type Function struct {
	Config     Config
	Runtime    *ssf.Runtime
	Queue      *queue.Queue
	DeadLetter *queue.Queue // nil without Config.DeadLetterQueue
	provenance provenance.Sink
}

// Open opens the SSF's store and queue and builds its runtime. handlers are the application's
// SSF handlers by name; the one named cfg.SSF is served. transport builds the runtime's way to
// reach other SSFs, given the SSF's own queue (where its own asynchronous starts go).
func Open(ctx context.Context, cfg Config, handlers map[string]ssf.Handler, transport func(own *queue.Queue) ssf.Transport) (*Function, error) {
	handler, ok := handlers[cfg.SSF]
	if !ok {
		return nil, fmt.Errorf("this artifact has no SSF named %q (SSFKIT_SSF); it has %d others: build it from the application that defines %s", cfg.SSF, len(handlers), cfg.SSF)
	}
	tbl, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("SSF %s: %w", cfg.SSF, err)
	}
	q, err := queue.Open(ctx, cfg.Queue)
	if err != nil {
		tbl.Close()
		return nil, fmt.Errorf("SSF %s: %w", cfg.SSF, err)
	}
	f := &Function{Config: cfg, Queue: q}
	rcfg := ssf.Config{Name: cfg.SSF, Store: tbl, Handler: handler, Lifetime: cfg.Lifetime, GCBound: cfg.GCBound,
		RelaunchDelay: cfg.RelaunchDelay, KeyRetention: cfg.KeyRetention, ExpiredKeyRetention: cfg.ExpiredKeyRetention, MaxAttempts: cfg.MaxAttempts, Transport: transport(q),
		Provenance: cfg.Provenance}
	if cfg.Provenance != "" && cfg.Provenance != provenance.CaptureOff {
		if f.provenance, err = provenance.Open(ctx, cfg.ProvenanceSink); err != nil {
			q.Close()
			tbl.Close()
			return nil, fmt.Errorf("SSF %s: SSFKIT_PROVENANCE_SINK: %w", cfg.SSF, err)
		}
		rcfg.ProvenanceSink = f.provenance
	}
	if cfg.DeadLetterQueue != "" {
		if f.DeadLetter, err = queue.Open(ctx, cfg.DeadLetterQueue); err != nil {
			q.Close()
			tbl.Close()
			return nil, fmt.Errorf("SSF %s: dead-letter queue: %w", cfg.SSF, err)
		}
		rcfg.OnFailure = f.deadLetter
	}
	f.Runtime, err = ssf.New(rcfg)
	if err == nil {
		err = f.Runtime.ClaimTable(ctx)
	}
	if err != nil {
		f.closeQueues()
		tbl.Close()
		return nil, err
	}
	return f, nil
}

// GarbageReport is what a pass of an SSF's garbage collector did: the runtime's collection and
// that of the shared logs kept in the SSF's table.
type GarbageReport struct {
	ssf.GCReport
	Logs sharedlog.CollectReport
}

// CollectIntents is the intent collector function: one pass of the runtime's, and the depth of
// the SSF's queue (ssf.queue.depth), which a backlog of starts shows in.
func (f *Function) CollectIntents(ctx context.Context) (ssf.ICReport, error) {
	rep, err := f.Runtime.CollectIntents(ctx)
	if derr := queue.RecordDepth(ctx, f.Queue); derr != nil {
		slog.Warn("cannot read the queue's depth", "ssf", f.Config.SSF, "err", derr)
	}
	return rep, err
}

// CollectGarbage is the garbage collector function: one pass of CollectGarbage.
func (f *Function) CollectGarbage(ctx context.Context) (GarbageReport, error) {
	return CollectGarbage(ctx, f.Runtime)
}

// CollectGarbage is one garbage collection pass of an SSF, on every host: the runtime's
// collector, then the shared logs' in the SSF's table (their trimmed records, unfinished
// multi-color appends).
func CollectGarbage(ctx context.Context, rt *ssf.Runtime) (GarbageReport, error) {
	gc, err := rt.CollectGarbage(ctx)
	if err != nil {
		return GarbageReport{GCReport: gc}, err
	}
	logs, err := sharedlog.CollectTable(ctx, rt.Config().Store, sharedlog.Options{})
	return GarbageReport{GCReport: gc, Logs: logs}, err
}

// deadLetter sends the record of an instance the collectors recorded as failed: its failures
// span its first execution to its last.
func (f *Function) deadLetter(ctx context.Context, failed ssf.Failure) error {
	rec := queue.DeadLetter{Source: "ssf://" + failed.SSF, MessageID: failed.InstanceID, Attempts: failed.Launches,
		Error: failed.Error, FirstFailure: failed.FirstExecution, LastFailure: failed.LastExecution, Time: failed.Time}
	_, err := queue.WriteDeadLetter(ctx, f.DeadLetter, rec)
	return err
}

// deadLetterTimeout bounds the write of a dead-letter record after a queued start failed.
const deadLetterTimeout = 10 * time.Second

// HandleQueued runs one asynchronous start the platform delivered from the SSF's queue
// (m.Attempts is the platform's delivery count, 0 if it does not say) and reports whether the
// platform is done with it: nil, or the error for which it must deliver the message again.
//
// The host dead-letters what it can itself, so that the record says why: a poison message (a
// body that is not a request, a request the runtime refuses), and a start that fails on the
// platform's last delivery (m.Attempts at least Config.MaxReceiveCount), are written to the
// dead-letter queue as a queue.DeadLetter with its message attributes, and reported done. The
// platform's own dead-lettering, which moves the message without a reason, remains for what
// the host could not record: a delivery that crashed or timed out, a dead-letter queue that
// could not be written, a record too large for it (its body is kept for the platform to move),
// or a platform count the host did not see (docs/queues.md lists them).
func (f *Function) HandleQueued(ctx context.Context, m *queue.Message) error {
	err := QueueHandler(f.Runtime)(ctx, m)
	if err == nil {
		return nil
	}
	var poison *queue.PoisonError
	last := f.Config.MaxReceiveCount > 0 && m.Attempts >= f.Config.MaxReceiveCount
	log := slog.With("ssf", f.Config.SSF, "message", m.ID, "attempt", m.Attempts, "err", err)
	if f.DeadLetter == nil || !errors.As(err, &poison) && !last {
		log.Error("asynchronous start failed; the platform will deliver it again")
		return err
	}
	// The write outlives a request cut short: the handler may have failed for that very reason.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadLetterTimeout)
	defer cancel()
	omitted, werr := queue.WriteDeadLetter(wctx, f.DeadLetter, queue.NewDeadLetter(f.Queue.Name(), m, err, time.Now()))
	switch {
	case werr != nil:
		log.Error("asynchronous start failed, and writing its dead-letter record failed too; the platform will deliver it again, or dead-letter it without a reason", "dead_letter_err", werr)
		return err
	case omitted:
		log.Error("asynchronous start failed; its dead-letter record went without its body (too large), so the platform keeps the message and dead-letters it")
		return err
	}
	log.Warn("asynchronous start dead-lettered", "dead_letter", f.DeadLetter.Name(), "poison", poison != nil)
	return nil
}

// Close releases the store and the queues.
func (f *Function) Close() {
	f.closeQueues()
	f.Runtime.Config().Store.Close()
}

func (f *Function) closeQueues() {
	f.Queue.Close()
	if f.DeadLetter != nil {
		f.DeadLetter.Close()
	}
	if f.provenance != nil {
		f.provenance.Close()
	}
}
