// Package lincheck checks that ssfkit's exactly-once key-value operations are linearizable
// under concurrency, crashes, re-executions and concurrent garbage collection.
//
// Many clients run SSF instances that each perform a few Read, Write and CondWrite steps on a
// small set of shared keys, while the store adds random delays around every call (widening race
// windows), executions crash at random points, the intent collector re-runs them, and garbage
// collectors with a short bound T unlink and delete DAAL rows concurrently. Each instance
// returns what its steps saw and wrote; the history takes those from the execution whose result
// stands, with the earliest time any execution issued the step and the earliest time one
// returned that same outcome (so the real operation lies inside the interval). Writes depend on
// earlier reads ("incr" writes the value read plus one), so a value from an execution that lost
// to another would show up as a write no linearization explains. Porcupine checks each key's
// history against a register with compare-and-swap.
package lincheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/linearizability"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Options size a run.
type Options struct {
	Clients  int           // concurrent clients
	Duration time.Duration // how long clients keep starting instances
	Keys     int           // shared keys
	Seed     int64
	MaxDelay time.Duration // upper bound of the random delay before and after each store call
	Crash    float64       // probability of a crash at each injection point
	// Lifetime bounds an execution (default 250 ms: short, so the collectors race live
	// executions); raise it for backends whose round trips are milliseconds long.
	Lifetime time.Duration
	// RelaunchDelay is how soon the intent collector relaunches an unfinished instance (default
	// 5 ms, so relaunches race the originals). On a backend serving one request at a time,
	// each duplicate slows every execution and more of them outlive the delay; a longer one
	// keeps the race without the pile-up.
	RelaunchDelay time.Duration
}

// op is one step an instance performs; kinds: read, write, cas, incr (write the value this
// instance last read for the key, plus one; a plain write if it has not read it), and branch
// (read the key, and write Value to Then only if the value read is an even number: an effect
// that depends on a read, as "check the balance, then debit" does).
type op struct {
	Kind   string          `json:"kind"`
	Key    string          `json:"key"`
	Value  int             `json:"value,omitempty"`
	Expect json.RawMessage `json:"expect,omitempty"` // cas: the value the key must hold (null: absent)
	Then   string          `json:"then,omitempty"`   // branch: the key written if the read is even
}

type input struct {
	Client int  `json:"client"`
	Ops    []op `json:"ops"`
}

// outcome is what one step saw (a read's value, a cas's result) and wrote. A branch's result
// says whether it acted; the history holds its write only then, so an effect its result does
// not report (or the reverse) shows as a value no linearization explains.
type outcome struct {
	Out     string `json:"out"`
	Written int    `json:"written"`
	Acted   bool   `json:"acted,omitempty"`
}

// timing is what the recorder keeps per (instance, step) across executions.
type timing struct {
	call    int64
	returns map[outcome]int64 // earliest return of each outcome seen
}

type recorder struct {
	mu    sync.Mutex
	start time.Time
	steps map[string]*timing
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func stepKey(id string, i int) string { return fmt.Sprintf("%s/%d", id, i) }

func (r *recorder) called(id string, i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.steps[stepKey(id, i)]; !ok {
		r.steps[stepKey(id, i)] = &timing{call: r.now(), returns: map[outcome]int64{}}
	}
}

func (r *recorder) returned(id string, i int, o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.steps[stepKey(id, i)]
	if _, ok := t.returns[o]; !ok {
		t.returns[o] = r.now()
	}
}

// handler performs the instance's steps through env, records their timing, and returns their
// outcomes as the instance's result.
func (r *recorder) handler(env *ssf.Env, raw json.RawMessage) (any, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	outs := make([]outcome, len(in.Ops))
	for i, o := range in.Ops {
		r.called(env.InstanceID(), i)
		var out outcome
		switch o.Kind {
		case "read":
			v, err := env.Read("kv", o.Key)
			if err != nil {
				return nil, err
			}
			out.Out = string(v)
			if n, err := strconv.Atoi(out.Out); err == nil {
				seen[o.Key] = n
			}
		case "branch":
			v, err := env.Read("kv", o.Key)
			if err != nil {
				return nil, err
			}
			out.Out = string(v)
			if n, err := strconv.Atoi(out.Out); err == nil && n%2 == 0 {
				if err := env.Write("kv", o.Then, o.Value); err != nil {
					return nil, err
				}
				out.Written, out.Acted = o.Value, true
			}
		case "write", "incr":
			out.Written = o.Value
			if n, ok := seen[o.Key]; ok && o.Kind == "incr" {
				out.Written = n + 1
			}
			if err := env.Write("kv", o.Key, out.Written); err != nil {
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
			out.Out, out.Written = fmt.Sprint(ok), o.Value
		}
		r.returned(env.InstanceID(), i, out)
		outs[i] = out
	}
	return outs, nil
}

// delayingDriver sleeps a random time before and after every call, widening race windows.
type delayingDriver struct {
	store.Driver
	*pauser
	inTx bool // inside a store transaction, which holds its locks across the pause
}

type pauser struct {
	mu         sync.Mutex
	rng        *rand.Rand
	max        time.Duration
	longStall  time.Duration
	calls      int
	longStalls int
}

// delaying wraps d; over a store with transactions, the operations inside them are delayed too
// (so locks are held across the pauses), and the runtime takes its transactional path.
func delaying(d store.Driver, p *pauser) store.Driver {
	dd := &delayingDriver{Driver: d, pauser: p}
	if _, ok := d.(store.Transactor); ok {
		return delayingTransactor{dd}
	}
	return dd
}

type delayingTransactor struct{ *delayingDriver }

func (d delayingTransactor) Transact(ctx context.Context, fn func(store.Driver) error) error {
	return d.Driver.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		return fn(&delayingDriver{Driver: tx, pauser: d.pauser, inTx: true})
	})
}

// stall is a rare long pause (a network hiccup, a GC pause in the caller) that lets other
// executions and collectors overtake a call in flight. It stays well under T - Lifetime.
const stall = 30 * time.Millisecond

// stallPastTEvery makes every so many calls, up to maxStallsPastT, a pause past every bound
// (longStall: the execution's lifetime and T, twice): the call is in flight while its instance
// may finish and be collected, and while collectors overtake it (a SIGSTOP, a VM migration).
// Never inside a store transaction: its locks would stop every other execution too.
const (
	stallPastTEvery = 1500
	maxStallsPastT  = 20
)

func (d *delayingDriver) pause() {
	d.mu.Lock()
	d.calls++
	n := time.Duration(d.rng.Int63n(int64(d.max) + 1))
	switch {
	case !d.inTx && d.longStalls < maxStallsPastT && d.calls%stallPastTEvery == 200:
		n = d.longStall
		d.longStalls++
	case d.rng.Intn(300) == 0:
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
	keys, err := d.Driver.Scan(ctx, p, store.ScanOptions{Projection: []store.Path{}, Reverse: o.Reverse, Limit: o.Limit})
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

func (c *randomCrashes) Inject(_ context.Context, p ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	prob := c.p
	if p.Instance == ssf.CollectorIC || p.Instance == ssf.CollectorGC {
		// A pass has hundreds of points: at the executions' rate hardly any would finish.
		prob /= 20
	}
	if c.rng.Float64() < prob {
		c.count++
		return ssf.ErrCrashed
	}
	return nil
}

// Run executes one randomized run and fails t if any key's history is not linearizable.
func Run(t suite.T, newStore testtables.Factory, o Options) {
	t.Logf("seed %d (rerun with SSFKIT_SEED=%d)", o.Seed, o.Seed)
	rec := &recorder{start: time.Now(), steps: map[string]*timing{}}
	crashes := &randomCrashes{rng: rand.New(rand.NewSource(o.Seed)), p: o.Crash}
	lifetime := o.Lifetime
	if lifetime == 0 {
		lifetime = 250 * time.Millisecond
	}
	relaunch := o.RelaunchDelay
	if relaunch == 0 {
		relaunch = 5 * time.Millisecond
	}
	base := newStore(t, "kv")
	pauses := &pauser{rng: rand.New(rand.NewSource(o.Seed + 1)), max: o.MaxDelay, longStall: 2 * (lifetime + 2*lifetime)}
	tbl := store.NewTable(delaying(base.Driver(), pauses), base.Name())

	host := local.NewHost()
	host.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // crashed collector passes are expected
	defer host.Close()
	rt, err := host.Add(ssf.Config{
		Name: "kv", Store: tbl, Handler: rec.handler, RowCapacity: 2,
		// T must cover an execution's lifetime plus its last store call, stalls included,
		// on a loaded machine under the race detector.
		Lifetime: lifetime, GCBound: 2 * lifetime, RelaunchDelay: relaunch,
		// Injected crashes are not the deterministic failures bounded attempts are for: every
		// instance must finish, however often it crashed.
		MaxAttempts: -1,
		Faults:      crashes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two garbage collectors and an intent collector run throughout, concurrently.
	ctx, stop := context.WithCancel(context.Background())
	var gcMu sync.Mutex
	var gc ssf.GCReport
	var bg sync.WaitGroup
	// Also when the run fails early: a collector must not report after the test ended.
	defer func() { stop(); bg.Wait() }()
	for g := 0; g < 2; g++ {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for ctx.Err() == nil {
				r, err := rt.CollectGarbage(ctx)
				if err != nil && ctx.Err() == nil && !errors.Is(err, ssf.ErrCrashed) {
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
	var ids []string     // every instance submitted (a retried one more than once)
	var inputs sync.Map  // id -> input
	var results sync.Map // id -> the result that stands
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
					switch k := rng.Intn(5); {
					case k == 4:
						in.Ops = append(in.Ops, op{Kind: "branch", Key: key, Then: fmt.Sprintf("k%d", rng.Intn(o.Keys)), Value: 2 * (c*1_000_000 + n*10 + i)})
					case k == 0:
						in.Ops = append(in.Ops, op{Kind: "read", Key: key})
					case k == 1:
						in.Ops = append(in.Ops, op{Kind: "write", Key: key, Value: c*1_000_000 + n*10 + i})
					case k == 2 && i > 0:
						in.Ops = append(in.Ops, op{Kind: "incr", Key: in.Ops[i-1].Key, Value: c*1_000_000 + n*10 + i})
					default:
						expect := last[key]
						if expect == nil {
							expect = json.RawMessage("null")
						}
						in.Ops = append(in.Ops, op{Kind: "cas", Key: key, Value: c*1_000_000 + n*10 + i, Expect: expect})
					}
				}
				id := fmt.Sprintf("c%d-i%d", c, n)
				instMu.Lock()
				ids = append(ids, id)
				instMu.Unlock()
				inputs.Store(id, in)
				res, err := host.Invoke(ctx, "kv", id, in)
				for giveUp := time.Now().Add(resultWait); err != nil; {
					// Accepted requests are finished by the intent collector; the client waits for
					// the result. A request never accepted is resubmitted, even past the deadline:
					// the history holds every id the clients issued.
					var accepted bool
					if res, accepted = awaitResult(ctx, rt, id, giveUp); accepted {
						break
					}
					if time.Now().After(giveUp) {
						// A liveness failure: report it rather than wait forever.
						st, stErr := rt.Intent(ctx, id)
						t.Errorf("instance %s has no result %v after it was first submitted (last error %v; intent %+v, %v)", id, resultWait, err, st, stErr)
						return
					}
					res, err = host.Invoke(ctx, "kv", id, in)
				}
				results.Store(id, res)
				instMu.Lock()
				instances++
				instMu.Unlock()
				// Remember values this client read, to aim its compare-and-swaps.
				var outs []outcome
				_ = json.Unmarshal(res.Output, &outs)
				for i, o := range in.Ops {
					if o.Kind == "read" && i < len(outs) {
						v := outs[i].Out
						if v == "" {
							v = "null"
						}
						last[o.Key] = json.RawMessage(v)
					}
				}
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
	// Rows unlinked near the end become deletable T later: on a loaded machine that can be
	// after the clients stop, so the collectors get up to a few bounds more to delete some
	// (and the time of two calls paused past T, which may be theirs).
	for wait := time.Now().Add(4*2*lifetime + 2*pauses.longStall); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
		gcMu.Lock()
		deleted := gc.RowsDeleted
		gcMu.Unlock()
		if deleted > 0 {
			break
		}
	}
	stop()
	bg.Wait()
	host.Wait()

	st := rt.Stats()
	pauses.mu.Lock()
	longStalls := pauses.longStalls
	pauses.mu.Unlock()
	t.Logf("%d instances, %d executions (%d re-executions, %d relaunched by the IC), %d crashes injected, %d calls paused past T; GC unlinked %d rows, deleted %d, removed %d intents",
		instances, st.Executions, st.Reexecutions, st.Relaunched, crashes.count, longStalls, gc.Disconnected, gc.RowsDeleted, gc.IntentsRemoved)
	if st.Corruptions != 0 {
		t.Fatalf("%d corruptions detected (a live execution reached a deleted row)", st.Corruptions)
	}
	if gc.RowsDeleted == 0 || crashes.count == 0 || st.Reexecutions == 0 || longStalls == 0 {
		t.Fatalf("the run did not exercise what it checks (rows deleted %d, crashes %d, re-executions %d, calls paused past T %d): lengthen Duration",
			gc.RowsDeleted, crashes.count, st.Reexecutions, longStalls)
	}
	check(t, rec, ids, &inputs, &results)
}

// resultWait bounds how long a client waits for one instance's result, resubmissions included:
// far more than the intent collector needs to finish it, however often it crashes.
const resultWait = 2 * time.Minute

// awaitResult waits until giveUp for an accepted instance to finish; false means it was never
// accepted or giveUp passed.
func awaitResult(ctx context.Context, rt *ssf.Runtime, id string, giveUp time.Time) (ssf.Result, bool) {
	for time.Now().Before(giveUp) {
		st, err := rt.Intent(ctx, id)
		if err == nil && !st.Exists {
			return ssf.Result{}, false
		}
		if st.Done {
			return st.Result, true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return ssf.Result{}, false
}

// check builds the history from the outcomes of the executions whose results stand and asks
// porcupine whether it is linearizable.
func check(t suite.T, rec *recorder, ids []string, inputs, results *sync.Map) {
	var history []porcupine.Operation
	done := map[string]bool{}
	for _, id := range ids {
		if done[id] {
			continue
		}
		done[id] = true
		r, ok := results.Load(id)
		if !ok {
			t.Fatalf("instance %s: the client never got a result", id)
		}
		res := r.(ssf.Result)
		var outs []outcome
		if err := json.Unmarshal(res.Output, &outs); err != nil || res.Error != "" {
			t.Fatalf("instance %s result %+v: %v", id, res, err)
		}
		v, _ := inputs.Load(id)
		in := v.(input)
		for i, o := range outs {
			tm := rec.steps[stepKey(id, i)]
			ret, ok := tm.returns[o]
			if !ok {
				t.Fatalf("step %s/%d: the result says %+v, which no execution returned", id, i, o)
			}
			add := func(s step, out string) {
				history = append(history, porcupine.Operation{ClientId: in.Client, Input: s, Call: tm.call, Output: out, Return: ret})
			}
			if op := in.Ops[i]; op.Kind == "branch" {
				add(step{op: op2(op, "read", op.Key)}, o.Out)
				if o.Acted {
					add(step{op: op2(op, "write", op.Then), written: o.Written}, "")
				}
				continue
			}
			add(step{in.Ops[i], o.Written}, o.Out)
		}
	}
	linearizability.Check(t, registerModel, history)
}

// op2 is the read or the write of a branch, as an op of that kind on key.
func op2(branch op, kind, key string) op {
	return op{Kind: kind, Key: key, Value: branch.Value}
}

// step is a history entry's input: the op and the value it wrote (incr decides at run time).
type step struct {
	op
	written int
}

// registerModel is a map of registers, partitioned by key. State is the value's JSON ("" when
// absent); a read outputs the JSON, a cas outputs "true"/"false".
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, o := range h {
			k := o.Input.(step).Key
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
		s, o := state.(string), in.(step)
		switch o.Kind {
		case "read":
			return out.(string) == s, s
		case "write", "incr":
			return true, fmt.Sprint(o.written)
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
		o := in.(step)
		switch o.Kind {
		case "read":
			return fmt.Sprintf("read(%s) -> %s", o.Key, out)
		case "write", "incr":
			return fmt.Sprintf("%s(%s, %d)", o.Kind, o.Key, o.written)
		}
		return fmt.Sprintf("cas(%s, %s -> %d) -> %s", o.Key, o.Expect, o.Value, out)
	},
}
