package bank_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

const maxInt64 = math.MaxInt64

// world is the bank on an in-process host, each SSF on its own in-memory table. The accounts
// handler is wrapped: it records every operation it executes, and runs hook first, which the
// race tests use to land another request at a chosen point of a transfer.
type world struct {
	t       *testing.T
	host    *local.Host
	rts     map[string]*ssf.Runtime
	clock   *testclock.Manual
	inj     *faults.Injector // nil: no crashes
	opening map[string]int64
	// transfers and receipts of every transfer submitted with transfer or submit
	transfers map[string]bank.Transfer
	receipts  map[string]bank.Receipt

	mu   sync.Mutex
	ops  []bank.AccountOp
	hook func(op bank.AccountOp)
	errs []error // from hooks, which may run off the test's goroutine
}

type worldOptions struct {
	inj        *faults.Injector
	sequential bool
}

func newWorld(t *testing.T, opening map[string]int64, o worldOptions) *world {
	t.Helper()
	w := &world{t: t, host: local.NewHost(), rts: map[string]*ssf.Runtime{}, inj: o.inj,
		clock: testclock.New(time.Unix(1_700_000_000, 0)), opening: opening,
		transfers: map[string]bank.Transfer{}, receipts: map[string]bank.Receipt{}}
	w.host.Sequential = o.sequential
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	handlers := bank.Handlers()
	accounts := handlers[bank.Accounts]
	handlers[bank.Accounts] = func(env *ssf.Env, input json.RawMessage) (any, error) {
		var op bank.AccountOp
		_ = json.Unmarshal(input, &op)
		w.mu.Lock()
		w.ops = append(w.ops, op)
		hook := w.hook
		w.mu.Unlock()
		if hook != nil {
			hook(op)
		}
		return accounts(env, input)
	}
	for name, h := range handlers {
		cfg := ssf.Config{Name: name, Store: store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://"),
			Handler: h, RowCapacity: 2, Lifetime: time.Hour, GCBound: 2 * time.Hour, RelaunchDelay: time.Nanosecond,
			Clock: w.clock, Logger: quiet}
		if o.inj != nil {
			cfg.Faults = o.inj
		}
		rt, err := w.host.Add(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	t.Cleanup(w.host.Close)
	for _, a := range slices.Sorted(maps.Keys(opening)) {
		if res := w.open(t, "open-"+a, a, opening[a]); res.Err() != nil {
			t.Fatalf("opening %s: %v", a, res.Err())
		}
	}
	return w
}

// open calls the accounts SSF's open directly (crashes are never enabled around it).
func (w *world) open(t *testing.T, id, account string, amount int64) ssf.Result {
	t.Helper()
	res, err := w.host.Invoke(context.Background(), bank.Accounts, id, bank.AccountOp{Op: "open", Account: account, Amount: amount})
	if err != nil {
		t.Fatalf("open %s: %v", account, err)
	}
	return res
}

// transfer runs one transfer to the end, without crashes, and returns its receipt.
func (w *world) transfer(t *testing.T, id string, tr bank.Transfer) bank.Receipt {
	t.Helper()
	res, err := w.host.Invoke(context.Background(), bank.Teller, id, tr)
	if err != nil || res.Err() != nil {
		t.Fatalf("transfer %s %+v: %v %v", id, tr, err, res.Err())
	}
	var r bank.Receipt
	if err := json.Unmarshal(res.Output, &r); err != nil {
		t.Fatalf("transfer %s: receipt %s: %v", id, res.Output, err)
	}
	w.host.Wait() // audit's entry
	w.transfers[id], w.receipts[id] = tr, r
	return r
}

// submit delivers a transfer as a platform does (retried until accepted), crashes or not;
// finish collects the receipts once the intent collectors have finished everything.
func (w *world) submit(t *testing.T, id string, tr bank.Transfer) {
	crashkit.Submit(t, w.host, w.rts[bank.Teller], id, tr)
	w.mu.Lock()
	w.transfers[id] = tr
	w.mu.Unlock()
}

// submitFromHook is submit for hooks: they may run on a goroutine of the host's, where a test
// must not stop, so problems are collected for finish.
func (w *world) submitFromHook(id string, tr bank.Transfer) {
	ctx := context.Background()
	w.mu.Lock()
	w.transfers[id] = tr
	w.mu.Unlock()
	for range 100 {
		if _, err := w.host.Invoke(ctx, bank.Teller, id, tr); err == nil {
			return
		}
		if st, err := w.rts[bank.Teller].Intent(ctx, id); err == nil && st.Exists {
			return // accepted: the intent collector finishes it
		}
	}
	w.mu.Lock()
	w.errs = append(w.errs, fmt.Errorf("hook: transfer %s never accepted", id))
	w.mu.Unlock()
}

func (w *world) finish(t *testing.T) {
	t.Helper()
	if w.inj != nil {
		crashkit.Drain(t, w.host, w.clock, w.rts)
		w.inj.Enable(false)
	}
	w.host.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Error(err)
	}
	for id := range w.transfers {
		st, err := w.rts[bank.Teller].Intent(context.Background(), id)
		if err != nil || !st.Done {
			t.Fatalf("transfer %s not finished (err %v)", id, err)
		}
		if st.Result.Error != "" {
			t.Fatalf("transfer %s failed: %s", id, st.Result.Error)
		}
		var r bank.Receipt
		if err := json.Unmarshal(st.Result.Output, &r); err != nil {
			t.Fatalf("transfer %s: receipt %s: %v", id, st.Result.Output, err)
		}
		w.receipts[id] = r
	}
}

func (w *world) setHook(h func(bank.AccountOp)) {
	w.mu.Lock()
	w.hook = h
	w.mu.Unlock()
}

// takeOps returns the accounts operations executed since the last call.
func (w *world) takeOps() []bank.AccountOp {
	w.mu.Lock()
	defer w.mu.Unlock()
	ops := w.ops
	w.ops = nil
	return ops
}

func (w *world) items(t *testing.T) bank.Items {
	t.Helper()
	it, err := bank.Snapshot(context.Background(), w.rts)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func (w *world) balance(t *testing.T, account string) (int64, bool) {
	t.Helper()
	raw, ok := w.items(t)[bank.Accounts]["balances/"+account]
	var b int64
	if ok {
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatalf("balance of %s: %s: %v", account, raw, err)
		}
	}
	return b, ok
}

// check runs the application's invariants: money conserved, every transfer applied exactly
// once or not at all, the ledger agreeing with the receipts.
func (w *world) check(t *testing.T) {
	t.Helper()
	if err := bank.Check(w.opening, w.receipts, w.transfers, w.items(t)); err != nil {
		t.Fatalf("invariants violated: %v", err)
	}
}

func sameItems(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

// show prints an SSF's items as table/key=value, sorted.
func show(items map[string][]byte) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(items)) {
		parts = append(parts, k+"="+string(items[k]))
	}
	return strings.Join(parts, " ")
}

func ledgerEntry(t *testing.T, it bank.Items, id string) bank.LedgerEntry {
	t.Helper()
	var e bank.LedgerEntry
	raw, ok := it[bank.Audit]["ledger/"+id]
	if !ok {
		t.Fatalf("transfer %s: no ledger entry", id)
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("ledger entry %s: %s: %v", id, raw, err)
	}
	return e
}

func TestTransferApplied(t *testing.T) {
	w := newWorld(t, map[string]int64{"alice": 100, "bob": 100}, worldOptions{})
	r := w.transfer(t, "t1", bank.Transfer{From: "alice", To: "bob", Amount: 30})
	if !r.Applied || r.Reason != "" || r.Refund != "" || r.Seq != 1 {
		t.Fatalf("receipt %+v, want applied", r)
	}
	if a, _ := w.balance(t, "alice"); a != 70 {
		t.Errorf("alice has %d, want 70", a)
	}
	if b, _ := w.balance(t, "bob"); b != 130 {
		t.Errorf("bob has %d, want 130", b)
	}
	w.check(t)
}

// Every one of these is refused before any money moves: the balances are byte for byte what
// they were, no refund was needed, and the receipt and the ledger say why.
func TestRefusedBeforeAnyEffect(t *testing.T) {
	opening := map[string]int64{"alice": 1000, "bob": 100, "vault": maxInt64 - 100}
	w := newWorld(t, opening, worldOptions{})
	cases := []struct {
		name   string
		tr     bank.Transfer
		reason string // the prefix of the receipt's reason
	}{
		{"to a missing account", bank.Transfer{From: "alice", To: "nobody", Amount: 30}, `no account "nobody"`},
		{"from a missing account", bank.Transfer{From: "nobody", To: "alice", Amount: 30}, `no account "nobody"`},
		{"between missing accounts", bank.Transfer{From: "nobody", To: "noone", Amount: 30}, `no account "noone"`},
		{"zero amount", bank.Transfer{From: "alice", To: "bob", Amount: 0}, bank.ReasonBadAmount},
		{"negative amount", bank.Transfer{From: "alice", To: "bob", Amount: -30}, bank.ReasonBadAmount},
		{"most negative amount", bank.Transfer{From: "alice", To: "bob", Amount: math.MinInt64}, bank.ReasonBadAmount},
		{"negative amount to a missing account", bank.Transfer{From: "alice", To: "nobody", Amount: -30}, bank.ReasonBadAmount},
		{"same account", bank.Transfer{From: "alice", To: "alice", Amount: 30}, bank.ReasonSameAccount},
		{"no payer", bank.Transfer{To: "alice", Amount: 30}, bank.ReasonNoName},
		{"no payee", bank.Transfer{From: "alice", Amount: 30}, bank.ReasonNoName},
		{"insufficient funds", bank.Transfer{From: "alice", To: "bob", Amount: 1001}, bank.ReasonInsufficientFunds},
		{"overflowing deposit", bank.Transfer{From: "alice", To: "vault", Amount: 101}, `balance would overflow: "vault" holds 9223372036854775707`},
		{"overflowing deposit, largest amount", bank.Transfer{From: "vault", To: "alice", Amount: maxInt64}, bank.ReasonOverflow},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := w.items(t)[bank.Accounts]
			w.takeOps()
			id := fmt.Sprintf("t%02d", i)
			r := w.transfer(t, id, c.tr)
			if r.Applied || r.Refund != "" || !strings.HasPrefix(r.Reason, c.reason) {
				t.Errorf("receipt %+v, want refused with a reason starting %q, and no refund", r, c.reason)
			}
			after := w.items(t)
			if !sameItems(before, after[bank.Accounts]) {
				t.Errorf("the accounts changed:\nbefore %s\nafter  %s", show(before), show(after[bank.Accounts]))
			}
			for _, op := range w.takeOps() {
				if op.Op == "deposit" || op.Op == "refund" {
					t.Errorf("accounts ran %+v for a refused transfer", op)
				}
			}
			for _, missing := range []string{"nobody", "noone", ""} {
				if v, ok := after[bank.Accounts]["balances/"+missing]; ok {
					t.Errorf("account %q, never opened, has a balance: %s", missing, v)
				}
			}
			if e := ledgerEntry(t, after, id); e.Applied || e.Reason != r.Reason || e.Refund != "" {
				t.Errorf("ledger entry %+v, want refused with the receipt's reason %q", e, r.Reason)
			}
		})
	}
	// A refused transfer still gets its number and its ledger entry.
	if r := w.transfer(t, "last", bank.Transfer{From: "alice", To: "bob", Amount: 1}); !r.Applied || r.Seq != int64(len(cases)+1) {
		t.Errorf("receipt %+v, want applied with seq %d", r, len(cases)+1)
	}
	w.check(t)
}

// Check rejects a refusal that no order of the transfers explains (what a stale read of a
// balance would cause; the sums cannot see it), and accepts the same refusals where they were
// possible.
func TestCheckRejectsImpossibleRefusals(t *testing.T) {
	w := newWorld(t, map[string]int64{"alice": 1000, "bob": 100, "vault": maxInt64 - 100}, worldOptions{})
	for id, tr := range map[string]bank.Transfer{
		"poor": {From: "bob", To: "alice", Amount: 150},
		"full": {From: "alice", To: "vault", Amount: 101},
		"paid": {From: "bob", To: "alice", Amount: 60},
	} {
		if r := w.transfer(t, id, tr); r.Applied != (id == "paid") {
			t.Fatalf("transfer %s: receipt %+v", id, r)
		}
	}
	w.check(t)
	// Told that bob opened with 210 and the vault with 101 short of the limit, bob held at
	// least 150 after paying 60, and the vault had room for 101.
	richer := map[string]int64{"alice": 1000, "bob": 210, "vault": maxInt64 - 101}
	err := bank.Check(richer, w.receipts, w.transfers, w.items(t))
	for _, want := range []string{
		`transfer poor: refused for insufficient funds, but "bob" never held less than 150`,
		`transfer full: refused for overflow, but "vault" never held more than 9223372036854775706`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check with richer openings: %v\nwant it to say %q", err, want)
		}
	}
}

// A deposit that fits exactly is applied; one unit more is refused (it used to wrap around to
// a negative balance).
func TestDepositUpToTheLimit(t *testing.T) {
	w := newWorld(t, map[string]int64{"alice": 1000, "vault": maxInt64 - 100}, worldOptions{})
	if r := w.transfer(t, "t1", bank.Transfer{From: "alice", To: "vault", Amount: 100}); !r.Applied {
		t.Fatalf("receipt %+v, want applied: the vault reaches MaxInt64 exactly", r)
	}
	if r := w.transfer(t, "t2", bank.Transfer{From: "alice", To: "vault", Amount: 1}); r.Applied || !strings.HasPrefix(r.Reason, bank.ReasonOverflow) {
		t.Fatalf("receipt %+v, want refused for overflow", r)
	}
	if v, _ := w.balance(t, "vault"); v != maxInt64 {
		t.Errorf("vault has %d, want %d", v, int64(maxInt64))
	}
	w.check(t)

	// The accounts SSF refuses an overflowing deposit itself, whoever calls it.
	for _, amount := range []int64{1, maxInt64} {
		res, err := w.host.Invoke(context.Background(), bank.Accounts, fmt.Sprint("deposit-", amount), bank.AccountOp{Op: "deposit", Account: "vault", Amount: amount})
		if err != nil || !strings.HasPrefix(res.Error, bank.ReasonOverflow) {
			t.Errorf("deposit of %d into a full vault: %+v %v, want refused for overflow", amount, res, err)
		}
	}
	if v, _ := w.balance(t, "vault"); v != maxInt64 {
		t.Errorf("vault has %d after the refused deposits, want %d", v, int64(maxInt64))
	}
}

func TestOpeningsRefused(t *testing.T) {
	w := newWorld(t, map[string]int64{"alice": 100}, worldOptions{})
	refusals := []struct {
		name, id, account string
		amount            int64
		reason            string
	}{
		{"negative opening balance", "open-mallory", "mallory", -500, bank.ReasonNegativeOpening},
		{"most negative opening balance", "open-mallory-2", "mallory", math.MinInt64, bank.ReasonNegativeOpening},
		{"opened twice", "open-alice-again", "alice", 5000, bank.ReasonAlreadyOpen},
		{"no name", "open-nameless", "", 10, bank.ReasonNoName},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			before := w.items(t)[bank.Accounts]
			if res := w.open(t, c.id, c.account, c.amount); !strings.HasPrefix(res.Error, c.reason) {
				t.Errorf("result %+v, want refused with a reason starting %q", res, c.reason)
			}
			if after := w.items(t)[bank.Accounts]; !sameItems(before, after) {
				t.Errorf("the accounts changed:\nbefore %s\nafter  %s", show(before), show(after))
			}
		})
	}
	// A retried opening (the same request id) is answered as the first time: opened.
	if res := w.open(t, "open-alice", "alice", 100); res.Err() != nil || string(res.Output) != "true" {
		t.Errorf("retried opening: %+v, want the first answer, true", res)
	}
	if res := w.open(t, "open-zero", "zed", 0); res.Err() != nil {
		t.Errorf("an opening balance of zero: %v", res.Err())
	}
	if r := w.transfer(t, "t1", bank.Transfer{From: "alice", To: "mallory", Amount: 10}); r.Applied || !strings.HasPrefix(r.Reason, bank.ReasonNoAccount) {
		t.Errorf("transfer to the account whose opening was refused: %+v, want refused", r)
	}
	w.opening["zed"] = 0
	w.check(t)
}

// raceFill makes a transfer of fill into payee land while a transfer's withdraw from payer
// runs: after the teller found room in payee, before its deposit. The accounts SSF is what
// calls it, as a concurrent client's request would reach it.
func (w *world) raceFill(payer string, amount int64, id string, fill bank.Transfer) {
	w.raceOn("withdraw", payer, amount, id, fill)
}

// raceDeposit makes a transfer land while the deposit of amount into payee runs.
func (w *world) raceDeposit(payee string, amount int64, id string, fill bank.Transfer) {
	w.raceOn("deposit", payee, amount, id, fill)
}

// raceOn submits the transfer fill, once, while the accounts operation op of amount on
// account runs.
func (w *world) raceOn(op, account string, amount int64, id string, fill bank.Transfer) {
	var once sync.Once
	prev := w.hook
	w.setHook(func(o bank.AccountOp) {
		if prev != nil {
			prev(o)
		}
		if o.Op == op && o.Account == account && o.Amount == amount {
			once.Do(func() { w.submitFromHook(id, fill) })
		}
	})
}

// The teller checks the payee's room, withdraws, and meanwhile another transfer fills the
// payee: the deposit is refused, and the teller refunds the payer, once.
func TestRefundWhenDepositRefused(t *testing.T) {
	w := newWorld(t, map[string]int64{"alice": 100, "bob": maxInt64 - 100, "carol": 100}, worldOptions{})
	w.raceFill("alice", 30, "fill", bank.Transfer{From: "carol", To: "bob", Amount: 80})
	r := w.transfer(t, "t1", bank.Transfer{From: "alice", To: "bob", Amount: 30})
	w.finish(t)
	if fill := w.receipts["fill"]; !fill.Applied {
		t.Fatalf("the racing transfer: %+v, want applied", fill)
	}
	if r.Applied || r.Refund != bank.RefundedToPayer || !strings.HasPrefix(r.Reason, bank.ReasonOverflow) || !strings.Contains(r.Reason, "refunded") {
		t.Fatalf("receipt %+v, want refused for overflow and refunded to the payer", r)
	}
	refunds := 0
	for _, op := range w.takeOps() {
		if op.Op == "refund" {
			refunds++
			if op.Account != "alice" || op.Amount != 30 || op.Ref != "t1" {
				t.Errorf("refund %+v, want 30 to alice for t1", op)
			}
		}
	}
	if refunds != 1 {
		t.Errorf("%d refunds ran, want 1", refunds)
	}
	if a, _ := w.balance(t, "alice"); a != 100 {
		t.Errorf("alice has %d, want her 100 back", a)
	}
	if b, _ := w.balance(t, "bob"); b != maxInt64-20 {
		t.Errorf("bob has %d, want %d", b, int64(maxInt64-20))
	}
	if e := ledgerEntry(t, w.items(t), "t1"); e.Applied || e.Refund != bank.RefundedToPayer || e.Reason != r.Reason {
		t.Errorf("ledger entry %+v, want the refund recorded", e)
	}
	w.check(t)
}

// The refund itself finds no room: between the withdraw and the refund, other transfers filled
// the payer too (possible only when the bank holds more than MaxInt64 in all). The money is
// held in suspense, counted, and the receipt says so.
func TestRefundHeldInSuspense(t *testing.T) {
	opening := map[string]int64{"alice": 100, "bob": maxInt64 - 100, "carol": 100, "vault": maxInt64 - 50}
	w := newWorld(t, opening, worldOptions{})
	w.raceFill("alice", 30, "fill", bank.Transfer{From: "carol", To: "bob", Amount: 80})
	w.raceDeposit("bob", 30, "flood", bank.Transfer{From: "vault", To: "alice", Amount: maxInt64 - 90})
	r := w.transfer(t, "t1", bank.Transfer{From: "alice", To: "bob", Amount: 30})
	w.finish(t)
	if !w.receipts["fill"].Applied || !w.receipts["flood"].Applied {
		t.Fatalf("the racing transfers: %+v, want both applied", w.receipts)
	}
	if r.Applied || r.Refund != bank.HeldInSuspense || !strings.HasPrefix(r.Reason, bank.ReasonOverflow) || !strings.Contains(r.Reason, "suspense") {
		t.Fatalf("receipt %+v, want refused for overflow and held in suspense", r)
	}
	var held bank.Held
	if err := json.Unmarshal(w.items(t)[bank.Accounts]["suspense/t1"], &held); err != nil || held != (bank.Held{Account: "alice", Amount: 30}) {
		t.Fatalf("suspense/t1: %+v %v, want 30 held for alice", held, err)
	}
	if a, _ := w.balance(t, "alice"); a != maxInt64-20 {
		t.Errorf("alice has %d, want %d", a, int64(maxInt64-20))
	}
	w.check(t)
}

// The race, crashed once at each injection point in turn: whatever the outcome (the racing
// transfer may now land later), every transfer is applied once or refused or compensated, and
// money is conserved. The suspense scenario, which passes the refund scenario's points and
// more, crashes at every third point to keep the run short under the race detector.
func TestRaceCrashedAtEveryPoint(t *testing.T) {
	for scenario, stride := range map[string]int{"refund": 1, "suspense": 3} {
		t.Run(scenario, func(t *testing.T) {
			run := func(t *testing.T, inj *faults.Injector) *world {
				opening := map[string]int64{"alice": 100, "bob": maxInt64 - 100, "carol": 100, "vault": maxInt64 - 50}
				w := newWorld(t, opening, worldOptions{inj: inj, sequential: true})
				w.raceFill("alice", 30, "fill", bank.Transfer{From: "carol", To: "bob", Amount: 80})
				if scenario == "suspense" {
					w.raceDeposit("bob", 30, "flood", bank.Transfer{From: "vault", To: "alice", Amount: maxInt64 - 90})
				}
				inj.Enable(true)
				w.submit(t, "t1", bank.Transfer{From: "alice", To: "bob", Amount: 30})
				w.finish(t)
				w.check(t)
				return w
			}
			clean := faults.At(0)
			want := run(t, clean).receipts["t1"].Refund
			if want == "" {
				t.Fatalf("the clean run did not compensate")
			}
			points, outcomes := clean.Points(), map[string]int{}
			for k := 1; k <= points; k += stride {
				w := run(t, faults.At(k))
				if n := len(w.inj.Crashes()); n != 1 {
					t.Fatalf("crash at point %d: %d crashes", k, n)
				}
				outcomes[w.receipts["t1"].Refund]++
				if t.Failed() {
					t.Fatalf("crash at point %d (%v)", k, w.inj.Crashes())
				}
			}
			if outcomes[want] == 0 {
				t.Fatalf("no crashed run compensated: %v", outcomes)
			}
			t.Logf("%d points; t1's refund by run: %v", points, outcomes)
		})
	}
}

// Transfers of every kind, valid or not, at once, with crashes: among accounts near the int64
// limit, so deposits race for the room left, and missing ones.
func TestConcurrentMixWithCrashes(t *testing.T) {
	seed := crashkit.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	opening := map[string]int64{"alice": 500, "bob": 500, "vault": maxInt64 - 300, "safe": maxInt64 - 300}
	names := []string{"alice", "bob", "vault", "safe", "nobody"}
	inj := faults.Random(seed, 0.01, 20)
	w := newWorld(t, opening, worldOptions{inj: inj})
	inj.Enable(true)
	var wg sync.WaitGroup
	for i := range 60 {
		tr := bank.Transfer{From: names[rng.Intn(len(names))], To: names[rng.Intn(len(names))], Amount: 1 + rng.Int63n(200)}
		if rng.Intn(8) == 0 {
			tr.Amount = -tr.Amount
		}
		id := fmt.Sprintf("t%02d", i)
		w.transfers[id] = tr
		wg.Go(func() { crashkit.Submit(t, w.host, w.rts[bank.Teller], id, tr) })
	}
	wg.Wait()
	w.finish(t)
	w.check(t)
	kinds := map[string]int{}
	for _, r := range w.receipts {
		switch {
		case r.Applied:
			kinds["applied"]++
		case r.Refund != "":
			kinds["compensated"]++
		default:
			kinds["refused"]++
		}
	}
	t.Logf("seed %d: %d crashes; %v", seed, len(inj.Crashes()), kinds)
}
