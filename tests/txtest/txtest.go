// Package txtest is ssfkit's transaction suite: bank transfers as cross-SSF transactions under
// concurrency and crash injection, checked for conservation, all-or-nothing effects, released
// locks and serializability of the committed history; crashes at every point of commit and
// abort propagation; and wait-die under random lock orders. Any store driver can run it.
package txtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Options size the suite to a backend (Stride, Transfers, Clients, Crashes, Lockers,
// RelaunchDelay, CollectEvery, MaxBackOff, Deadline; zero fields take the defaults). The zero
// value suits local stores; the store matrix's rows carry each backend's (testtables.Backends).
type Options = testtables.TxOptions

// withDefaults fills o's zero fields with the defaults.
func withDefaults(o Options) Options {
	def := func(v *int, d int) {
		if *v < 1 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Stride, 1)
	def(&o.Transfers, 24)
	def(&o.Clients, 6)
	def(&o.Crashes, 30)
	def(&o.Lockers, 16)
	defDur(&o.RelaunchDelay, 300*time.Millisecond)
	defDur(&o.CollectEvery, 10*time.Millisecond)
	defDur(&o.MaxBackOff, 64*time.Millisecond)
	defDur(&o.Deadline, time.Minute)
	return o
}

// Run runs the whole suite against tables from newStore.
func Run(t suite.T, newStore testtables.Factory, opts Options) {
	opts = withDefaults(opts)
	suite.Run(t, "ConcurrentTransfersSerializable", func(t suite.T) { concurrentTransfers(t, newStore, opts) })
	suite.Run(t, "CrashAtEveryPointOfCommitAndAbort", func(t suite.T) { everyPoint(t, newStore, opts) })
	suite.Run(t, "WaitDieRandomLockOrders", func(t suite.T) { waitDie(t, newStore, opts) })
	suite.Run(t, "OverlappingEndsCommitOnce", func(t suite.T) { overlappingEnds(t, newStore) })
}

// balance is an account's value: the amount and the version, which names the transaction that
// wrote it, so that the history's read-from relation can be rebuilt from results.
type balance struct {
	Bal int64  `json:"bal"`
	Ver string `json:"ver"`
}

type ledgerOp struct {
	Op      string  `json:"op"` // open, get, put
	Account string  `json:"account"`
	Value   balance `json:"value"`
}

type transfer struct {
	From, To string
	Amount   int64
}

// outcome is the teller's result: what the committed transaction read, or why none committed.
type outcome struct {
	Committed bool              `json:"committed"`
	Reason    string            `json:"reason,omitempty"`
	Reads     map[string]string `json:"reads,omitempty"` // account -> version read (and overwritten)
}

func ledger(env *ssf.Env, in json.RawMessage) (any, error) {
	var op ledgerOp
	if err := json.Unmarshal(in, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "open", "put":
		return nil, env.Write("balances", op.Account, op.Value)
	case "get":
		var b balance
		_, err := env.ReadInto("balances", op.Account, &b)
		return b, err
	}
	return nil, fmt.Errorf("unknown ledger op %q", op.Op)
}

// audit notes a transfer inside the transaction: the note must exist iff the transfer commits.
func audit(env *ssf.Env, in json.RawMessage) (any, error) {
	var note struct{ ID string }
	if err := json.Unmarshal(in, &note); err != nil {
		return nil, err
	}
	return nil, env.Write("notes", note.ID, in)
}

// teller moves money in one transaction over ledger and audit, retrying after wait-die.
func teller(maxBackOff time.Duration) ssf.Handler {
	return func(env *ssf.Env, in json.RawMessage) (any, error) {
		var tr transfer
		if err := json.Unmarshal(in, &tr); err != nil {
			return nil, err
		}
		for attempt := 0; ; attempt++ {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			var from, to balance
			err := call(env, "ledger", ledgerOp{Op: "get", Account: tr.From}, &from)
			if err == nil {
				err = call(env, "ledger", ledgerOp{Op: "get", Account: tr.To}, &to)
			}
			insufficient := err == nil && from.Bal < tr.Amount
			if insufficient {
				err = env.AbortTx()
			}
			if err == nil {
				err = call(env, "ledger", ledgerOp{Op: "put", Account: tr.From, Value: balance{from.Bal - tr.Amount, env.InstanceID()}}, nil)
			}
			if err == nil {
				err = call(env, "ledger", ledgerOp{Op: "put", Account: tr.To, Value: balance{to.Bal + tr.Amount, env.InstanceID()}}, nil)
			}
			if err == nil {
				err = call(env, "audit", map[string]any{"ID": env.InstanceID(), "Amount": tr.Amount}, nil)
			}
			if err != nil && !errors.Is(err, ssf.ErrTxAborted) {
				return nil, err
			}
			committed, err := env.EndTx()
			switch {
			case err != nil:
				return nil, err
			case committed:
				return outcome{Committed: true, Reads: map[string]string{tr.From: from.Ver, tr.To: to.Ver}}, nil
			case insufficient:
				return outcome{Reason: "insufficient funds"}, nil
			}
			// Lost a wait-die conflict: back off (not an effect, so not logged) and try again with
			// the same age, which only grows older relative to newcomers.
			backOff(attempt, maxBackOff)
		}
	}
}

// backOff waits before a transaction that lost a wait-die conflict retries: 1 ms, doubling up to
// limit, so that a loser does not hammer the store while a slow or crashed holder finishes.
func backOff(attempt int, limit time.Duration) {
	time.Sleep(min(time.Millisecond<<min(attempt, 20), limit))
}

func call(env *ssf.Env, callee string, in any, out any) error {
	raw, err := env.SyncInvoke(callee, in)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

var accounts = []string{"a", "b", "c", "d", "e"}

const opening = 100

type world struct {
	host  *local.Host
	rts   map[string]*ssf.Runtime
	inj   *faults.Injector
	clock *testclock.Manual // nil: the system clock
}

// newWorld opens the accounts on fresh tables. With a manual clock it runs sequentially and
// relaunches at once; otherwise unfinished executions are relaunched after opts.RelaunchDelay.
func newWorld(t suite.T, newStore testtables.Factory, inj *faults.Injector, clock *testclock.Manual, opts Options) *world {
	w := &world{host: local.NewHost(), rts: map[string]*ssf.Runtime{}, inj: inj, clock: clock}
	w.host.Sequential = clock != nil
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.host.Logger = quiet
	for name, h := range map[string]ssf.Handler{"ledger": ledger, "audit": audit, "teller": teller(opts.MaxBackOff)} {
		cfg := ssf.Config{Name: name, Store: newStore(t, name), Handler: h, RowCapacity: 4,
			Lifetime: time.Hour, GCBound: 2 * time.Hour, RelaunchDelay: opts.RelaunchDelay, Faults: inj, Logger: quiet,
			MaxAttempts: -1} // injected crashes are not deterministic failures: every instance must finish
		if clock != nil {
			cfg.Clock, cfg.RelaunchDelay = clock, time.Nanosecond
		}
		rt, err := w.host.Add(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	t.Cleanup(w.host.Close)
	for _, a := range accounts {
		if _, err := w.host.Invoke(context.Background(), "ledger", "open-"+a, ledgerOp{Op: "open", Account: a, Value: balance{opening, "open-" + a}}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func transferID(i int) string { return fmt.Sprintf("transfer-%03d", i) }

// results reads every transfer's outcome once all are done.
func (w *world) results(t suite.T, n int) map[string]outcome {
	out := map[string]outcome{}
	for i := range n {
		st, err := w.rts["teller"].Intent(context.Background(), transferID(i))
		if err != nil || !st.Done || st.Result.Error != "" {
			t.Fatalf("%s: %+v %v", transferID(i), st, err)
		}
		var o outcome
		if err := json.Unmarshal(st.Result.Output, &o); err != nil {
			t.Fatalf("%s: %s: %v", transferID(i), st.Result.Output, err)
		}
		out[transferID(i)] = o
	}
	return out
}

func (w *world) state(t suite.T) map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for name, rt := range w.rts {
		items, err := rt.Items(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[name] = items
	}
	return out
}

// check verifies what must hold after any history of transfers: money conserved, audit notes
// for exactly the committed transfers, no lock held, and a serializable committed history
// whose last versions are the accounts' current values.
func (w *world) check(t suite.T, what string, outcomes map[string]outcome) {
	t.Helper()
	state := w.state(t)
	for name, rt := range w.rts {
		if locks, err := rt.Locks(context.Background()); err != nil || len(locks) != 0 {
			t.Fatalf("%s: %s holds locks after every transaction ended: %v %v", what, name, locks, err)
		}
	}
	current := map[string]balance{}
	var total int64
	for _, a := range accounts {
		var b balance
		if err := json.Unmarshal(state["ledger"]["balances/"+a], &b); err != nil {
			t.Fatalf("%s: account %s: %s", what, a, state["ledger"]["balances/"+a])
		}
		current[a] = b
		total += b.Bal
	}
	if total != opening*int64(len(accounts)) {
		t.Fatalf("%s: money not conserved: %d, opened with %d (%v)", what, total, opening*len(accounts), current)
	}
	for id, o := range outcomes {
		if _, noted := state["audit"]["notes/"+id]; noted != o.Committed {
			t.Fatalf("%s: transfer %s committed=%v but audit note present=%v", what, id, o.Committed, noted)
		}
	}
	if err := serializable(outcomes, current); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// serializable checks the committed history. Each committed transfer read a version of each of
// its accounts and overwrote it with its own, so: a version overwritten by two transfers is a
// lost update; the reads-from edges (writer of the version read -> reader) must form no cycle;
// and following the overwrites from each opening version must end at the account's current
// version.
func serializable(outcomes map[string]outcome, current map[string]balance) error {
	overwrittenBy := map[string]string{} // version -> the transfer that overwrote it
	edges := map[string][]string{}
	for id, o := range outcomes {
		if !o.Committed {
			continue
		}
		for acct, ver := range o.Reads {
			if prev, dup := overwrittenBy[acct+"@"+ver]; dup {
				return fmt.Errorf("lost update: %s and %s both overwrote version %s of %s", prev, id, ver, acct)
			}
			overwrittenBy[acct+"@"+ver] = id
			edges[ver] = append(edges[ver], id)
		}
	}
	// Cycle check by depth-first search (versions are named by their writers).
	state := map[string]int{} // 1: on the stack, 2: done
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("committed history not serializable: cycle %s", strings.Join(append(path, n), " -> "))
		case 2:
			return nil
		}
		state[n] = 1
		for _, m := range edges[n] {
			if err := visit(m, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		return nil
	}
	nodes := make([]string, 0, len(edges))
	for n := range edges {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		if err := visit(n, nil); err != nil {
			return err
		}
	}
	for acct, b := range current {
		ver := "open-" + acct
		for {
			next, ok := overwrittenBy[acct+"@"+ver]
			if !ok {
				break
			}
			ver = next
		}
		if ver != b.Ver {
			return fmt.Errorf("account %s holds version %s, but its committed history ends at %s", acct, b.Ver, ver)
		}
	}
	return nil
}

func randomTransfers(seed int64, n int) []transfer {
	rng := rand.New(rand.NewSource(seed))
	out := make([]transfer, n)
	for i := range out {
		from := rng.Intn(len(accounts))
		to := (from + 1 + rng.Intn(len(accounts)-1)) % len(accounts)
		out[i] = transfer{From: accounts[from], To: accounts[to], Amount: 1 + rng.Int63n(30)}
	}
	return out
}

// concurrentTransfers runs transfers from concurrent clients with random crashes anywhere,
// including in commit and abort propagation, while the intent collectors run.
func concurrentTransfers(t suite.T, newStore testtables.Factory, opts Options) {
	seed := crashkit.Seed(t)
	inj := faults.Random(seed, 0.004, opts.Crashes)
	w := newWorld(t, newStore, inj, nil, opts)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go w.host.RunCollectors(ctx, opts.CollectEvery, 0, nil)
	transfers := randomTransfers(seed, opts.Transfers)
	inj.Enable(true)
	var wg sync.WaitGroup
	for c := 0; c < opts.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < len(transfers); i += opts.Clients {
				crashkit.Submit(t, w.host, w.rts["teller"], transferID(i), transfers[i])
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(opts.Deadline)
	for {
		pending := 0
		for _, rt := range w.rts {
			n, err := rt.Pending(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			pending += n
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: %d instances unfinished after %v (a deadlock, or a lock never released)", seed, pending, opts.Deadline)
		}
		time.Sleep(opts.CollectEvery)
	}
	inj.Enable(false)
	stop()
	w.host.Wait()
	outcomes := w.results(t, len(transfers))
	committed := 0
	for _, o := range outcomes {
		if o.Committed {
			committed++
		}
	}
	t.Logf("seed %d: %d transfers, %d committed, %d crashes injected", seed, len(transfers), committed, len(inj.Crashes()))
	if committed == 0 || len(inj.Crashes()) == 0 {
		t.Fatalf("the run exercised nothing: %d committed, %d crashes", committed, len(inj.Crashes()))
	}
	w.check(t, fmt.Sprintf("seed %d (rerun: SSFKIT_SEED=%d)", seed, seed), outcomes)
}

// fixed commits, aborts for lack of funds (after locking and writing shadows), and commits.
var fixed = []transfer{{"a", "b", 30}, {"b", "c", 500}, {"c", "a", 10}}

// everyPoint crashes a sequential run once at each injection point of a clean run, including
// between flushing one item and the next, and between notifying one participant and the next.
func everyPoint(t suite.T, newStore testtables.Factory, opts Options) {
	run := func(inj *faults.Injector) (map[string]outcome, map[string]map[string][]byte, *world) {
		w := newWorld(t, newStore, inj, testclock.New(time.Unix(1_700_000_000, 0)), opts)
		inj.Enable(true)
		for i, tr := range fixed {
			crashkit.Submit(t, w.host, w.rts["teller"], transferID(i), tr)
			crashkit.Drain(t, w.host, w.clock, w.rts)
		}
		inj.Enable(false)
		return w.results(t, len(fixed)), w.state(t), w
	}
	count := faults.At(0)
	cleanOut, cleanState, w := run(count)
	w.check(t, "clean run", cleanOut)
	if !cleanOut[transferID(0)].Committed || cleanOut[transferID(1)].Committed {
		t.Fatalf("clean run: %+v", cleanOut)
	}
	t.Logf("clean run passes %d injection points; crashing at every %d", count.Points(), opts.Stride)
	for k := 1; k <= count.Points(); k += opts.Stride {
		inj := faults.At(k)
		out, state, w := run(inj)
		what := fmt.Sprintf("crash at point %d/%d (%v)", k, count.Points(), inj.Crashes())
		if !reflect.DeepEqual(out, cleanOut) {
			t.Fatalf("%s: outcomes %+v, clean run %+v", what, out, cleanOut)
		}
		if !reflect.DeepEqual(state, cleanState) {
			t.Fatalf("%s: final state differs from the clean run", what)
		}
		w.check(t, what, out)
	}
}

// waitDie runs transactions that lock random items in random orders, concurrently: all must
// finish (no deadlock), and every wait-die abort must name an older lock holder.
func waitDie(t suite.T, newStore testtables.Factory, opts Options) {
	seed := crashkit.Seed(t)
	var mu sync.Mutex
	var aborts []*ssf.TxAbortedError
	h := local.NewHost()
	defer h.Close()
	items := []string{"p", "q", "r", "s", "u", "v"}
	rt, err := h.Add(ssf.Config{Name: "locker", Store: newStore(t, "locker"), RowCapacity: 8,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			var order []string
			if err := json.Unmarshal(in, &order); err != nil {
				return nil, err
			}
			for attempt := 0; ; attempt++ {
				if err := env.BeginTx(); err != nil {
					return nil, err
				}
				for _, it := range order {
					err := env.Write("t", it, env.InstanceID())
					var abort *ssf.TxAbortedError
					if errors.As(err, &abort) {
						mu.Lock()
						aborts = append(aborts, abort)
						mu.Unlock()
						break
					}
					if err != nil {
						return nil, err
					}
					time.Sleep(time.Millisecond) // hold the lock a while, so transactions collide
				}
				if committed, err := env.EndTx(); err != nil || committed {
					return attempt, err
				}
				backOff(attempt, opts.MaxBackOff)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	done := make(chan error)
	n := opts.Lockers
	for i := 0; i < n; i++ {
		order := append([]string(nil), items...)
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		order = order[:2+rng.Intn(3)]
		go func() {
			r, err := h.Invoke(context.Background(), "locker", fmt.Sprint("tx-", i), order)
			if err == nil {
				err = r.Err()
			}
			done <- err
		}()
	}
	timeout := time.After(opts.Deadline)
	for i := 0; i < n; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("seed %d: %d of %d transactions still running after %v: deadlock", seed, n-i, n, opts.Deadline)
		}
	}
	for _, a := range aborts {
		if a.Reason != "wait-die" {
			continue
		}
		if !(a.HolderStart < a.Start || (a.HolderStart == a.Start && a.Holder < a.TxID)) {
			t.Fatalf("seed %d: %s (age %d) aborted against %s (age %d), which is younger", seed, a.TxID, a.Start, a.Holder, a.HolderStart)
		}
	}
	if locks, err := rt.Locks(context.Background()); err != nil || len(locks) != 0 {
		t.Fatalf("locks left held: %v %v", locks, err)
	}
	if len(aborts) == 0 {
		t.Fatalf("seed %d: no transaction collided, so wait-die was not exercised", seed)
	}
	t.Logf("seed %d: %d transactions finished, %d wait-die aborts, each against an older holder", seed, n, len(aborts))
}
