package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// accounts is an SSF that adds to a balance, refusing to go negative; called inside a
// transaction it locks the account and writes a shadow.
func accounts(env *ssf.Env, in json.RawMessage) (any, error) {
	var op struct {
		Account string `json:"account"`
		Delta   int64  `json:"delta"`
		Set     *int64 `json:"set,omitempty"`
	}
	if err := json.Unmarshal(in, &op); err != nil {
		return nil, err
	}
	if op.Set != nil {
		return nil, env.Write("bal", op.Account, *op.Set)
	}
	var bal int64
	if _, err := env.ReadInto("bal", op.Account, &bal); err != nil {
		return nil, err
	}
	if bal+op.Delta < 0 {
		return nil, env.AbortTx() // insufficient funds: the whole transfer aborts
	}
	return bal + op.Delta, env.Write("bal", op.Account, bal+op.Delta)
}

type transfer struct {
	From, To string
	Amount   int64
}

// teller moves money between two accounts of the accounts SSF in one transaction.
func teller(env *ssf.Env, in json.RawMessage) (any, error) {
	var t transfer
	if err := json.Unmarshal(in, &t); err != nil {
		return nil, err
	}
	for {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		_, err := env.SyncInvoke("accounts", map[string]any{"account": t.From, "delta": -t.Amount})
		if err == nil {
			_, err = env.SyncInvoke("accounts", map[string]any{"account": t.To, "delta": t.Amount})
		}
		if err != nil && !errors.Is(err, ssf.ErrTxAborted) {
			return nil, err
		}
		committed, err := env.EndTx()
		if err != nil || committed {
			return committed, err
		}
		// Aborted: by wait-die (retry) or for lack of funds (give up).
		funds, err := env.SyncInvoke("accounts", map[string]any{"account": t.From, "delta": 0})
		if err != nil {
			return nil, err
		}
		var have int64
		if err := json.Unmarshal(funds, &have); err != nil || have < t.Amount {
			return false, err
		}
	}
}

func newBank(t *testing.T) (*local.Host, map[string]*ssf.Runtime) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	rts := map[string]*ssf.Runtime{}
	for name, fn := range map[string]ssf.Handler{"accounts": accounts, "teller": teller} {
		rts[name] = add(t, h, name, 4, fn)
	}
	for _, a := range []string{"a", "b", "c"} {
		if _, err := h.Invoke(context.Background(), "accounts", "open-"+a, map[string]any{"account": a, "set": 100}); err != nil {
			t.Fatal(err)
		}
	}
	return h, rts
}

func balances(t *testing.T, rt *ssf.Runtime) map[string]string {
	items, err := rt.Items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range items {
		out[k] = string(v)
	}
	return out
}

func noLocks(t *testing.T, rts map[string]*ssf.Runtime) {
	t.Helper()
	for name, rt := range rts {
		locks, err := rt.Locks(context.Background())
		if err != nil || len(locks) != 0 {
			t.Fatalf("%s: locks left held: %v %v", name, locks, err)
		}
	}
}

func TestTransactionCommitsAcrossSSFs(t *testing.T) {
	h, rts := newBank(t)
	r, err := h.Invoke(context.Background(), "teller", "t1", transfer{"a", "b", 30})
	if err != nil || string(r.Output) != "true" {
		t.Fatalf("transfer: %+v %v", r, err)
	}
	if got := balances(t, rts["accounts"]); got["bal/a"] != "70" || got["bal/b"] != "130" {
		t.Fatalf("balances %v", got)
	}
	noLocks(t, rts)
}

func TestTransactionAbortLeavesNothing(t *testing.T) {
	h, rts := newBank(t)
	r, err := h.Invoke(context.Background(), "teller", "t1", transfer{"a", "b", 500})
	if err != nil || string(r.Output) != "false" {
		t.Fatalf("transfer: %+v %v", r, err)
	}
	if got := balances(t, rts["accounts"]); got["bal/a"] != "100" || got["bal/b"] != "100" {
		t.Fatalf("an aborted transfer changed balances: %v", got)
	}
	noLocks(t, rts)
}

func TestReadYourWritesAndIsolation(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	inside := make(chan struct{})
	release := make(chan struct{})
	add(t, h, "rw", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		if string(in) == `"outside"` {
			v, err := env.Read("t", "x") // outside any transaction: committed state only
			return json.RawMessage(v), err
		}
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		if err := env.Write("t", "x", 42); err != nil {
			return nil, err
		}
		v, err := env.Read("t", "x")
		if err != nil || string(v) != "42" {
			return nil, fmt.Errorf("read your writes: %s %v", v, err)
		}
		close(inside)
		<-release
		_, err = env.EndTx()
		return nil, err
	})
	done := make(chan error)
	go func() { _, err := h.Invoke(context.Background(), "rw", "tx", nil); done <- err }()
	<-inside
	r, err := h.Invoke(context.Background(), "rw", "peek", "outside")
	if err != nil || string(r.Output) != "null" {
		t.Fatalf("an uncommitted write was visible: %s %v", r.Output, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, _ = h.Invoke(context.Background(), "rw", "peek2", "outside")
	if string(r.Output) != "42" {
		t.Fatalf("committed value: %s", r.Output)
	}
}

// Beldi Fig. 12: under OCC, a transaction that read x after another's write to x but y before
// it would loop forever; with opacity both instances always terminate.
func TestFig12ConcurrentInstancesTerminate(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	rt := add(t, h, "fig12", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		if string(in) == `"init"` {
			if err := env.Write("t", "x", 0); err != nil {
				return nil, err
			}
			return nil, env.Write("t", "y", 1)
		}
		for {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			var x, y int
			_, err := env.ReadInto("t", "x", &x)
			if err == nil {
				_, err = env.ReadInto("t", "y", &y)
			}
			if err == nil {
				for steps := 0; x != y; steps++ {
					if steps > 1000 { // only reachable from an inconsistent snapshot
						return nil, fmt.Errorf("inconsistent snapshot x=%d y=%d", x, y)
					}
					if x < y {
						x++
					} else {
						y++
					}
				}
				if err = env.Write("t", "x", x+2); err == nil {
					err = env.Write("t", "y", y+4)
				}
			}
			if err != nil && !errors.Is(err, ssf.ErrTxAborted) {
				return nil, err
			}
			if committed, err := env.EndTx(); err != nil || committed {
				return x, err
			}
		}
	})
	if _, err := h.Invoke(context.Background(), "fig12", "init", "init"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.Invoke(context.Background(), "fig12", fmt.Sprint("t", i), "run")
			if err == nil {
				err = r.Err()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	items, _ := rt.Items(context.Background())
	if string(items["t/x"]) == string(items["t/y"]) {
		t.Fatalf("x and y: %s %s", items["t/x"], items["t/y"])
	}
	noLocks(t, map[string]*ssf.Runtime{"fig12": rt})
}

// Wait-die: when a younger transaction meets an older one's lock it dies; an older one waits.
func TestWaitDie(t *testing.T) {
	h := local.NewHost()
	defer h.Close()
	holding := make(chan struct{})
	release := make(chan struct{})
	var youngerErr error
	add(t, h, "wd", 4, func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		err := env.Write("t", "k", string(in))
		if string(in) == `"old"` {
			close(holding)
			<-release
		} else {
			youngerErr = err
		}
		committed, endErr := env.EndTx()
		if endErr != nil {
			return nil, endErr
		}
		return committed, nil
	})
	ctx := context.Background()
	old := make(chan ssf.Result)
	go func() { r, _ := h.Invoke(ctx, "wd", "old", "old"); old <- r }()
	<-holding
	time.Sleep(2 * time.Millisecond) // the younger intent is created later
	r, err := h.Invoke(ctx, "wd", "young", "young")
	if err != nil || string(r.Output) != "false" || !errors.Is(youngerErr, ssf.ErrTxAborted) {
		t.Fatalf("the younger transaction should die: %+v %v %v", r, err, youngerErr)
	}
	close(release)
	if r := <-old; string(r.Output) != "true" {
		t.Fatalf("the older transaction should commit: %+v", r)
	}
}

// An older transaction waiting (wait-die) longer than Lifetime for a lock a younger one holds:
// each execution is fenced at its lifetime and relaunched, and a re-execution must replay the
// logged failed attempts without sleeping through them again, or it would be fenced before it
// ever reached a new attempt and the wait would never end.
func TestLockWaitLongerThanLifetime(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	h := local.NewHost()
	defer h.Close()
	youngHolds, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rt, err := h.Add(ssf.Config{Name: "wd", Store: newTable(), Lifetime: lifetime, GCBound: 2 * lifetime,
		RelaunchDelay: 50 * time.Millisecond, Logger: quietLogger(),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			if string(in) == `"old"` {
				<-youngHolds // created first (older), locks second
			}
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			err := env.Write("t", "k", in)
			if string(in) == `"young"` && err == nil {
				once.Do(func() { close(youngHolds) })
				<-release // hold the lock past the older one's lifetime
			}
			committed, endErr := env.EndTx()
			if endErr != nil {
				return nil, endErr
			}
			return committed, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	h.Logger = quietLogger()
	go h.RunCollectors(ctx, 20*time.Millisecond, 0, nil)
	go func() { _, _ = h.Invoke(ctx, "wd", "old", "old") }()
	time.Sleep(5 * time.Millisecond)
	go func() { _, _ = h.Invoke(ctx, "wd", "young", "young") }()
	time.Sleep(2 * lifetime)
	close(release)
	for _, id := range []string{"young", "old"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := rt.Intent(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Done {
				break
			}
			if time.Now().After(deadline) {
				locks, _ := rt.Locks(context.Background())
				t.Fatalf("%s not done 10 s after the lock was released (locks %v, stats %+v)", id, locks, rt.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A transaction's write waits in the item's row, beside the committed value, until the commit.
// With two entries a row, two writes (the first takes the lock) fill the head, so the commit's
// step goes to a successor, which must carry the uncommitted value for the commit to find it.
func TestCommitOnASuccessorOfTheWrittenRow(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	rt := add(t, h, "fill", 2, func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		for _, v := range []string{"first", "in-tx"} {
			if err := env.Write("t", "k", v); err != nil {
				return nil, err
			}
		}
		return env.EndTx()
	})
	r, err := h.Invoke(context.Background(), "fill", "i1", nil)
	if err != nil || string(r.Output) != "true" || r.Error != "" {
		t.Fatalf("%+v %v, want committed", r, err)
	}
	if got := balances(t, rt)["t/k"]; got != `"in-tx"` {
		t.Fatalf("t/k = %s after the commit, want \"in-tx\"", got)
	}
	noLocks(t, map[string]*ssf.Runtime{"fill": rt})
}

// The uncommitted value shares the item's row with the committed one: a transaction's write
// that cannot fit beside it is refused with ErrValueTooLarge (logged, so every execution agrees)
// instead of failing in the store, and the transaction can abort cleanly.
func TestTxWriteMustFitBesideTheCommittedValue(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	big := strings.Repeat("x", 7000)
	rt, err := h.Add(ssf.Config{Name: "big", Store: store.NewTable(memstore.New(16*1024), "mem://big"), RowCapacity: 4,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			var v string
			if err := json.Unmarshal(in, &v); err != nil {
				return nil, err
			}
			if env.InstanceID() == "set" {
				return nil, env.Write("t", "k", v)
			}
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			werr := env.Write("t", "k", v)
			if werr != nil && !errors.Is(werr, ssf.ErrValueTooLarge) {
				return nil, werr
			}
			if werr != nil {
				if err := env.AbortTx(); err != nil {
					return nil, err
				}
			}
			committed, err := env.EndTx()
			return map[string]any{"committed": committed, "refused": werr != nil}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "big", "set", big); err != nil {
		t.Fatal(err)
	}
	r, err := h.Invoke(ctx, "big", "tx-big", big+"y")
	if err != nil || string(r.Output) != `{"committed":false,"refused":true}` {
		t.Fatalf("%+v %v, want the write refused and the transaction aborted", r, err)
	}
	r, err = h.Invoke(ctx, "big", "tx-small", "small")
	if err != nil || string(r.Output) != `{"committed":true,"refused":false}` {
		t.Fatalf("%+v %v, want a small write committed", r, err)
	}
	if got := balances(t, rt)["t/k"]; got != `"small"` {
		t.Fatalf("t/k = %.20s after the commit, want \"small\"", got)
	}
	noLocks(t, map[string]*ssf.Runtime{"big": rt})
}

// Ending a transaction again (a second coordinator's commit, an end replayed by a runtime that
// did not find the first) changes nothing: each commit step applies only while the transaction
// holds the item's lock, so it cannot commit or release what a later transaction holds there.
func TestEndingATransactionTwiceChangesNothing(t *testing.T) {
	h, rts := newBank(t)
	ctx := context.Background()
	participate := func(id string, tx ssf.TxContext, delta int64) {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"account": "a", "delta": delta})
		r, err := h.Call(ctx, "accounts", ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Input: in, Tx: &tx})
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	end := func(id string, tx ssf.TxContext, mode ssf.TxMode) {
		t.Helper()
		tx.Mode = mode
		req, err := ssf.EndTxRequest(id, "accounts", tx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Call(ctx, "accounts", req)
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	w1 := ssf.TxContext{ID: "w1", Start: 1, Mode: ssf.TxExecute}
	w2 := ssf.TxContext{ID: "w2", Start: 2, Mode: ssf.TxExecute}
	participate("p1", w1, -30)
	end("end-w1", w1, ssf.TxCommit)
	participate("p2", w2, -50) // w2 holds a, with 20 uncommitted
	end("end-w1-again", w1, ssf.TxCommit)
	if got := balances(t, rts["accounts"])["bal/a"]; got != "70" {
		t.Fatalf("a = %s after w1's second commit, want 70: it committed w2's value", got)
	}
	locks, err := rts["accounts"].Locks(ctx)
	if err != nil || len(locks) != 1 {
		t.Fatalf("locks %v %v, want w2's on a still held", locks, err)
	}
	end("end-w2", w2, ssf.TxAbort)
	if got := balances(t, rts["accounts"])["bal/a"]; got != "70" {
		t.Fatalf("a = %s after w2 aborted, want 70", got)
	}
	noLocks(t, rts)
}

// A transaction's owner that locks nothing itself, only calls a participant that does, is never
// given up while unfinished either: only its end releases the participant's locks. The intent
// collector keeps relaunching it past MaxAttempts until it finishes and ends the transaction.
func TestTransactionOwnersAreNeverGivenUp(t *testing.T) {
	c, h, base := relaunchWorld(t)
	var broken atomic.Bool
	broken.Store(true)
	participant, owner := base, base
	participant.Name, participant.Store, participant.Handler = "acct", newTable(), accounts
	owner.Name, owner.Store, owner.MaxAttempts = "owner", newTable(), 1
	owner.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		if _, err := env.SyncInvoke("acct", map[string]any{"account": "a", "delta": 5}); err != nil {
			return nil, err
		}
		if broken.Load() { // every execution stops after the participant locked a
			return nil, env.Stop(errors.New("the worker is shutting down"))
		}
		return env.EndTx()
	}
	rts := failFirst(t, h, "owner", "o-1", participant, owner)
	relaunchHourly(t, h, c, rts["owner"], 4)
	ctx := context.Background()
	if st, err := rts["owner"].Intent(ctx, "o-1"); err != nil || st.Done || rts["owner"].Stats().GaveUp != 0 {
		t.Fatalf("the owner of an open transaction was given up: %+v %v; its participant's lock would stay held", st, err)
	}
	broken.Store(false)
	relaunchHourly(t, h, c, rts["owner"], 1)
	if st, err := rts["owner"].Intent(ctx, "o-1"); err != nil || !st.Done || string(st.Result.Output) != "true" {
		t.Fatalf("the owner: %+v %v, want it finished with its transaction committed", st, err)
	}
	if got := balances(t, rts["acct"])["bal/a"]; got != "5" {
		t.Fatalf("a = %s, want the committed 5", got)
	}
	noLocks(t, rts)
}

// A called instance whose first step takes a lock of its own runs before its intent is written
// (the call is fresh): the intent must still say that it holds locks, so that the intent
// collector never gives it up while it holds one, however many relaunches fail.
func TestCalledInstanceThatLocksFirstIsNeverGivenUp(t *testing.T) {
	c, h, base := relaunchWorld(t)
	var broken atomic.Bool
	broken.Store(true)
	locker, caller := base, base
	locker.Name, locker.Store, locker.MaxAttempts = "locker", newTable(), 1
	// Every relaunch dies reading the intent, before its handler runs: only the first
	// execution, which took the lock, can have marked the intent.
	locker.Faults = faultFunc(func(p ssf.FaultPoint) error {
		if broken.Load() && p.Instance != ssf.CollectorIC && p.Op == "get" && strings.HasPrefix(p.Key.Partition, "i|") {
			return ssf.ErrCrashed
		}
		return nil
	})
	locker.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.Lock("t", "k"); err != nil {
			return nil, err
		}
		if broken.Load() { // the first execution stops holding the lock
			return nil, env.Stop(errors.New("the worker is shutting down"))
		}
		return nil, env.Unlock("t", "k")
	}
	caller.Name, caller.Store = "caller", newTable()
	caller.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		return env.SyncInvoke("locker", nil)
	}
	rts := failFirst(t, h, "caller", "c-1", locker, caller)
	relaunchHourly(t, h, c, rts["locker"], 4)
	if gaveUp := rts["locker"].Stats().GaveUp; gaveUp != 0 {
		t.Fatalf("the called instance holding a lock was given up (%d); its lock would stay held", gaveUp)
	}
	broken.Store(false)
	relaunchHourly(t, h, c, rts["locker"], 1)
	noLocks(t, rts)
}

// relaunchWorld is a host running one request at a time on a manual clock, and the base of
// configurations whose intent collector relaunches within a second.
func relaunchWorld(t *testing.T) (*testclock.Manual, *local.Host, ssf.Config) {
	c := testclock.New(time.Unix(1e9, 0))
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	return c, h, ssf.Config{Lifetime: time.Minute, GCBound: 2 * time.Minute, RelaunchDelay: time.Second, Clock: c, Logger: quietLogger()}
}

// failFirst adds the SSFs and invokes instance id of SSF name, whose first execution must fail.
func failFirst(t *testing.T, h *local.Host, name, id string, cfgs ...ssf.Config) map[string]*ssf.Runtime {
	t.Helper()
	rts := map[string]*ssf.Runtime{}
	for _, cfg := range cfgs {
		rts[cfg.Name] = addConfig(t, h, cfg)
	}
	if _, err := h.Invoke(context.Background(), name, id, nil); err == nil {
		t.Fatalf("the first execution of %s's %s should have failed", name, id)
	}
	return rts
}

// relaunchHourly lets the intent collector of rt run rounds times, an hour apart.
func relaunchHourly(t *testing.T, h *local.Host, c *testclock.Manual, rt *ssf.Runtime, rounds int) {
	t.Helper()
	for range rounds {
		c.Advance(time.Hour)
		if _, err := rt.CollectIntents(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.Wait()
	}
}

// A read in a transaction that takes the item's lock reads what the lock step saw in the row it
// locked, not the item again. The lock step and the write go to the row the runtime's last
// write of the item (open-a's) left, which is still its tail, so the participant scans nothing.
func TestReadInATransactionReadsWhatItsLockSaw(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	var mu sync.Mutex
	scans := map[string]int{} // instance -> scans of the item
	count := faultFunc(func(p ssf.FaultPoint) error {
		if !p.After && p.Op == "scan" && p.Key.Partition == "d|bal|a" {
			mu.Lock()
			scans[p.Instance]++
			mu.Unlock()
		}
		return nil
	})
	rts := map[string]*ssf.Runtime{"acct": addConfig(t, h, ssf.Config{Name: "acct", Store: newTable(), Handler: accounts, Faults: count})}
	if _, err := h.Invoke(context.Background(), "acct", "open-a", map[string]any{"account": "a", "set": 7}); err != nil {
		t.Fatal(err)
	}
	rts["trip"] = addConfig(t, h, ssf.Config{Name: "trip", Store: newTable(),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			res, err := env.SyncInvoke("acct", map[string]any{"account": "a", "delta": 1})
			if err != nil {
				return nil, err
			}
			if _, err := env.EndTx(); err != nil {
				return nil, err
			}
			return res, nil
		}})
	res, err := h.Invoke(context.Background(), "trip", "t-1", nil)
	if err != nil || string(res.Output) != "8" {
		t.Fatalf("trip: %s %v, want the participant's 7 + 1", res.Output, err)
	}
	if got := balances(t, rts["acct"])["bal/a"]; got != "8" {
		t.Fatalf("a = %s after the commit, want 8", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range scans {
		if id != "open-a" && n > 0 {
			t.Errorf("%s scanned the item %d times, want none (its lock step, its read, its write and the end go to the tail open-a left): %v", id, n, scans)
		}
	}
}

// requestLog is a store that batches (store.Batcher) and records the keys each write request
// carries, in order.
type requestLog struct {
	store.Driver
	mu       *sync.Mutex
	requests *[][]store.Key
}

func newRequestLog() (*store.Table, *[][]store.Key) {
	requests := &[][]store.Key{}
	d := requestLog{Driver: memstore.New(memstore.DefaultMaxRowBytes), mu: &sync.Mutex{}, requests: requests}
	return store.NewTable(d, "mem://requests"), requests
}

// requestLoggedSSFs adds an SSF per handler, each on a store of its own whose requests it
// logs.
func requestLoggedSSFs(t *testing.T, h *local.Host, handlers map[string]ssf.Handler) (map[string]*ssf.Runtime, map[string]*[][]store.Key) {
	rts, requests := map[string]*ssf.Runtime{}, map[string]*[][]store.Key{}
	for name, fn := range handlers {
		tbl, reqs := newRequestLog()
		requests[name] = reqs
		rts[name] = addConfig(t, h, ssf.Config{Name: name, Store: tbl, Handler: fn})
	}
	return rts, requests
}

func (l requestLog) record(keys ...store.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.requests = append(*l.requests, keys)
}

func (l requestLog) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	l.record(key)
	return l.Driver.Update(ctx, key, cond, upd)
}

// Scan records a scan as its partition with no sort key.
func (l requestLog) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	l.record(store.Key{Partition: partition})
	return l.Driver.Scan(ctx, partition, opts)
}

func (l requestLog) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	keys := make([]store.Key, len(ups))
	for i, u := range ups {
		keys[i] = u.Key
	}
	l.record(keys...)
	return store.UpdateEach(ctx, l.Driver, ups)
}

// A transaction writes no intent on its own but the owner's: the owner names the participants it
// calls and the ends it sends them by their steps (no invoke-log entry is written for them), and each
// participant's instance in the transaction writes its intent's creation with its first flush
// (the transaction's record and the lock), not in a request of its own. (Each participant's end
// creates its intent with its first commit; on a store without transactions, such as this one,
// that is a flush of its own, since the end logs nothing before it.)
func TestTransactionWritesNoIntentOnItsOwn(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	rts, requests := requestLoggedSSFs(t, h, map[string]ssf.Handler{"hotel": accounts, "flight": accounts,
		"trip": func(env *ssf.Env, in json.RawMessage) (any, error) {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			for _, p := range []string{"hotel", "flight"} {
				if _, err := env.SyncInvoke(p, map[string]any{"account": "a", "delta": 1}); err != nil {
					return nil, err
				}
			}
			return env.EndTx()
		}})
	ctx := context.Background()
	if res, err := h.Invoke(ctx, "trip", "t-1", nil); err != nil || string(res.Output) != "true" {
		t.Fatalf("trip: %+v %v, want it committed", res, err)
	}
	noLocks(t, rts)
	entries := 0
	for _, keys := range *requests["trip"] {
		for _, k := range keys {
			if strings.HasPrefix(k.Sort, "v|") {
				entries++
			}
		}
	}
	if entries != 0 {
		t.Errorf("the owner wrote %d invoke-log entries, want none: its calls of the participants and of their ends are named by their steps", entries)
	}
	for _, participant := range []string{"hotel", "flight"} {
		creations := 0
		for _, keys := range *requests[participant] {
			if !slices.ContainsFunc(keys, func(k store.Key) bool { return strings.HasPrefix(k.Partition, "p|") }) {
				continue // not an intent's creation (with its pending-index entry)
			}
			creations++
			if creations == 1 && len(keys) == 2 {
				t.Errorf("%s: its instance in the transaction created its intent in a request of its own (%v): it should ride the instance's first flush", participant, keys)
			}
		}
		if creations != 2 { // the participant's instance in the transaction, and the end
			t.Errorf("%s: %d intent creations, want 2", participant, creations)
		}
	}
}

// A called instance that begins a transaction creates its intent marked as holding locks, in
// the flush that names its first participant: neither the creation nor the mark is a request of
// its own, and the mark is there before the participant can lock anything.
func TestCalledOwnerCreatesItsIntentMarked(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	rts := map[string]*ssf.Runtime{"hotel": addConfig(t, h, ssf.Config{Name: "hotel", Store: newTable(), Handler: accounts})}
	tbl, reqs := newRequestLog()
	rts["trip"] = addConfig(t, h, ssf.Config{Name: "trip", Store: tbl,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			if _, err := env.SyncInvoke("hotel", map[string]any{"account": "a", "delta": 1}); err != nil {
				return nil, err
			}
			return env.EndTx()
		}})
	addConfig(t, h, ssf.Config{Name: "front", Store: newTable(),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) { return env.SyncInvoke("trip", nil) }})
	ctx := context.Background()
	if res, err := h.Invoke(ctx, "front", "f-1", nil); err != nil || string(res.Output) != "true" {
		t.Fatalf("front: %+v %v, want the trip committed", res, err)
	}
	noLocks(t, rts)
	isPending := func(k store.Key) bool { return strings.HasPrefix(k.Partition, "p|") }
	i := slices.IndexFunc(*reqs, func(keys []store.Key) bool { return slices.ContainsFunc(keys, isPending) })
	if i < 0 {
		t.Fatalf("the trip's requests %v create no intent", *reqs)
	}
	first := (*reqs)[i]
	pending := slices.IndexFunc(first, isPending)
	if len(first) != 2 {
		t.Fatalf("the trip's intent was created with %v, want the intent and its pending-index entry in the flush before the call", first)
	}
	intent := store.Key{Partition: "i|" + first[pending].Sort, Sort: "intent"}
	for _, keys := range *reqs {
		if len(keys) == 1 && keys[0] == intent {
			t.Errorf("the trip's intent was updated in a request of its own: %v", *reqs)
		}
	}
	if a, found, err := tbl.Get(ctx, intent); err != nil || !found || a["HoldsLocks"] != true {
		t.Fatalf("the trip's intent %v (found %v, %v): want it marked as holding locks", a, found, err)
	}
}

// endRendezvous holds the first request of each participant's end until every participant's
// end has begun, or gives up after a while and says so: the participants' ends of one
// transaction go out side by side, not one after the other. Instances are told apart by order
// of appearance on each participant: the execution in the transaction first, then the end.
type endRendezvous struct {
	mu      sync.Mutex
	seen    map[string][]string // participant SSF -> instances, in order of appearance
	all     chan struct{}       // closed once every participant's end has begun
	waiting int
	timeout bool
}

func (r *endRendezvous) Inject(_ context.Context, p ssf.FaultPoint) error {
	if p.SSF != "left" && p.SSF != "right" {
		return nil
	}
	r.mu.Lock()
	ids := r.seen[p.SSF]
	if len(ids) > 0 && ids[len(ids)-1] == p.Instance || len(ids) == 2 {
		r.mu.Unlock()
		return nil
	}
	r.seen[p.SSF] = append(ids, p.Instance)
	end := len(ids) == 1
	if end {
		if r.waiting++; r.waiting == 2 {
			close(r.all)
		}
	}
	r.mu.Unlock()
	if end {
		select {
		case <-r.all:
		case <-time.After(10 * time.Second):
			r.mu.Lock()
			r.timeout = true
			r.mu.Unlock()
		}
	}
	return nil
}

func TestParticipantsEndSideBySide(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	r := &endRendezvous{seen: map[string][]string{}, all: make(chan struct{})}
	rts := map[string]*ssf.Runtime{}
	for _, name := range []string{"left", "right"} {
		rts[name] = addConfig(t, h, ssf.Config{Name: name, Store: newTable(), Handler: accounts, Logger: quietLogger(), Faults: r})
	}
	rts["mover"] = addConfig(t, h, ssf.Config{Name: "mover", Store: newTable(), Logger: quietLogger(), Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		for _, p := range []string{"left", "right"} {
			if _, err := env.SyncInvoke(p, map[string]any{"account": "a", "delta": 5}); err != nil {
				return nil, err
			}
		}
		return env.EndTx()
	}})
	res, err := h.Invoke(context.Background(), "mover", "m-1", nil)
	if err != nil || string(res.Output) != "true" {
		t.Fatalf("the transaction: %+v %v, want it committed", res, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timeout {
		t.Errorf("a participant's end waited for the other's to begin and it never did: the ends went out one after the other (seen %v)", r.seen)
	}
	for _, name := range []string{"left", "right"} {
		if got := balances(t, rts[name])["bal/a"]; got != "5" {
			t.Errorf("%s: a = %s, want the committed 5", name, got)
		}
	}
	noLocks(t, rts)
}

// faultFunc is a FaultInjector from a function of the point.
type faultFunc func(ssf.FaultPoint) error

func (f faultFunc) Inject(_ context.Context, p ssf.FaultPoint) error { return f(p) }

// The owner ends from what it noted in memory, and passes each participant's end what the
// participant's results listed: no transaction record is written by the owner or read by an
// end. A participant whose list is too long to carry reports none, and since it may have called
// any SSF, every end reads its record; either way every item commits and no lock stays held.
func TestEndsStartFromWhatTheParticipantsReported(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	// bulk writes n items with long keys in the transaction: at 200 the list does not fit a
	// result (maxListedBytes).
	bulk := func(env *ssf.Env, in json.RawMessage) (any, error) {
		var n int
		if err := json.Unmarshal(in, &n); err != nil {
			return nil, err
		}
		for i := range n {
			if err := env.Write("bal", fmt.Sprintf("item-%03d-%s", i, strings.Repeat("x", 40)), i); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	rts, requests := requestLoggedSSFs(t, h, map[string]ssf.Handler{"hotel": accounts, "flight": accounts, "bulk": bulk,
		"trip": func(env *ssf.Env, in json.RawMessage) (any, error) {
			var bulkItems int
			if err := json.Unmarshal(in, &bulkItems); err != nil {
				return nil, err
			}
			if err := env.Write("own", "before", 1); err != nil { // outside the transaction
				return nil, err
			}
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			if err := env.Write("own", "k", 7); err != nil { // the owner's own item
				return nil, err
			}
			// hotel twice (two instances of one SSF: their lists add up), flight once.
			for _, call := range []struct{ ssf, account string }{{"hotel", "a"}, {"flight", "a"}, {"hotel", "b"}} {
				if _, err := env.SyncInvoke(call.ssf, map[string]any{"account": call.account, "delta": 1}); err != nil {
					return nil, err
				}
			}
			if _, err := env.SyncInvoke("bulk", bulkItems); err != nil {
				return nil, err
			}
			return env.EndTx()
		}})
	ctx := context.Background()
	reset := func() {
		for _, r := range requests {
			*r = nil
		}
	}
	isRecord := func(k store.Key) bool { return strings.HasPrefix(k.Partition, "x|") }
	recordScans := func(name string) (scans, writes int) {
		for _, keys := range *requests[name] {
			for _, k := range keys {
				switch {
				case isRecord(k) && k.Sort == "":
					scans++
				case isRecord(k):
					writes++
				}
			}
		}
		return scans, writes
	}
	for i, bulkItems := range []int{3, 200} {
		reset()
		if res, err := h.Invoke(ctx, "trip", fmt.Sprintf("t-%d", i), bulkItems); err != nil || string(res.Output) != "true" {
			t.Fatalf("trip with %d bulk items: %+v %v, want it committed", bulkItems, res, err)
		}
		noLocks(t, rts)
		if scans, writes := recordScans("trip"); scans+writes != 0 {
			t.Errorf("the owner read its record %d times and wrote %d notes: it ends from what it noted in memory", scans, writes)
		}
		// An unlisted participant may have called any SSF: then every end reads its record.
		unlisted := bulkItems > 100
		for _, p := range []string{"hotel", "flight", "bulk"} {
			if scans, writes := recordScans(p); unlisted != (scans == 1) || writes == 0 {
				t.Errorf("%s (bulk with %d items): its end read the record %d times (want once only when a participant's list was too long to carry); %d notes written (want the record kept for the collectors)", p, bulkItems, scans, writes)
			}
		}
		want := map[string]map[string]string{"hotel": {"bal/a": fmt.Sprint(i + 1), "bal/b": fmt.Sprint(i + 1)},
			"flight": {"bal/a": fmt.Sprint(i + 1)}, "trip": {"own/k": "7", "own/before": "1"}}
		for name, values := range want {
			got := balances(t, rts[name])
			for k, v := range values {
				if got[k] != v {
					t.Errorf("after trip %d: %s %s = %q, want %s", i, name, k, got[k], v)
				}
			}
		}
		if got := len(balances(t, rts["bulk"])); got < bulkItems {
			t.Errorf("bulk: %d items committed, want %d", got, bulkItems)
		}
	}
}

// A participant the intent collector gave up reports no list (its result is the collector's):
// the owner aborts, and the participant's end reads its record to release the lock it took.
func TestGivenUpParticipantIsEndedFromItsRecord(t *testing.T) {
	c, h, base := relaunchWorld(t)
	participant, owner := base, base
	participant.Name, participant.Store, participant.MaxAttempts = "acct", newTable(), 1
	participant.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.Write("bal", "a", 5); err != nil { // takes a's lock
			return nil, err
		}
		return nil, env.Stop(errors.New("the worker is shutting down")) // every execution
	}
	owner.Name, owner.Store = "owner", newTable()
	owner.Handler = func(env *ssf.Env, in json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		_, err := env.SyncInvoke("acct", nil)
		var app *ssf.AppError
		switch {
		case errors.As(err, &app) || errors.Is(err, ssf.ErrTxAborted):
			if err := env.AbortTx(); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err // not answered: this execution fails, and a relaunch calls again
		}
		return env.EndTx()
	}
	rts := failFirst(t, h, "owner", "o-1", participant, owner)
	relaunchHourly(t, h, c, rts["acct"], 3)
	if gaveUp := rts["acct"].Stats().GaveUp; gaveUp != 1 {
		t.Fatalf("the participant was given up %d times, want once", gaveUp)
	}
	if locks, err := rts["acct"].Locks(context.Background()); err != nil || len(locks) != 1 {
		t.Fatalf("locks before the end: %v %v, want the participant's", locks, err)
	}
	relaunchHourly(t, h, c, rts["owner"], 1)
	if st, err := rts["owner"].Intent(context.Background(), "o-1"); err != nil || !st.Done || string(st.Result.Output) != "false" {
		t.Fatalf("the owner: %+v %v, want it finished with its transaction aborted", st, err)
	}
	noLocks(t, rts)
	if got := balances(t, rts["acct"])["bal/a"]; got != "" {
		t.Fatalf("a = %s, want no committed value", got)
	}
}

// Calls that come back to the owner's SSF (the owner calls itself; a participant's participant
// calls the owner's SSF) make participant instances there, whose items the owner's own list
// does not hold, and which report to the participant that called them, not to the owner: the
// owner's SSF is ended from its record, reached from the owner or through the participants, and
// every item commits. The second round makes the first participant's list too long to report,
// so the owner cannot even tell that it called further.
func TestEndsReachTheOwnersSSFThroughItsParticipants(t *testing.T) {
	h := local.NewHost()
	t.Cleanup(h.Close)
	write := func(env *ssf.Env, key string) error { return env.Write("t", key, key) }
	rts, _ := requestLoggedSSFs(t, h, map[string]ssf.Handler{
		"cyc": func(env *ssf.Env, in json.RawMessage) (any, error) {
			var role struct {
				Name  string
				Extra int // items "other" writes besides its own
			}
			if err := json.Unmarshal(in, &role); err != nil {
				return nil, err
			}
			if role.Name != "owner" { // a participant: "self" or "nested"
				return nil, write(env, role.Name)
			}
			if err := env.BeginTx(); err != nil {
				return nil, err
			}
			if err := write(env, "owner"); err != nil {
				return nil, err
			}
			if _, err := env.SyncInvoke("other", role.Extra); err != nil {
				return nil, err
			}
			if _, err := env.SyncInvoke("cyc", map[string]any{"Name": "self"}); err != nil {
				return nil, err
			}
			return env.EndTx()
		},
		"other": func(env *ssf.Env, in json.RawMessage) (any, error) {
			var extra int
			if err := json.Unmarshal(in, &extra); err != nil {
				return nil, err
			}
			for i := range extra {
				if err := write(env, fmt.Sprintf("extra-%03d-%s", i, strings.Repeat("x", 40))); err != nil {
					return nil, err
				}
			}
			if err := write(env, "other"); err != nil {
				return nil, err
			}
			return env.SyncInvoke("mid", nil)
		},
		"mid": func(env *ssf.Env, in json.RawMessage) (any, error) {
			if err := write(env, "mid"); err != nil {
				return nil, err
			}
			return env.SyncInvoke("cyc", map[string]any{"Name": "nested"})
		}})
	for i, extra := range []int{0, 200} {
		in := map[string]any{"Name": "owner", "Extra": extra}
		if res, err := h.Invoke(context.Background(), "cyc", fmt.Sprintf("c-%d", i), in); err != nil || string(res.Output) != "true" {
			t.Fatalf("cyc (other writing %d more): %+v %v, want it committed", extra, res, err)
		}
		noLocks(t, rts)
		want := map[string][]string{"cyc": {"owner", "self", "nested"}, "other": {"other"}, "mid": {"mid"}}
		for name, keys := range want {
			got := balances(t, rts[name])
			for _, k := range keys {
				if got["t/"+k] != fmt.Sprintf("%q", k) {
					t.Errorf("%s: t/%s = %s, want it committed", name, k, got["t/"+k])
				}
			}
		}
	}
}
