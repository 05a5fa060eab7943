package ssf

import (
	"context"
	"slices"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// FaultInjector decides where executions crash; tests use it to kill an instance at every
// external step. Inject is consulted before and after each store operation and each call to
// another SSF made on behalf of an execution; a non-nil error (normally ErrCrashed) makes that
// operation fail as if the process had died there. "After" means the operation took effect and
// only its reply is lost: the ambiguity a timeout creates in a real cloud.
type FaultInjector interface {
	Inject(ctx context.Context, p FaultPoint) error
}

// FaultPoint is one place an execution can crash.
type FaultPoint struct {
	SSF string
	// Instance is the executing instance; "callback:CALLEE" while recording a callback, and
	// CollectorIC or CollectorGC during a collector pass (collectors need only at-least-once
	// execution: a crashed pass is finished by the next).
	Instance string
	Op       string // get, update, scan, delete, batch, commit (a store transaction), call, callback
	Key      store.Key
	// Batch is a batch's keys, in order (Key is the first): a write that rides in one batch
	// with log entries (on a store whose batches apply all or nothing) is found by its key here.
	Batch []store.Key
	After bool
}

// Writes reports whether the point is at a write request (an update or a batch) that names a
// row of partition: its key, or any of a batch's.
func (p FaultPoint) Writes(partition string) bool {
	switch p.Op {
	case "update":
		return p.Key.Partition == partition
	case "batch":
		return slices.ContainsFunc(p.Batch, func(k store.Key) bool { return k.Partition == partition })
	}
	return false
}

// Instance names of collector passes in FaultPoints.
const (
	CollectorIC = "collector:ic"
	CollectorGC = "collector:gc"
)

// OneAtATime is implemented by a FaultInjector that must see an execution's requests one after
// another (the schedule explorer, which runs one request at a time): the runtime then sends what
// it would send side by side, a transaction's ends in the SSFs it called, in turn.
type OneAtATime interface {
	OneAtATime() bool
}

// oneAtATime reports whether the fault injector asks for one request at a time.
func (rt *Runtime) oneAtATime() bool {
	s, ok := rt.cfg.Faults.(OneAtATime)
	return ok && s.OneAtATime()
}

type execInfoKey struct{}

type execInfo struct {
	ssf, instance string
}

func withExec(ctx context.Context, ssf, instance string) context.Context {
	return context.WithValue(ctx, execInfoKey{}, execInfo{ssf: ssf, instance: instance})
}

func (rt *Runtime) inject(ctx context.Context, op string, key store.Key, after bool) error {
	return rt.injectAt(ctx, FaultPoint{Op: op, Key: key, After: after})
}

// injectAt is inject of point p, which names the operation, its key(s) and the side.
func (rt *Runtime) injectAt(ctx context.Context, p FaultPoint) error {
	if rt.cfg.Faults == nil {
		return nil
	}
	info, ok := ctx.Value(execInfoKey{}).(execInfo)
	if !ok {
		return nil // not on behalf of an execution or a collector pass (an inspection)
	}
	p.SSF, p.Instance = rt.cfg.Name, info.instance
	return rt.cfg.Faults.Inject(ctx, p)
}

// faultyDriver puts injection points around every store operation.
type faultyDriver struct {
	store.Driver
	rt *Runtime
}

// aroundBatch puts one pair of points, naming every key of ups, around a batch.
func (f faultyDriver) aroundBatch(ctx context.Context, ups []store.BatchUpdate, do func() error) error {
	keys := make([]store.Key, len(ups))
	for i, u := range ups {
		keys[i] = u.Key
	}
	return f.aroundAt(ctx, FaultPoint{Op: "batch", Key: ups[0].Key, Batch: keys}, do)
}

func (f faultyDriver) around(ctx context.Context, op string, key store.Key, do func() error) error {
	return f.aroundAt(ctx, FaultPoint{Op: op, Key: key}, do)
}

// aroundAt puts point p before do and after it.
func (f faultyDriver) aroundAt(ctx context.Context, p FaultPoint, do func() error) error {
	if err := f.rt.injectAt(ctx, p); err != nil {
		return err
	}
	if err := do(); err != nil {
		return err
	}
	p.After = true
	return f.rt.injectAt(ctx, p)
}

func (f faultyDriver) Get(ctx context.Context, key store.Key) (a store.Attrs, found bool, err error) {
	err = f.around(ctx, "get", key, func() (e error) { a, found, e = f.Driver.Get(ctx, key); return })
	return
}

// GetProjected forwards store.ProjectedGetter, with Get's injection points.
func (f faultyDriver) GetProjected(ctx context.Context, key store.Key, proj []store.Path) (a store.Attrs, found bool, err error) {
	err = f.around(ctx, "get", key, func() (e error) { a, found, e = store.GetProjected(ctx, f.Driver, key, proj); return })
	return
}

func (f faultyDriver) Update(ctx context.Context, key store.Key, c store.Cond, u store.Update) (r store.UpdateResult, err error) {
	err = f.around(ctx, "update", key, func() (e error) { r, e = f.Driver.Update(ctx, key, c, u); return })
	return
}

func (f faultyDriver) Scan(ctx context.Context, partition string, o store.ScanOptions) (rows []store.Row, err error) {
	err = f.around(ctx, "scan", store.Key{Partition: partition}, func() (e error) { rows, e = f.Driver.Scan(ctx, partition, o); return })
	return
}

func (f faultyDriver) Delete(ctx context.Context, key store.Key, c store.Cond) (ok bool, err error) {
	err = f.around(ctx, "delete", key, func() (e error) { ok, e = f.Driver.Delete(ctx, key, c); return })
	return
}

func (f faultyDriver) DeleteBlind(ctx context.Context, key store.Key) error {
	return f.around(ctx, "delete", key, func() error { return store.DeleteBlind(ctx, f.Driver, key) })
}

// Presume sends nothing, so it has no injection points.
func (f faultyDriver) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(f.Driver, key, attrs)
}

// UpdateBatch keeps the injection points of each update when the store has no batch request,
// and puts one around the batch when it has.
func (f faultyDriver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, err error) {
	if _, ok := f.Driver.(store.Batcher); !ok {
		return store.UpdateEach(ctx, f, ups)
	}
	err = f.aroundBatch(ctx, ups, func() (e error) { rs, e = store.UpdateBatch(ctx, f.Driver, ups); return })
	return
}

// UpdateBatchAtomic puts one pair of points around the batch (store.AtomicBatcher, which the
// runtime asks for only where the store has it): a crash before it leaves nothing, after it all.
func (f faultyDriver) UpdateBatchAtomic(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, applied bool, err error) {
	err = f.aroundBatch(ctx, ups, func() (e error) {
		rs, applied, e = f.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, ups)
		return
	})
	return
}

// UpdateBatchFinal puts one pair of points around the batch, as UpdateBatch, when the store has
// it (store.FinalBatcher): a crash after it may follow the transaction's commit.
func (f faultyDriver) UpdateBatchFinal(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, committed bool, err error) {
	fb, ok := f.Driver.(store.FinalBatcher)
	if !ok {
		rs, err = f.UpdateBatch(ctx, ups)
		return rs, false, err
	}
	err = f.aroundBatch(ctx, ups, func() (e error) { rs, committed, e = fb.UpdateBatchFinal(ctx, ups); return })
	return
}
