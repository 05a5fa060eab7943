// Package bank is a small money-transfer application on ssfkit, used by the demo and by the
// crash-injection suite. Three SSFs, each owning its own store:
//
//	teller    the entry point: numbers the request, checks it, moves the money by calling
//	          accounts synchronously (withdraw, then deposit; a refund if the deposit is
//	          refused), and reports to audit asynchronously
//	accounts  the balances; withdraw, deposit and refund are compare-and-swap loops over
//	          CondWrite
//	audit     the ledger: one entry per transfer, plus the payer's balance it sees by calling
//	          accounts synchronously (an async instance making a nested sync call)
//
// Without ssfkit, a crash between the withdraw and the deposit loses money, and a retried
// request moves it twice. With it, every transfer is applied exactly once, whatever crashes.
//
// The bank's own promise: a transfer is either applied, or refused before any money moved
// (a missing account on either side, a zero or negative amount, one account on both sides,
// insufficient funds, a deposit that would overflow the payee's balance), or compensated: the
// payee's deposit was refused after the payer's withdraw, and the teller gave the money back
// in the same instance. Each outcome is in the receipt (Applied, Reason, Refund) and in the
// ledger (a refused transfer is still numbered and audited). An account is opened once, with
// a balance of zero or more, and never closed. So money is conserved: the balances (plus the
// suspense table, see refund) add up to the opening balances once every transfer has
// finished, whatever the requests were.
package bank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// SSF names.
const (
	Teller   = "teller"
	Accounts = "accounts"
	Audit    = "audit"
)

// Transfer is the teller's input.
type Transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// Receipt is the teller's output. A refused transfer has Applied false and says why in Reason;
// Refund is set only when money had left the payer and was given back (the transfer was
// compensated).
type Receipt struct {
	Seq     int64  `json:"seq"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
	Refund  string `json:"refund,omitempty"` // RefundedToPayer or HeldInSuspense
}

// Where the money of a compensated transfer went (Receipt.Refund, LedgerEntry.Refund).
const (
	// RefundedToPayer: credited back to the payer's balance.
	RefundedToPayer = "payer"
	// HeldInSuspense: the payer's balance had no room for it (see refund), so the accounts SSF
	// keeps it in its suspense table, under the transfer's instance id.
	HeldInSuspense = "suspense"
)

// The reasons a transfer or an opening is refused begin with one of these; the rest names the
// accounts and amounts.
const (
	ReasonInsufficientFunds = "insufficient funds"
	ReasonNoAccount         = "no account"
	ReasonOverflow          = "balance would overflow"
	ReasonBadAmount         = "amount must be positive"
	ReasonSameAccount       = "payer and payee are the same account"
	ReasonNoName            = "account name missing"
	ReasonNegativeOpening   = "opening balance must not be negative"
	ReasonAlreadyOpen       = "account already open"
)

// AccountOp is the accounts SSF's input. The operations, and what they answer:
//
//	open      true; refused if the balance is negative or the account exists (a retry of
//	          the same request is answered true again, from the log)
//	lookup    an AccountInfo
//	balance   the balance, 0 for a missing account
//	withdraw  true, or false for insufficient funds
//	deposit   true; refused if the balance would overflow
//	refund    RefundedToPayer or HeldInSuspense (see refund)
//
// A refusal, or a missing account, is an application error whose message begins with one of
// the Reason constants; nothing changed.
type AccountOp struct {
	Op      string `json:"op"`
	Account string `json:"account"`
	Amount  int64  `json:"amount,omitempty"`
	// Ref names the transfer a refund belongs to: the key of its suspense entry, if any.
	Ref string `json:"ref,omitempty"`
}

// AccountInfo is the output of the accounts SSF's lookup.
type AccountInfo struct {
	Open    bool  `json:"open"`
	Balance int64 `json:"balance"`
}

// Held is a suspense entry: money withdrawn from Account by a transfer whose deposit was
// refused and whose refund found no room in Account's balance.
type Held struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// LedgerEntry is what audit records per transfer. Reason and Refund are the receipt's.
type LedgerEntry struct {
	Transfer     string `json:"transfer"` // the teller instance id
	From         string `json:"from"`
	To           string `json:"to"`
	Amount       int64  `json:"amount"`
	Applied      bool   `json:"applied"`
	Reason       string `json:"reason,omitempty"`
	Refund       string `json:"refund,omitempty"`
	PayerBalance int64  `json:"payer_balance"`
}

// Handlers returns the application's SSF handlers by name. Input that does not decode into an
// SSF's input type (Transfer, AccountOp) is refused with an application error naming the type
// (ssf.Typed).
func Handlers() map[string]ssf.Handler {
	return map[string]ssf.Handler{Teller: ssf.Typed(teller), Accounts: ssf.Typed(accounts), Audit: ssf.Typed(audit)}
}

func teller(env *ssf.Env, t Transfer) (Receipt, error) {
	at, err := env.Now()
	if err != nil {
		return Receipt{}, err
	}
	seq, _, err := casInt(env, "teller", "seq", increment)
	if err != nil {
		return Receipt{}, err
	}
	// The stamp is logged once; audit must see the same one, however often this re-runs.
	if err := env.Write("stamps", env.InstanceID(), at.UnixNano()); err != nil {
		return Receipt{}, err
	}
	receipt, err := move(env, t)
	if err != nil {
		return Receipt{}, err
	}
	receipt.Seq = seq
	entry := LedgerEntry{Transfer: env.InstanceID(), From: t.From, To: t.To, Amount: t.Amount,
		Applied: receipt.Applied, Reason: receipt.Reason, Refund: receipt.Refund}
	if err := env.AsyncInvoke(Audit, auditRecord{Entry: entry, Stamp: at.UnixNano()}); err != nil {
		return Receipt{}, err
	}
	return receipt, nil
}

// move applies t, refuses it, or compensates it; an error is an infrastructure failure (the
// instance is left for the intent collector, which re-runs it: every call below is a logged
// step, so the re-run replays the outcomes already reached and never moves money twice).
//
// What is checked where, and why it holds under concurrency:
//   - the transfer itself (names, amount) before any call;
//   - the payee's existence before the withdraw: accounts are opened, never closed, so a
//     payee found here is still there at the deposit;
//   - the payee's room for the amount before the withdraw too, but other transfers can deposit
//     into the payee in between, so the deposit checks again and may be refused: then the
//     teller refunds the payer (compensation), as one more logged step;
//   - the payer's existence and funds by the withdraw itself, atomically.
func move(env *ssf.Env, t Transfer) (Receipt, error) {
	refused := func(reason string) (Receipt, error) { return Receipt{Reason: reason}, nil }
	if reason := t.invalid(); reason != "" {
		return refused(reason)
	}
	var payee AccountInfo
	if reason, err := callAccounts(env, AccountOp{Op: "lookup", Account: t.To}, &payee); err != nil || reason != "" {
		return Receipt{Reason: reason}, err
	}
	switch {
	case !payee.Open:
		return refused(noAccount(t.To))
	case !fits(payee.Balance, t.Amount):
		return refused(overflow(t.To, payee.Balance, t.Amount))
	}
	var withdrawn bool
	if reason, err := callAccounts(env, AccountOp{Op: "withdraw", Account: t.From, Amount: t.Amount}, &withdrawn); err != nil || reason != "" {
		return Receipt{Reason: reason}, err // no such payer: nothing was withdrawn
	}
	if !withdrawn {
		return refused(ReasonInsufficientFunds)
	}
	reason, err := callAccounts(env, AccountOp{Op: "deposit", Account: t.To, Amount: t.Amount}, nil)
	if err != nil {
		return Receipt{}, err
	}
	if reason == "" {
		return Receipt{Applied: true}, nil
	}
	// The deposit was refused after the withdraw: give the money back.
	var where string
	why, err := callAccounts(env, AccountOp{Op: "refund", Account: t.From, Amount: t.Amount, Ref: env.InstanceID()}, &where)
	if err != nil {
		return Receipt{}, err
	}
	if why != "" {
		// Only a client calling refund itself with this instance's id as Ref can cause this
		// (see refund): fail loudly rather than pretend the money went back.
		return Receipt{}, fmt.Errorf("transfer %s: %d withdrawn from %q, the deposit refused (%s), and the refund refused: %s", env.InstanceID(), t.Amount, t.From, reason, why)
	}
	if where == HeldInSuspense {
		return Receipt{Reason: fmt.Sprintf("%s; the %d withdrawn from %q are held in suspense: its balance has no room for them", reason, t.Amount, t.From), Refund: where}, nil
	}
	return Receipt{Reason: fmt.Sprintf("%s; the %d withdrawn from %q were refunded", reason, t.Amount, t.From), Refund: where}, nil
}

// invalid says what is wrong with t on its face, or "".
func (t Transfer) invalid() string {
	switch {
	case t.Amount <= 0:
		return badAmount(t.Amount)
	case t.From == "" || t.To == "":
		return ReasonNoName
	case t.From == t.To:
		return ReasonSameAccount
	}
	return ""
}

// callAccounts calls the accounts SSF and decodes its output into out (if not nil). The
// accounts SSF refuses an operation with an application error, before it changed anything:
// its message is returned as the reason. err is any other failure.
func callAccounts(env *ssf.Env, op AccountOp, out any) (reason string, err error) {
	raw, err := env.SyncInvoke(Accounts, op)
	if appErr := (*ssf.AppError)(nil); errors.As(err, &appErr) {
		return appErr.Message, nil
	}
	if err != nil || out == nil {
		return "", err
	}
	return "", json.Unmarshal(raw, out)
}

func noAccount(name string) string { return fmt.Sprintf("%s %q", ReasonNoAccount, name) }

func badAmount(amount int64) string { return fmt.Sprintf("%s, got %d", ReasonBadAmount, amount) }

func overflow(name string, balance, amount int64) string {
	return fmt.Sprintf("%s: %q holds %d, and %d more exceeds the limit %d", ReasonOverflow, name, balance, amount, int64(math.MaxInt64))
}

// fits reports whether balance + amount (amount > 0) is an int64.
func fits(balance, amount int64) bool { return balance <= math.MaxInt64-amount }

// accounts answers a bool, an int64, an AccountInfo or a string, by operation (see AccountOp).
func accounts(env *ssf.Env, op AccountOp) (any, error) {
	// Every refusal below is an error returned before the operation's write: the caller sees it
	// as an application error, and knows nothing changed.
	switch {
	case !strings.Contains(" open balance lookup withdraw deposit refund ", " "+op.Op+" "):
		return nil, fmt.Errorf("unknown account operation %q", op.Op)
	case op.Account == "":
		return nil, errors.New(ReasonNoName)
	}
	switch op.Op {
	case "open":
		if op.Amount < 0 {
			return nil, fmt.Errorf("%s: %q opened with %d", ReasonNegativeOpening, op.Account, op.Amount)
		}
		opened, err := env.CondWrite("balances", op.Account, op.Amount, store.Equal(nil, nil))
		if err == nil && !opened {
			err = fmt.Errorf("%s: %q", ReasonAlreadyOpen, op.Account)
		}
		return opened, err
	case "balance":
		var bal int64
		_, err := env.ReadInto("balances", op.Account, &bal)
		return bal, err
	case "lookup":
		var info AccountInfo
		found, err := env.ReadInto("balances", op.Account, &info.Balance)
		info.Open = found
		return info, err
	case "withdraw", "deposit":
		if op.Amount <= 0 {
			return nil, errors.New(badAmount(op.Amount))
		}
		_, ok, err := casInt(env, "balances", op.Account, func(bal int64, found bool) (int64, bool, error) {
			switch {
			case !found:
				return 0, false, errors.New(noAccount(op.Account))
			case op.Op == "withdraw":
				return bal - op.Amount, bal >= op.Amount, nil
			case !fits(bal, op.Amount):
				// Before this check, the deposit wrapped around to a negative balance.
				return 0, false, errors.New(overflow(op.Account, bal, op.Amount))
			}
			return bal + op.Amount, true, nil
		})
		return ok, err
	}
	return refund(env, op)
}

// refund gives a payer back the amount a transfer withdrew when its deposit was refused. It is
// never refused for lack of room: money must not vanish.
//
// Can the refund overflow the payer's balance? Only if the bank holds more than MaxInt64 in
// all. Through transfers, every unit of money opened is in exactly one place: a balance, a
// transfer in flight (withdrawn, not yet deposited or refunded), or the suspense table, and
// none of these is negative (openings are not, a withdraw never goes below zero). The refunded
// amount is in flight, so the payer's balance plus the amount is at most the sum of
// everything, the total opened; if that fits in an int64, the refund fits. (The same argument
// shows that no deposit of a transfer can overflow either; the deposit's check matters for
// banks that open more than MaxInt64 in all, and for clients calling deposit directly.)
//
// If the total does exceed MaxInt64 (or an account was opened negative before openings were
// checked), other transfers may fill the payer's balance between the withdraw and the refund. Then the amount goes to the suspense table under op.Ref (the
// transfer's instance id, unique per transfer, so the key is free and the write cannot
// overflow anything): still counted, never lost, and the receipt says where it is. The
// decision is made inside the compare-and-swap loop on logged reads, so a re-execution takes
// the same branch.
func refund(env *ssf.Env, op AccountOp) (any, error) {
	if op.Amount <= 0 {
		return nil, errors.New(badAmount(op.Amount))
	}
	if op.Ref == "" {
		return nil, errors.New("refund: ref missing: it names the transfer")
	}
	_, credited, err := casInt(env, "balances", op.Account, func(bal int64, found bool) (int64, bool, error) {
		return bal + op.Amount, found && fits(bal, op.Amount), nil
	})
	if err != nil || credited {
		return RefundedToPayer, err
	}
	held, err := env.CondWrite("suspense", op.Ref, Held{Account: op.Account, Amount: op.Amount}, store.Equal(nil, nil))
	if err == nil && !held {
		err = fmt.Errorf("refund: suspense entry %q exists: another refund used this ref", op.Ref)
	}
	return HeldInSuspense, err
}

func increment(n int64, _ bool) (int64, bool, error) { return n + 1, true, nil }

// casInt updates an integer item with a compare-and-swap loop: each attempt is a logged read and
// a logged conditional write, so a re-execution replays the same attempts and reaches the same
// outcome, and concurrent instances never lose each other's updates. next returns the new value
// and whether to write it at all.
func casInt(env *ssf.Env, table, key string, next func(cur int64, found bool) (int64, bool, error)) (int64, bool, error) {
	for {
		var cur int64
		found, err := env.ReadInto(table, key, &cur)
		if err != nil {
			return 0, false, err
		}
		n, ok, err := next(cur, found)
		if err != nil || !ok {
			return cur, false, err
		}
		expect := store.Equal(nil, cur)
		if !found {
			expect = store.Equal(nil, nil)
		}
		written, err := env.CondWrite(table, key, n, expect)
		if err != nil || written {
			return n, written, err
		}
	}
}

// auditRecord is the audit SSF's input: a transfer's ledger entry and the teller's time stamp.
type auditRecord struct {
	Entry LedgerEntry `json:"entry"`
	Stamp int64       `json:"stamp"`
}

// audit records an entry in the ledger; it answers nothing.
func audit(env *ssf.Env, in auditRecord) (any, error) {
	if in.Entry.From != "" { // a transfer refused for naming no payer has no balance to show
		bal, err := ssf.Call[int64](env, Accounts, AccountOp{Op: "balance", Account: in.Entry.From})
		if err != nil {
			return nil, err
		}
		in.Entry.PayerBalance = bal
	}
	if err := env.Write("ledger", in.Entry.Transfer, in.Entry); err != nil {
		return nil, err
	}
	if err := env.Write("stamps", in.Entry.Transfer, in.Stamp); err != nil {
		return nil, err
	}
	_, _, err := casInt(env, "ledger", "count", increment)
	return nil, err
}

// Items is a state snapshot of the application: SSF name -> "table/key" -> JSON value.
type Items map[string]map[string][]byte

// Snapshot reads the current state of every SSF.
func Snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (Items, error) {
	out := Items{}
	for name, rt := range runtimes {
		items, err := rt.Items(ctx)
		if err != nil {
			return nil, err
		}
		out[name] = items
	}
	return out, nil
}

// Comparable drops what legitimately differs between two correct runs of the same requests
// (time stamps and the instance ids that key them), keeping everything else.
func (it Items) Comparable() map[string]string {
	out := map[string]string{}
	for name, items := range it {
		for k, v := range items {
			if len(k) >= 7 && k[:7] == "stamps/" {
				continue
			}
			out[name+":"+k] = string(v)
		}
	}
	return out
}

// impossibleRefusals lists the refusals no order of the transfers explains: a payer refused
// for insufficient funds whose balance stays above the amount even with every other withdrawal
// from it (applied, refunded or held) taken out and nothing paid in; a payee refused for
// overflow with room for the amount even with every deposit into it applied. (A stale read of a
// balance shows up as one of these, which the sums above cannot see.)
func impossibleRefusals(opening map[string]int64, receipts map[string]Receipt, transfers map[string]Transfer) []error {
	lowest, highest := map[string]*big.Int{}, map[string]*big.Int{}
	for a, b := range opening {
		lowest[a], highest[a] = big.NewInt(b), big.NewInt(b)
	}
	for id, r := range receipts {
		t := transfers[id]
		if l, ok := lowest[t.From]; ok && (r.Applied || r.Refund != "") {
			l.Sub(l, big.NewInt(t.Amount))
		}
		if h, ok := highest[t.To]; ok && r.Applied {
			h.Add(h, big.NewInt(t.Amount))
		}
	}
	limit := big.NewInt(math.MaxInt64)
	var errs []error
	for id, r := range receipts {
		t := transfers[id]
		switch l, h := lowest[t.From], highest[t.To]; {
		case r.Applied:
		case r.Reason == ReasonInsufficientFunds && l != nil && l.Cmp(big.NewInt(t.Amount)) >= 0:
			errs = append(errs, fmt.Errorf("transfer %s: refused for insufficient funds, but %q never held less than %v", id, t.From, l))
		case strings.HasPrefix(r.Reason, ReasonOverflow) && h != nil && new(big.Int).Add(h, big.NewInt(t.Amount)).Cmp(limit) <= 0:
			errs = append(errs, fmt.Errorf("transfer %s: refused for overflow, but %q never held more than %v", id, t.To, h))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// Check verifies the application's invariants after every request has finished: no money
// created or lost (the balances and the suspense table add up to the opening balances, summed
// without overflow); every transfer applied exactly once (each balance equals its opening
// balance plus the applied receipts, less what a refused deposit left in suspense), and a
// refused one left no trace in the balances; no balance for an account that was not opened;
// audit saw each transfer once, with the teller's outcome and time stamp; and each refusal for
// insufficient funds or overflow is possible in some order of the transfers.
func Check(opening map[string]int64, receipts map[string]Receipt, transfers map[string]Transfer, it Items) error {
	var errs []error
	want := map[string]*big.Int{}
	total := new(big.Int)
	for a, b := range opening {
		want[a] = big.NewInt(b)
		total.Add(total, big.NewInt(b))
	}
	ids := make([]string, 0, len(receipts))
	for id := range receipts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	held := new(big.Int)
	for _, id := range ids {
		r, t := receipts[id], transfers[id]
		amount := big.NewInt(t.Amount)
		switch {
		case r.Applied && (r.Reason != "" || r.Refund != ""):
			errs = append(errs, fmt.Errorf("transfer %s: receipt %+v is both applied and refused", id, r))
		case r.Applied:
			if _, ok := want[t.From]; !ok {
				errs = append(errs, fmt.Errorf("transfer %s: applied, but payer %q was never opened", id, t.From))
				want[t.From] = new(big.Int)
			}
			if _, ok := want[t.To]; !ok {
				errs = append(errs, fmt.Errorf("transfer %s: applied, but payee %q was never opened", id, t.To))
				want[t.To] = new(big.Int)
			}
			want[t.From].Sub(want[t.From], amount)
			want[t.To].Add(want[t.To], amount)
		case r.Reason == "":
			errs = append(errs, fmt.Errorf("transfer %s: refused without a reason", id))
		}
		raw, inSuspense := it[Accounts]["suspense/"+id]
		switch {
		case r.Refund == HeldInSuspense:
			var h Held
			if err := json.Unmarshal(raw, &h); err != nil || h.Account != t.From || h.Amount != t.Amount {
				errs = append(errs, fmt.Errorf("transfer %s: the receipt says its %d are held in suspense for %q, but suspense holds %q", id, t.Amount, t.From, raw))
			} else if w, ok := want[t.From]; ok {
				w.Sub(w, amount)
				held.Add(held, amount)
			}
		case inSuspense:
			errs = append(errs, fmt.Errorf("transfer %s: suspense holds %s, but the receipt says %q", id, raw, r.Refund))
		}
		var e LedgerEntry
		raw, ok := it[Audit]["ledger/"+id]
		if !ok {
			errs = append(errs, fmt.Errorf("transfer %s: no ledger entry", id))
		} else if err := json.Unmarshal(raw, &e); err != nil || e.Applied != r.Applied || e.Amount != t.Amount ||
			e.From != t.From || e.To != t.To || e.Reason != r.Reason || e.Refund != r.Refund {
			errs = append(errs, fmt.Errorf("transfer %s: ledger entry %s disagrees with receipt %+v", id, raw, r))
		}
		if a, b := string(it[Teller]["stamps/"+id]), string(it[Audit]["stamps/"+id]); a != b {
			errs = append(errs, fmt.Errorf("transfer %s: teller stamped %s but audit saw %s", id, a, b))
		}
	}
	errs = append(errs, impossibleRefusals(opening, receipts, transfers)...)
	sum := new(big.Int)
	for k, v := range it[Accounts] {
		switch table, key, _ := strings.Cut(k, "/"); table {
		case "balances":
			if _, ok := want[key]; !ok {
				errs = append(errs, fmt.Errorf("account %q has a balance, %s, but was never opened", key, v))
			}
		case "suspense":
			var h Held
			if err := json.Unmarshal(v, &h); err != nil {
				errs = append(errs, fmt.Errorf("suspense entry %s: unreadable %q", key, v))
			}
			sum.Add(sum, big.NewInt(h.Amount))
			if r, ok := receipts[key]; !ok || r.Refund != HeldInSuspense {
				errs = append(errs, fmt.Errorf("suspense entry %s holds %s, but no receipt says so", key, v))
			}
		}
	}
	if held.Cmp(sum) != 0 {
		errs = append(errs, fmt.Errorf("suspense holds %v in all, but the receipts say %v", sum, held))
	}
	accounts := make([]string, 0, len(want))
	for a := range want {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	for _, a := range accounts {
		var got int64
		raw := it[Accounts]["balances/"+a]
		if err := json.Unmarshal(raw, &got); err != nil || raw == nil {
			errs = append(errs, fmt.Errorf("account %s: unreadable balance %q", a, raw))
			continue
		}
		sum.Add(sum, big.NewInt(got))
		if w := want[a]; w.Cmp(big.NewInt(got)) != 0 {
			errs = append(errs, fmt.Errorf("account %s: balance %d, but the applied receipts say %v", a, got, w))
		}
	}
	if sum.Cmp(total) != 0 {
		errs = append(errs, fmt.Errorf("money not conserved: balances and suspense sum to %v, opened with %v", sum, total))
	}
	if got := string(it[Audit]["ledger/count"]); got != fmt.Sprint(len(receipts)) {
		errs = append(errs, fmt.Errorf("ledger counted %s transfers, want %d", got, len(receipts)))
	}
	if got := string(it[Teller]["teller/seq"]); got != fmt.Sprint(len(receipts)) {
		errs = append(errs, fmt.Errorf("teller numbered %s requests, want %d", got, len(receipts)))
	}
	return errors.Join(errs...)
}
