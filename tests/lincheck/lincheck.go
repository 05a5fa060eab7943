// Package lincheck checks that ssfkit's exactly-once key-value operations are linearizable
// under concurrency, crashes, re-executions and concurrent garbage collection.
//
// Many clients run SSF instances that each perform a few Read, Write and CondWrite steps on a
// small set of shared keys, while the store adds random delays around every call (widening race
// windows), executions crash at random points, the intent collector re-runs them, and garbage
// collectors with a short bound T unlink and delete DAAL rows concurrently. Every step is
// recorded with the earliest time any execution issued it and the earliest time one returned
// it (a re-execution replays the logged outcome, so the effect happened inside that interval),
// and porcupine checks each key's history against a register with compare-and-swap.
package lincheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/local"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// StoreFactory returns a fresh, empty table for the named SSF.
type StoreFactory func(t testing.TB, ssfName string) *store.Table

// Options size a run.
type Options struct {
	Clients  int           // concurrent clients
	Duration time.Duration // how long clients keep starting instances
	Keys     int           // shared keys
	Seed     int64
	MaxDelay time.Duration // upper bound of the random delay before and after each store call
	Crash    float64       // probability of a crash at each injection point
}

// op is one step an instance performs; kinds: read, write, cas.
type op struct {
	Kind   string          `json:"kind"`
	Key    string          `json:"key"`
	Value  int             `json:"value,omitempty"`
	Expect json.RawMessage `json:"expect,omitempty"` // cas: the value the key must hold (null: absent)
}

type input struct {
	Client int  `json:"client"`
	Ops    []op `json:"ops"`
}

// event is what the history keeps per (instance, step).
type event struct {
	client          int
	op              op
	call, ret       int64
	returned        bool
	output, output2 string // output2: a disagreeing output from another execution, if any
}

type recorder struct {
	mu     sync.Mutex
	start  time.Time
	events map[string]*event
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) called(id string, i int, client int, o op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := fmt.Sprintf("%s/%d", id, i)
	if _, ok := r.events[k]; !ok {
		r.events[k] = &event{client: client, op: o, call: r.now()}
	}
}

func (r *recorder) returned(id string, i int, out string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events[fmt.Sprintf("%s/%d", id, i)]
	if !e.returned {
		e.returned, e.ret, e.output = true, r.now(), out
	} else if out != e.output {
		e.output2 = out
	}
}

// handler performs the instance's steps through env and records them.
func (r *recorder) handler(env *ssf.Env, raw json.RawMessage) (any, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	for i, o := range in.Ops {
		r.called(env.InstanceID(), i, in.Client, o)
		var out string
		switch o.Kind {
		case "read":
			v, err := env.Read("kv", o.Key)
			if err != nil {
				return nil, err
			}
			out = string(v)
		case "write":
			if err := env.Write("kv", o.Key, o.Value); err != nil {
				return nil, err
			}
		case "cas":
			var expect any
			if err := json.Unmarshal(o.Expect, &expect); err != nil {
				return nil, err
			}
			ok, err := env.CondWrite("kv", o.Key, o.Value, store.Equal(nil, expect))
			if err != nil {
				return nil, err
			}
			out = fmt.Sprint(ok)
		}
		r.returned(env.InstanceID(), i, out)
	}
	return nil, nil
}

// delayingDriver sleeps a random time before and after every call, widening race windows.
type delayingDriver struct {
	store.Driver
	mu  sync.Mutex
	rng *rand.Rand
	max time.Duration
}

// stall is a rare long pause (a network hiccup, a GC pause in the caller) that lets other
// executions and collectors overtake a call in flight. It stays well under T - Lifetime.
const stall = 30 * time.Millisecond

func (d *delayingDriver) pause() {
	d.mu.Lock()
	n := time.Duration(d.rng.Int63n(int64(d.max) + 1))
	if d.rng.Intn(300) == 0 {
		n = stall
	}
	d.mu.Unlock()
	time.Sleep(n)
}

func (d *delayingDriver) Get(ctx context.Context, k store.Key) (store.Attrs, bool, error) {
	d.pause()
	defer d.pause()
	return d.Driver.Get(ctx, k)
}

func (d *delayingDriver) Update(ctx context.Context, k store.Key, c store.Cond, u store.Update) (store.UpdateResult, error) {
	d.pause()
	defer d.pause()
	return d.Driver.Update(ctx, k, c, u)
}

// Scan reads the partition the way paged cloud scans do, not as a snapshot: it lists the rows,
// then reads each one separately, pausing in between, so rows may change or vanish under it.
func (d *delayingDriver) Scan(ctx context.Context, p string, o store.ScanOptions) ([]store.Row, error) {
	d.pause()
	keys, err := d.Driver.Scan(ctx, p, store.ScanOptions{Projection: []store.Path{}})
	if err != nil {
		return nil, err
	}
	rows := make([]store.Row, 0, len(keys))
	for _, k := range keys {
		d.pause()
		a, found, err := d.Driver.Get(ctx, k.Key)
		if err != nil {
			return nil, err
		}
		if found {
			rows = append(rows, store.Row{Key: k.Key, Attrs: a.Project(o.Projection)})
		}
	}
	return rows, nil
}

func (d *delayingDriver) Delete(ctx context.Context, k store.Key, c store.Cond) (bool, error) {
	d.pause()
	defer d.pause()
	return d.Driver.Delete(ctx, k, c)
}

type randomCrashes struct {
	mu    sync.Mutex
	rng   *rand.Rand
	p     float64
	count int
}

func (c *randomCrashes) Inject(context.Context, ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Float64() < c.p {
		c.count++
		return ssf.ErrCrashed
	}
	return nil
}

// Run executes one randomized run and fails t if any key's history is not linearizable.
func Run(t *testing.T, newStore StoreFactory, o Options) {
	t.Logf("seed %d (rerun with SSFKIT_SEED=%d)", o.Seed, o.Seed)
	rec := &recorder{start: time.Now(), events: map[string]*event{}}
	crashes := &randomCrashes{rng: rand.New(rand.NewSource(o.Seed)), p: o.Crash}
	base := newStore(t, "kv")
	tbl := store.NewTable(&delayingDriver{Driver: base.Driver(), rng: rand.New(rand.NewSource(o.Seed + 1)), max: o.MaxDelay}, base.Name())

	host := local.NewHost()
	defer host.Close()
	rt, err := host.Add(ssf.Config{
		Name: "kv", Store: tbl, Handler: rec.handler, RowCapacity: 2,
		// T must cover an execution's lifetime plus one store call; the delays are sub-ms.
		Lifetime: 250 * time.Millisecond, GCBound: 350 * time.Millisecond, RelaunchDelay: 50 * time.Millisecond,
		Faults: crashes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two garbage collectors and an intent collector run throughout, concurrently.
	ctx, stop := context.WithCancel(context.Background())
	var gcMu sync.Mutex
	var gc ssf.GCReport
	var bg sync.WaitGroup
	for g := 0; g < 2; g++ {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for ctx.Err() == nil {
				r, err := rt.CollectGarbage(ctx)
				if err != nil && ctx.Err() == nil {
					t.Errorf("garbage collector: %v", err)
				}
				gcMu.Lock()
				gc.Disconnected += r.Disconnected
				gc.RowsDeleted += r.RowsDeleted
				gc.IntentsRemoved += r.IntentsRemoved
				gcMu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		host.RunCollectors(ctx, 25*time.Millisecond, 0, nil)
	}()

	var clients sync.WaitGroup
	deadline := time.Now().Add(o.Duration)
	instances := 0
	var instMu sync.Mutex
	for c := 0; c < o.Clients; c++ {
		clients.Add(1)
		go func() {
			defer clients.Done()
			rng := rand.New(rand.NewSource(o.Seed*1000 + int64(c)))
			last := map[string]json.RawMessage{}
			for n := 0; time.Now().Before(deadline); n++ {
				in := input{Client: c}
				for i := 0; i < 2+rng.Intn(3); i++ {
					key := fmt.Sprintf("k%d", rng.Intn(o.Keys))
					switch k := rng.Intn(3); {
					case k == 0:
						in.Ops = append(in.Ops, op{Kind: "read", Key: key})
					case k == 1:
						in.Ops = append(in.Ops, op{Kind: "write", Key: key, Value: c*1_000_000 + n*10 + i})
					default:
						expect := last[key]
						if expect == nil {
							expect = json.RawMessage("null")
						}
						in.Ops = append(in.Ops, op{Kind: "cas", Key: key, Value: c*1_000_000 + n*10 + i, Expect: expect})
					}
				}
				id := fmt.Sprintf("c%d-i%d", c, n)
				res, err := host.Invoke(ctx, "kv", id, in)
				if err != nil {
					// Accepted (intent registered) or not, the collector or a retry finishes it.
					if st, _ := rt.Intent(ctx, id); !st.Exists {
						n-- // never accepted: the client retries the same request
					}
					_ = res
				}
				instMu.Lock()
				instances++
				instMu.Unlock()
				// Remember values this client read, to aim its compare-and-swaps.
				rec.mu.Lock()
				for i, o := range in.Ops {
					if e := rec.events[fmt.Sprintf("%s/%d", id, i)]; e != nil && e.returned && o.Kind == "read" {
						v := e.output
						if v == "" {
							v = "null"
						}
						last[o.Key] = json.RawMessage(v)
					}
				}
				rec.mu.Unlock()
			}
		}()
	}
	clients.Wait()

	// Let the intent collector finish every accepted instance.
	for wait := time.Now().Add(20 * time.Second); ; {
		n, err := rt.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("%d instances still unfinished 20s after the clients stopped", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	bg.Wait()
	host.Wait()

	st := rt.Stats()
	t.Logf("%d instances, %d executions (%d re-executions, %d relaunched by the IC), %d crashes injected; GC unlinked %d rows, deleted %d, removed %d intents",
		instances, st.Executions, st.Reexecutions, st.Relaunched, crashes.count, gc.Disconnected, gc.RowsDeleted, gc.IntentsRemoved)
	if st.Corruptions != 0 {
		t.Fatalf("%d corruptions detected (a live execution reached a deleted row)", st.Corruptions)
	}
	if gc.RowsDeleted == 0 || crashes.count == 0 || st.Reexecutions == 0 {
		t.Fatalf("the run did not exercise what it checks (rows deleted %d, crashes %d, re-executions %d): lengthen Duration",
			gc.RowsDeleted, crashes.count, st.Reexecutions)
	}
	check(t, rec)
}

func check(t *testing.T, rec *recorder) {
	var history []porcupine.Operation
	for k, e := range rec.events {
		if !e.returned {
			t.Fatalf("step %s never returned although its instance finished", k)
		}
		if e.output2 != "" {
			t.Fatalf("step %s returned %q in one execution and %q in another: not exactly-once", k, e.output, e.output2)
		}
		history = append(history, porcupine.Operation{ClientId: e.client, Input: e.op, Call: e.call, Output: e.output, Return: e.ret})
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizable: %d operations", len(history))
	case porcupine.Unknown:
		t.Fatalf("porcupine timed out on %d operations", len(history))
	default:
		var b strings.Builder
		_ = porcupine.Visualize(registerModel, info, &b)
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(registerModel, info, path)
		t.Fatalf("history of %d operations is NOT linearizable; visualization: %s", len(history), path)
	}
}

// registerModel is a map of registers, partitioned by key. State is the value's JSON ("" when
// absent); a read outputs the JSON, a cas outputs "true"/"false".
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, o := range h {
			k := o.Input.(op).Key
			byKey[k] = append(byKey[k], o)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		s, o := state.(string), in.(op)
		switch o.Kind {
		case "read":
			return out.(string) == s, s
		case "write":
			return true, fmt.Sprint(o.Value)
		default:
			match := s == string(o.Expect) || (s == "" && string(o.Expect) == "null")
			if out.(string) != fmt.Sprint(match) {
				return false, s
			}
			if match {
				return true, fmt.Sprint(o.Value)
			}
			return true, s
		}
	},
	DescribeOperation: func(in, out any) string {
		o := in.(op)
		switch o.Kind {
		case "read":
			return fmt.Sprintf("read(%s) -> %s", o.Key, out)
		case "write":
			return fmt.Sprintf("write(%s, %d)", o.Key, o.Value)
		}
		return fmt.Sprintf("cas(%s, %s -> %d) -> %s", o.Key, o.Expect, o.Value, out)
	},
}
