// Package local hosts SSFs in one process: the transport between them is a function call, and
// asynchronous starts are goroutines. It is what `ssfkit dev`, the demo and the tests run on;
// the same handlers run unchanged on cloud hosts.
//
// Imports (docs/architecture.md): the runtime, the portable APIs and adapters/host (what every
// host shares); never the test kit.
package local

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/ssfkit/ssfkit/adapters/host"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Host runs SSF runtimes in-process and implements ssf.Transport between them.
type Host struct {
	mu       sync.RWMutex
	runtimes map[string]*ssf.Runtime
	spawned  sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
	// Logger receives the host's warnings (failed collector passes, lost executions); nil
	// means slog.Default().
	Logger *slog.Logger
	// Sequential queues spawned requests instead of starting goroutines; Wait runs them one at
	// a time. Tests use it so that every run of a scenario executes the same steps in the same
	// order, and "crash at step k" means the same step each time.
	Sequential bool
	// SpawnCopies delivers every asynchronous start this many times (0 or 1: once), the way
	// at-least-once queues and asynchronous invocations do; in concurrent mode the copies run
	// at the same time. Tests use it to duplicate and redeliver starts.
	SpawnCopies int
	queue       []spawn
	// queues route SSFs' asynchronous starts through message queues (see UseQueue).
	queues map[string]*queue.Queue
	// logTables hold shared logs the garbage collection rounds collect (CollectLogs).
	logTables []*store.Table
}

type spawn struct {
	rt  *ssf.Runtime
	req ssf.Request
}

// NewHost returns an empty host.
func NewHost() *Host {
	ctx, cancel := context.WithCancel(context.Background())
	return &Host{runtimes: map[string]*ssf.Runtime{}, ctx: ctx, cancel: cancel}
}

// Add creates the runtime for cfg with this host as its transport, claims its table
// (ssf.Runtime.ClaimTable) and registers it.
func (h *Host) Add(cfg ssf.Config) (*ssf.Runtime, error) {
	cfg.Transport = h
	rt, err := ssf.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	if err := rt.ClaimTable(ctx); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.runtimes[cfg.Name]; dup {
		return nil, fmt.Errorf("local: SSF %s registered twice", cfg.Name)
	}
	h.runtimes[cfg.Name] = rt
	return rt, nil
}

// Runtime returns the registered runtime named name.
func (h *Host) Runtime(name string) (*ssf.Runtime, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	rt, ok := h.runtimes[name]
	return rt, ok
}

// Runtimes returns every registered runtime, by name.
func (h *Host) Runtimes() []*ssf.Runtime {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*ssf.Runtime, 0, len(h.runtimes))
	for _, rt := range h.runtimes {
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func (h *Host) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

func (h *Host) lookup(name string) (*ssf.Runtime, error) {
	rt, ok := h.Runtime(name)
	if !ok {
		return nil, fmt.Errorf("local: no SSF named %q is registered", name)
	}
	return rt, nil
}

// Call implements ssf.Transport.
func (h *Host) Call(ctx context.Context, name string, req ssf.Request) (ssf.Result, error) {
	rt, err := h.lookup(name)
	if err != nil {
		return ssf.Result{}, err
	}
	return rt.Handle(ctx, req)
}

// Spawn implements ssf.Transport: the request runs on its own goroutine, detached from the
// caller's context (an asynchronous start outlives its caller), or is sent to the SSF's queue
// if it has one (UseQueue).
func (h *Host) Spawn(ctx context.Context, name string, req ssf.Request) error {
	rt, err := h.lookup(name)
	if err != nil {
		return err
	}
	if q := h.queueFor(name); q != nil {
		return enqueue(ctx, q, req)
	}
	for range max(h.SpawnCopies, 1) {
		if h.Sequential {
			h.mu.Lock()
			h.queue = append(h.queue, spawn{rt: rt, req: req})
			h.mu.Unlock()
			continue
		}
		h.spawned.Add(1)
		go func() {
			defer h.spawned.Done()
			if _, err := rt.Handle(h.ctx, req); err != nil {
				h.logger().Debug("spawned execution did not complete", "ssf", name, "instance", req.InstanceID, "err", err)
			}
		}()
	}
	return nil
}

// Invoke sends a top-level request, as a platform would: requestID is the instance id (the
// platform's request id), so retrying with the same id never runs the request twice.
func (h *Host) Invoke(ctx context.Context, name, requestID string, input any) (ssf.Result, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return ssf.Result{}, fmt.Errorf("local: input for %s is not JSON-encodable: %w", name, err)
	}
	rt, err := h.lookup(name)
	if err != nil {
		return ssf.Result{}, err
	}
	return rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: requestID, Input: in})
}

// Wait blocks until every spawned execution has returned; in Sequential mode it runs the queued
// ones, including those they spawn, in order.
func (h *Host) Wait() {
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.mu.Unlock()
			break
		}
		next := h.queue[0]
		h.queue = h.queue[1:]
		h.mu.Unlock()
		if _, err := next.rt.Handle(h.ctx, next.req); err != nil {
			h.logger().Debug("spawned execution did not complete", "ssf", next.rt.Name(), "instance", next.req.InstanceID, "err", err)
		}
	}
	h.spawned.Wait()
}

// Close cancels spawned executions and waits for them.
func (h *Host) Close() {
	h.cancel()
	h.spawned.Wait()
}

// CollectorReport is what one round of collectors did across the host's SSFs.
type CollectorReport struct {
	IC map[string]ssf.ICReport
	GC map[string]ssf.GCReport
	// Logs is what the garbage collection round did to the shared logs in the SSFs' tables and
	// in the tables given to CollectLogs, summed.
	Logs sharedlog.CollectReport
}

// CollectLogs adds a table whose shared logs the garbage collection rounds collect, besides
// the SSFs' own tables (which they always collect): a log the SSFs share lives in a table of
// its own.
func (h *Host) CollectLogs(tbl *store.Table) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logTables = append(h.logTables, tbl)
}

// collectLogs runs the shared logs' collector once on every table given to CollectLogs that is
// not an SSF's own (the SSFs' garbage collection passes collect those).
func (h *Host) collectLogs(ctx context.Context) sharedlog.CollectReport {
	h.mu.RLock()
	tables := slices.Clone(h.logTables)
	h.mu.RUnlock()
	var rep sharedlog.CollectReport
	seen := map[*store.Table]bool{}
	for _, rt := range h.Runtimes() {
		seen[rt.Config().Store] = true
	}
	for _, tbl := range tables {
		if seen[tbl] {
			continue
		}
		seen[tbl] = true
		r, err := sharedlog.CollectTable(ctx, tbl, sharedlog.Options{})
		if err != nil && ctx.Err() == nil {
			h.logger().Warn("shared log collection failed; the next pass retries", "table", tbl.Name(), "err", err)
		}
		rep.Add(r)
	}
	return rep
}

// RunCollectors runs every SSF's intent collector every icEvery and garbage collector every
// gcEvery (zero disables one) until ctx ends, as timer-triggered functions do in the cloud.
// onRound, if set, receives each round's reports.
func (h *Host) RunCollectors(ctx context.Context, icEvery, gcEvery time.Duration, onRound func(CollectorReport)) {
	tick := func(every time.Duration) <-chan time.Time {
		if every <= 0 {
			return nil
		}
		t := time.NewTicker(every)
		go func() { <-ctx.Done(); t.Stop() }()
		return t.C
	}
	icTick, gcTick := tick(icEvery), tick(gcEvery)
	for {
		rep := CollectorReport{}
		select {
		case <-ctx.Done():
			return
		case <-icTick:
			rep.IC = map[string]ssf.ICReport{}
			for _, rt := range h.Runtimes() {
				r, err := rt.CollectIntents(ctx)
				if err != nil && ctx.Err() == nil {
					h.logger().Warn("intent collector pass failed; the next pass retries", "ssf", rt.Name(), "err", err)
				}
				rep.IC[rt.Name()] = r
			}
			h.mu.RLock()
			queues := maps.Clone(h.queues)
			h.mu.RUnlock()
			for name, q := range queues {
				if err := queue.RecordDepth(ctx, q); err != nil && ctx.Err() == nil {
					h.logger().Warn("cannot read the queue's depth", "ssf", name, "err", err)
				}
			}
		case <-gcTick:
			rep.GC = map[string]ssf.GCReport{}
			for _, rt := range h.Runtimes() {
				r, err := host.CollectGarbage(ctx, rt) // the pass every host runs
				if err != nil && ctx.Err() == nil {
					h.logger().Warn("garbage collector pass failed; the next pass retries", "ssf", rt.Name(), "err", err)
				}
				rep.GC[rt.Name()] = r.GCReport
				rep.Logs.Add(r.Logs)
			}
			rep.Logs.Add(h.collectLogs(ctx))
		}
		if onRound != nil {
			onRound(rep)
		}
	}
}
