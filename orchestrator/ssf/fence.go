package ssf

import (
	"context"
	"fmt"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// An execution's lifetime fence. The garbage collector removes an instance's logs T after it
// finished; an execution that could still act then would find no log and act again. So every
// execution gets a deadline, Lifetime after a moment taken *before* it first read the
// instance's intent (an execution that saw the instance unfinished started before it
// finished), and every store request and transport call it makes is checked against that
// deadline just before it is sent, not once per operation: a straggler paused for any length
// resumes with at most one request in flight, and the protocol is built so that any single
// request of a stale execution is harmless (see docs/protocol.md, "Fencing"). The store then
// decides that last request by its own condition: a DAAL write needs its step unlogged in the
// current tail, which the collector never prunes; a logged read, invocation or completion
// needs its row absent or equal; a request to a collected instance meets its tombstone.

type fence struct {
	clock    Clock
	started  time.Time
	deadline time.Time
	lifetime time.Duration
}

type fenceKey struct{}

// DeadlineMargin is how long before a request's Deadline its execution stops: the sender's
// clock may be that far ahead of the executor's, and the last request sent must land before
// the sender acts on the failure.
const DeadlineMargin = time.Second

// startFence starts an execution's lifetime now and returns a context carrying it. A request
// deadline (Request.Deadline, 0 for none) shortens it.
func (rt *Runtime) startFence(ctx context.Context, requestDeadline int64) (context.Context, *fence) {
	now := rt.clock.Now()
	f := &fence{clock: rt.clock, started: now, deadline: now.Add(rt.cfg.Lifetime), lifetime: rt.cfg.Lifetime}
	if requestDeadline != 0 {
		if d := time.Unix(0, requestDeadline).Add(-DeadlineMargin); d.Before(f.deadline) {
			f.deadline, f.lifetime = d, d.Sub(now)
		}
	}
	return context.WithValue(ctx, fenceKey{}, f), f
}

// expired reports whether the execution outlived its lifetime, by the wall clock (a process
// or VM suspended for an hour has lived that hour, though the monotonic clock skips it).
func (f *fence) expired() error {
	if f.clock.Now().UnixNano() > f.deadline.UnixNano() {
		return fmt.Errorf("%w (%v)", ErrLifetimeExceeded, f.lifetime)
	}
	return nil
}

// checkFence fails when ctx belongs to an execution past its lifetime; collectors and
// inspections carry no fence.
func checkFence(ctx context.Context) error {
	if f, ok := ctx.Value(fenceKey{}).(*fence); ok {
		return f.expired()
	}
	return nil
}

// fencedDriver checks the fence before every request, as the outermost layer: a pause after
// the check (which fault injection and the schedule explorer place there) is one request in
// flight.
type fencedDriver struct {
	store.Driver
	batches bool // the store itself applies a batch in one request (store.Batcher)
}

func newFencedDriver(d, raw store.Driver) fencedDriver {
	_, batches := raw.(store.Batcher)
	return fencedDriver{Driver: d, batches: batches}
}

func (f fencedDriver) Get(ctx context.Context, key store.Key) (a store.Attrs, found bool, err error) {
	if err = checkFence(ctx); err != nil {
		return nil, false, err
	}
	ctx, end := storeSpan(ctx, "get", key.Partition)
	defer end(&err)
	return f.Driver.Get(ctx, key)
}

// GetProjected forwards store.ProjectedGetter, fenced as Get is.
func (f fencedDriver) GetProjected(ctx context.Context, key store.Key, proj []store.Path) (a store.Attrs, found bool, err error) {
	if err = checkFence(ctx); err != nil {
		return nil, false, err
	}
	ctx, end := storeSpan(ctx, "get", key.Partition)
	defer end(&err)
	return store.GetProjected(ctx, f.Driver, key, proj)
}

func (f fencedDriver) Update(ctx context.Context, key store.Key, c store.Cond, u store.Update) (r store.UpdateResult, err error) {
	if err = checkFence(ctx); err != nil {
		return store.UpdateResult{}, err
	}
	ctx, end := storeSpan(ctx, "update", key.Partition)
	defer end(&err)
	return f.Driver.Update(ctx, key, c, u)
}

func (f fencedDriver) Scan(ctx context.Context, partition string, o store.ScanOptions) (rows []store.Row, err error) {
	if err = checkFence(ctx); err != nil {
		return nil, err
	}
	ctx, end := storeSpan(ctx, "scan", partition)
	defer end(&err)
	return f.Driver.Scan(ctx, partition, o)
}

func (f fencedDriver) Delete(ctx context.Context, key store.Key, c store.Cond) (ok bool, err error) {
	if err = checkFence(ctx); err != nil {
		return false, err
	}
	ctx, end := storeSpan(ctx, "delete", key.Partition)
	defer end(&err)
	return f.Driver.Delete(ctx, key, c)
}

// DeleteBlind is checked like any request (the store may send it with the next one).
func (f fencedDriver) DeleteBlind(ctx context.Context, key store.Key) (err error) {
	if err = checkFence(ctx); err != nil {
		return err
	}
	ctx, end := storeSpan(ctx, "delete", key.Partition)
	defer end(&err)
	return store.DeleteBlind(ctx, f.Driver, key)
}

// Presume sends nothing, so it needs no check.
func (f fencedDriver) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(f.Driver, key, attrs)
}

// UpdateBatch is one request where the store batches, else one per update, each checked.
func (f fencedDriver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, err error) {
	if !f.batches {
		return store.UpdateEach(ctx, f, ups)
	}
	if err = checkFence(ctx); err != nil {
		return nil, err
	}
	ctx, end := storeSpan(ctx, "batch", ups[0].Key.Partition)
	defer end(&err)
	return store.UpdateBatch(ctx, f.Driver, ups)
}

// UpdateBatchFinal is one request, checked, where the store has it (store.FinalBatcher); else
// UpdateBatch, which never commits.
func (f fencedDriver) UpdateBatchFinal(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, committed bool, err error) {
	fb, ok := f.Driver.(store.FinalBatcher)
	if !ok {
		rs, err = f.UpdateBatch(ctx, ups)
		return rs, false, err
	}
	if err = checkFence(ctx); err != nil {
		return nil, false, err
	}
	ctx, end := storeSpan(ctx, "batch", ups[0].Key.Partition)
	defer end(&err)
	return fb.UpdateBatchFinal(ctx, ups)
}

// UpdateBatchAtomic is one request, checked, where the store has it (store.AtomicBatcher); the
// runtime asks only then (Runtime.atomicBatches).
func (f fencedDriver) UpdateBatchAtomic(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, applied bool, err error) {
	if err = checkFence(ctx); err != nil {
		return nil, false, err
	}
	ctx, end := storeSpan(ctx, "batch", ups[0].Key.Partition)
	defer end(&err)
	return f.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, ups)
}

// call sends req through the transport after checking the fence and the fault points.
func (rt *Runtime) call(ctx context.Context, ssfName string, req Request, point string, key store.Key) (Result, error) {
	if err := checkFence(ctx); err != nil {
		return Result{}, err
	}
	if err := rt.inject(ctx, point, key, false); err != nil {
		return Result{}, err
	}
	res, err := rt.cfg.Transport.Call(ctx, ssfName, req)
	if err != nil {
		return Result{}, err
	}
	return res, rt.inject(ctx, point, key, true)
}
