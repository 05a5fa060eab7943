// Package bench measures ssfkit's exactly-once operations against raw store operations, the way
// Beldi's §7.3 microbenchmark does, and the length of a linked DAAL over time with and without
// garbage collection (§7.5). `ssfkit bench` and the Go benchmarks of this package share it.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // mem:// stores
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Op is one of the operations Beldi's microbenchmark measures, plus a read-modify-write.
type Op int

// The measured operations. ReadModifyWrite (a read, then a write of the same key) shows where a
// read's log entry goes: it is deferred to the next externally visible effect and written in
// the same batch as that effect's first request where the store batches.
const (
	Read Op = iota
	Write
	CondWrite
	SyncInvoke
	ReadModifyWrite
)

// Ops lists the measured operations in report order.
var Ops = [numOps]Op{Read, Write, CondWrite, SyncInvoke, ReadModifyWrite}

const numOps = 5

func (o Op) String() string {
	switch o {
	case Read:
		return "Read"
	case Write:
		return "Write"
	case CondWrite:
		return "CondWrite"
	case SyncInvoke:
		return "SyncInvoke"
	case ReadModifyWrite:
		return "ReadModifyWrite"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

const (
	callerName = "bench"
	calleeName = "bench_callee"
	dataTable  = "bench"
	valueBase  = 1_000_000_000_000_000 // values are 16-digit JSON numbers: Beldi's 16-byte values
)

// condHolds is the condition of every conditional write: it holds, so the write applies, which
// is the costlier outcome.
var condHolds = store.MustParseCond("$ >= 0")

// SuiteConfig configures a Suite.
type SuiteConfig struct {
	// StoreURL is the store of the benchmarked SSF; the callee of SyncInvoke gets a sibling
	// table. Empty means a fresh SQLite file in a temporary directory that Close removes.
	StoreURL string
	// RowCapacity, Lifetime and GCBound configure the runtimes; zero values take ssf's defaults.
	RowCapacity       int
	Lifetime, GCBound time.Duration
	// Provenance and ProvenanceSink configure both SSFs' provenance capture (off by default).
	Provenance     provenance.Capture
	ProvenanceSink provenance.Sink
}

// Suite is an SSF whose instances run benchmark code, a callee SSF that does nothing, and the
// raw equivalents of their operations, all on one store whose requests are counted.
type Suite struct {
	host           *local.Host
	caller, callee *ssf.Runtime
	table          *store.Table // the caller's table; the raw rows live there too
	calleeTable    *store.Table
	counter        Counter
	clock          offsetClock
	raw            rawTransport
	run            string // makes keys and instance ids unique when a store is reused
	seq            atomic.Int64
	bodies         sync.Map // instance id -> func(*ssf.Env) error
	tmpDir         string
	dropTables     bool
}

// NewSuite opens the store and starts the two SSFs on an in-process host.
func NewSuite(ctx context.Context, cfg SuiteConfig) (*Suite, error) {
	s := &Suite{host: local.NewHost(), run: uuid.NewString()[:8]}
	if err := s.start(ctx, cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Suite) start(ctx context.Context, cfg SuiteConfig) (err error) {
	url := cfg.StoreURL
	if url == "" {
		if s.tmpDir, err = os.MkdirTemp("", "ssfkit-bench-"); err != nil {
			return fmt.Errorf("bench: temporary store: %w", err)
		}
		url = "sqlite://" + filepath.Join(s.tmpDir, "bench.db")
	}
	// Tables named through the placeholder are the benchmark's own: Close drops them.
	s.dropTables = strings.Contains(url, store.TablePlaceholder)
	expand := func(u string) string { return strings.ReplaceAll(u, store.TablePlaceholder, "b"+s.run) }
	if s.table, err = openCounted(ctx, expand(url), &s.counter); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	calleeURL, err := siblingURL(url, "callee")
	if err != nil {
		return err
	}
	if s.calleeTable, err = openCounted(ctx, expand(calleeURL), &s.counter); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	base := ssf.Config{RowCapacity: cfg.RowCapacity, Lifetime: cfg.Lifetime, GCBound: cfg.GCBound, Clock: &s.clock,
		Provenance: cfg.Provenance, ProvenanceSink: cfg.ProvenanceSink}
	callerCfg, calleeCfg := base, base
	callerCfg.Name, callerCfg.Store, callerCfg.Handler = callerName, s.table, s.handle
	calleeCfg.Name, calleeCfg.Store, calleeCfg.Handler = calleeName, s.calleeTable, nothing
	if s.caller, err = s.host.Add(callerCfg); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if s.callee, err = s.host.Add(calleeCfg); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	s.raw.fns = map[string]rawFunc{calleeName: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}
	return nil
}

// Close stops the host, closes the tables and removes a temporary store.
func (s *Suite) Close() error {
	s.host.Close()
	var errs []error
	for _, t := range []*store.Table{s.table, s.calleeTable} {
		if t == nil {
			continue
		}
		if d, ok := t.Driver().(store.Dropper); ok && s.dropTables {
			errs = append(errs, d.Drop(context.Background()))
		}
		errs = append(errs, t.Close())
	}
	if s.tmpDir != "" {
		errs = append(errs, os.RemoveAll(s.tmpDir))
	}
	return errors.Join(errs...)
}

// Store is the benchmarked SSF's table (its redacted URL).
func (s *Suite) Store() string { return s.table.Name() }

// Runtime is the benchmarked SSF.
func (s *Suite) Runtime() *ssf.Runtime { return s.caller }

// Counter counts every request to both SSFs' tables, raw operations included.
func (s *Suite) Counter() *Counter { return &s.counter }

func nothing(*ssf.Env, json.RawMessage) (any, error) { return nil, nil }

// handle is the benchmarked SSF's handler: it runs the body registered for its instance.
func (s *Suite) handle(env *ssf.Env, _ json.RawMessage) (any, error) {
	if body, ok := s.bodies.Load(env.InstanceID()); ok {
		return nil, body.(func(*ssf.Env) error)(env)
	}
	return nil, nil
}

// Instance runs body inside a new instance of the benchmarked SSF and returns when the instance
// is done. A nil body makes an instance that does nothing: what remains is the cost of an
// instance itself (creating its intent, marking it done). Safe for concurrent use.
func (s *Suite) Instance(ctx context.Context, body func(*ssf.Env) error) error {
	id := s.run + "-" + strconv.FormatInt(s.seq.Add(1), 10)
	if body != nil {
		s.bodies.Store(id, body)
		defer s.bodies.Delete(id)
	}
	res, err := s.host.Invoke(ctx, callerName, id, nil)
	if err != nil {
		return err
	}
	return res.Err()
}

// Item is one data item, as a raw row and as a linked DAAL of the benchmarked SSF.
type Item struct {
	table, key string
	raw        store.Key
	seq        atomic.Int64
}

// next returns a new 16-byte value for the item.
func (it *Item) next() int64 { return valueBase + it.seq.Add(1) }

// NewItem creates an item whose linked DAAL has rows rows (at least 1). With more than one, the
// rows are filled by an instance that never finishes: its lifetime expires, as when a host kills
// a function at its timeout, and with no intent collector running it stays pending. The garbage
// collector keeps every row holding a log entry of a pending instance, so however often it runs,
// the list keeps at least these rows, as in Beldi's §7.3, which populates the key with 20 rows.
func (s *Suite) NewItem(ctx context.Context, rows int) (*Item, error) {
	rows = max(rows, 1)
	key := s.run + "_" + strconv.Itoa(rows)
	it := &Item{table: dataTable, key: key, raw: store.Key{Partition: "raw|" + key, Sort: "0"}}
	if err := s.table.Put(ctx, it.raw, store.Attrs{"Value": rawValue(it.next()), "N": int64(0)}); err != nil {
		return nil, fmt.Errorf("bench: raw row: %w", err)
	}
	writes, pin := 1, rows > 1
	if pin {
		writes = (rows-1)*s.caller.Config().RowCapacity + 1
	}
	err := s.Instance(ctx, func(env *ssf.Env) error {
		for range writes {
			if err := env.Write(it.table, it.key, json.RawMessage(strconv.FormatInt(it.next(), 10))); err != nil {
				return err
			}
		}
		if pin {
			s.clock.advance(s.caller.Config().Lifetime + time.Nanosecond)
		}
		return nil
	})
	if pin && errors.Is(err, ssf.ErrLifetimeExceeded) {
		err = nil
	} else if pin && err == nil {
		err = errors.New("the instance holding the DAAL's rows finished; it must stay pending")
	}
	if err != nil {
		return nil, fmt.Errorf("bench: growing the DAAL to %d rows: %w", rows, err)
	}
	shape, err := s.DAAL(ctx, it)
	if err != nil {
		return nil, err
	}
	if shape.Reachable != rows {
		return nil, fmt.Errorf("bench: grew the DAAL to %d rows, want %d", shape.Reachable, rows)
	}
	return it, nil
}

// DAAL returns the shape of the item's linked DAAL.
func (s *Suite) DAAL(ctx context.Context, it *Item) (ssf.DAALShape, error) {
	shape, err := s.caller.DAAL(ctx, it.table, it.key)
	if err != nil {
		return shape, fmt.Errorf("bench: DAAL of %s/%s: %w", it.table, it.key, err)
	}
	return shape, nil
}

func rawValue(v int64) []byte { return strconv.AppendInt(nil, v, 10) }

// Raw performs op once without ssfkit's runtime: Beldi's baseline. Read is one strongly
// consistent Get of a plain row; Write one unconditional Update; CondWrite one Update
// conditional on an attribute; SyncInvoke a call of a plain Go function through a transport
// like the in-process host's (a lookup under a lock and JSON-encoded input).
func (s *Suite) Raw(ctx context.Context, op Op, it *Item) error {
	var err error
	switch op {
	case Read:
		var found bool
		if _, found, err = s.table.Get(ctx, it.raw); err == nil && !found {
			err = fmt.Errorf("raw row %s vanished", it.raw)
		}
	case Write:
		_, err = s.table.Update(ctx, it.raw, store.Always(), store.Update{store.SetAttr(store.Attr("Value"), rawValue(it.next()))})
	case CondWrite:
		v := it.next()
		var r store.UpdateResult
		r, err = s.table.Update(ctx, it.raw, store.Compare(store.Attr("N"), store.Ge, int64(0)),
			store.Update{store.SetAttr(store.Attr("Value"), rawValue(v)), store.SetAttr(store.Attr("N"), v)})
		if err == nil && !r.Applied {
			err = errors.New("raw conditional write: condition unexpectedly false")
		}
	case SyncInvoke:
		_, err = s.raw.Call(ctx, calleeName, nil)
	case ReadModifyWrite:
		if _, _, err = s.table.Get(ctx, it.raw); err == nil {
			_, err = s.table.Update(ctx, it.raw, store.Always(), store.Update{store.SetAttr(store.Attr("Value"), rawValue(it.next()))})
		}
	default:
		err = fmt.Errorf("unknown operation %v", op)
	}
	if err != nil {
		return fmt.Errorf("bench: raw %v: %w", op, err)
	}
	return nil
}

// EO performs op once, exactly once, through the instance's environment.
func (s *Suite) EO(env *ssf.Env, op Op, it *Item) error {
	var err error
	switch op {
	case Read:
		_, err = env.Read(it.table, it.key)
	case Write:
		err = env.Write(it.table, it.key, json.RawMessage(strconv.FormatInt(it.next(), 10)))
	case CondWrite:
		var ok bool
		ok, err = env.CondWrite(it.table, it.key, json.RawMessage(strconv.FormatInt(it.next(), 10)), condHolds)
		if err == nil && !ok {
			err = errors.New("exactly-once conditional write: condition unexpectedly false")
		}
	case SyncInvoke:
		_, err = env.SyncInvoke(calleeName, nil)
	case ReadModifyWrite:
		if _, err = env.Read(it.table, it.key); err == nil {
			err = env.Write(it.table, it.key, json.RawMessage(strconv.FormatInt(it.next(), 10)))
		}
	default:
		err = fmt.Errorf("unknown operation %v", op)
	}
	if err != nil {
		return fmt.Errorf("bench: exactly-once %v: %w", op, err)
	}
	return nil
}

// Sample is one timed operation and the store requests it made.
type Sample struct {
	D     time.Duration
	Store Counts
}

// Hooks observe a block of exactly-once operations from inside its instance.
type Hooks struct {
	Begin func()       // before the first operation
	End   func()       // after the last, before the instance is marked done
	Each  func(Sample) // after every operation
}

// EOBlock performs op n times inside one instance, so the instance's own cost (intent creation,
// completion) stays out of the per-operation numbers.
func (s *Suite) EOBlock(ctx context.Context, op Op, it *Item, n int, h Hooks) error {
	return s.Instance(ctx, func(env *ssf.Env) error {
		if h.Begin != nil {
			h.Begin()
		}
		for range n {
			c0 := s.counter.Snapshot()
			t0 := time.Now()
			err := s.EO(env, op, it)
			d := time.Since(t0)
			if err != nil {
				return err
			}
			if h.Each != nil {
				h.Each(Sample{D: d, Store: s.counter.Snapshot().Sub(c0)})
			}
		}
		if h.End != nil {
			h.End()
		}
		return nil
	})
}

// RawBlock performs op n times and reports each to each.
func (s *Suite) RawBlock(ctx context.Context, op Op, it *Item, n int, each func(Sample)) error {
	for range n {
		c0 := s.counter.Snapshot()
		t0 := time.Now()
		if err := s.Raw(ctx, op, it); err != nil {
			return err
		}
		d := time.Since(t0)
		each(Sample{D: d, Store: s.counter.Snapshot().Sub(c0)})
	}
	return nil
}

// InstanceBlock runs n instances that do nothing and reports each to each.
func (s *Suite) InstanceBlock(ctx context.Context, n int, each func(Sample)) error {
	for range n {
		c0 := s.counter.Snapshot()
		t0 := time.Now()
		if err := s.Instance(ctx, nil); err != nil {
			return fmt.Errorf("bench: empty instance: %w", err)
		}
		d := time.Since(t0)
		each(Sample{D: d, Store: s.counter.Snapshot().Sub(c0)})
	}
	return nil
}

// CollectGarbage runs both SSFs' garbage collectors until all that finished instances left
// behind is gone, as the timer-triggered collector keeps a steady state in production. Instead
// of waiting T (GCBound) between passes it moves the runtimes' clock forward by T: pass 1
// stamps finish times, pass 2 removes logs and unlinks DAAL rows, pass 3 marks those rows
// dangling, pass 4 deletes them. No instance may be running: it would outlive its lifetime.
func (s *Suite) CollectGarbage(ctx context.Context) error {
	for range 4 {
		s.clock.advance(s.caller.Config().GCBound + time.Millisecond)
		for _, rt := range []*ssf.Runtime{s.caller, s.callee} {
			if _, err := rt.CollectGarbage(ctx); err != nil {
				return fmt.Errorf("bench: garbage collection of %s: %w", rt.Name(), err)
			}
		}
	}
	return nil
}

// offsetClock is the system clock plus an offset that only moves forward.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

type rawFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// rawTransport calls plain functions by name the way local.Host calls SSFs: a lookup under a
// read lock, with the input JSON-encoded as SyncInvoke encodes it.
type rawTransport struct {
	mu  sync.RWMutex
	fns map[string]rawFunc
}

func (t *rawTransport) Call(ctx context.Context, name string, input any) (json.RawMessage, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	fn, ok := t.fns[name]
	t.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no function named %q", name)
	}
	return fn(ctx, in)
}
