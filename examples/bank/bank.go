// Package bank is a small money-transfer application on ssfkit, used by the demo and by the
// crash-injection suite. Three SSFs, each owning its own store:
//
//	teller    the entry point: numbers the request, moves the money by calling accounts
//	          synchronously (withdraw, then deposit), and reports to audit asynchronously
//	accounts  the balances; withdraw and deposit are compare-and-swap loops over CondWrite
//	audit     the ledger: one entry per transfer, plus the payer's balance it sees by calling
//	          accounts synchronously (an async instance making a nested sync call)
//
// Without ssfkit, a crash between the withdraw and the deposit loses money, and a retried
// request moves it twice. With it, every transfer is applied exactly once, whatever crashes.
package bank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

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

// Receipt is the teller's output.
type Receipt struct {
	Seq     int64  `json:"seq"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
}

// AccountOp is the accounts SSF's input.
type AccountOp struct {
	Op      string `json:"op"` // open, withdraw, deposit, balance
	Account string `json:"account"`
	Amount  int64  `json:"amount,omitempty"`
}

// LedgerEntry is what audit records per transfer.
type LedgerEntry struct {
	Transfer     string `json:"transfer"` // the teller instance id
	From         string `json:"from"`
	To           string `json:"to"`
	Amount       int64  `json:"amount"`
	Applied      bool   `json:"applied"`
	PayerBalance int64  `json:"payer_balance"`
}

// Handlers returns the application's SSF handlers by name.
func Handlers() map[string]ssf.Handler {
	return map[string]ssf.Handler{Teller: teller, Accounts: accounts, Audit: audit}
}

func teller(env *ssf.Env, input json.RawMessage) (any, error) {
	var t Transfer
	if err := json.Unmarshal(input, &t); err != nil {
		return nil, fmt.Errorf("malformed transfer %s: %v", input, err)
	}
	if t.Amount <= 0 || t.From == "" || t.To == "" || t.From == t.To {
		return nil, fmt.Errorf("invalid transfer %+v: need two different accounts and a positive amount", t)
	}
	at, err := env.Now()
	if err != nil {
		return nil, err
	}
	seq, _, err := casInt(env, "teller", "seq", increment)
	if err != nil {
		return nil, err
	}
	// The stamp is logged once; audit must see the same one, however often this re-runs.
	if err := env.Write("stamps", env.InstanceID(), at.UnixNano()); err != nil {
		return nil, err
	}
	receipt := Receipt{Seq: seq}
	out, err := env.SyncInvoke(Accounts, AccountOp{Op: "withdraw", Account: t.From, Amount: t.Amount})
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &receipt.Applied); err != nil {
		return nil, err
	}
	if receipt.Applied {
		if _, err := env.SyncInvoke(Accounts, AccountOp{Op: "deposit", Account: t.To, Amount: t.Amount}); err != nil {
			return nil, err
		}
	} else {
		receipt.Reason = "insufficient funds"
	}
	entry := LedgerEntry{Transfer: env.InstanceID(), From: t.From, To: t.To, Amount: t.Amount, Applied: receipt.Applied}
	if err := env.AsyncInvoke(Audit, map[string]any{"entry": entry, "stamp": at.UnixNano()}); err != nil {
		return nil, err
	}
	return receipt, nil
}

func accounts(env *ssf.Env, input json.RawMessage) (any, error) {
	var op AccountOp
	if err := json.Unmarshal(input, &op); err != nil {
		return nil, fmt.Errorf("malformed account operation %s: %v", input, err)
	}
	switch op.Op {
	case "open":
		return env.CondWrite("balances", op.Account, op.Amount, store.Equal(nil, nil))
	case "balance":
		var bal int64
		_, err := env.ReadInto("balances", op.Account, &bal)
		return bal, err
	case "withdraw", "deposit":
		if op.Amount <= 0 {
			return nil, fmt.Errorf("amount must be positive, got %d", op.Amount)
		}
		_, ok, err := casInt(env, "balances", op.Account, func(bal int64, found bool) (int64, bool, error) {
			switch {
			case !found:
				return 0, false, fmt.Errorf("no account %q", op.Account)
			case op.Op == "deposit":
				return bal + op.Amount, true, nil
			}
			return bal - op.Amount, bal >= op.Amount, nil
		})
		return ok, err
	}
	return nil, fmt.Errorf("unknown account operation %q", op.Op)
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

func audit(env *ssf.Env, input json.RawMessage) (any, error) {
	var in struct {
		Entry LedgerEntry `json:"entry"`
		Stamp int64       `json:"stamp"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("malformed audit record %s: %v", input, err)
	}
	out, err := env.SyncInvoke(Accounts, AccountOp{Op: "balance", Account: in.Entry.From})
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &in.Entry.PayerBalance); err != nil {
		return nil, err
	}
	if err := env.Write("ledger", in.Entry.Transfer, in.Entry); err != nil {
		return nil, err
	}
	if err := env.Write("stamps", in.Entry.Transfer, in.Stamp); err != nil {
		return nil, err
	}
	_, _, err = casInt(env, "ledger", "count", increment)
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

// Check verifies the application's invariants after every request has finished: no money
// created or lost; every transfer applied exactly once (balances equal opening balances plus
// the applied receipts); audit saw each transfer once with the teller's own time stamp.
func Check(opening map[string]int64, receipts map[string]Receipt, transfers map[string]Transfer, it Items) error {
	var errs []error
	want := map[string]int64{}
	var total int64
	for a, b := range opening {
		want[a] = b
		total += b
	}
	ids := make([]string, 0, len(receipts))
	for id := range receipts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, t := receipts[id], transfers[id]
		if r.Applied {
			want[t.From] -= t.Amount
			want[t.To] += t.Amount
		}
		var e LedgerEntry
		raw, ok := it[Audit]["ledger/"+id]
		if !ok {
			errs = append(errs, fmt.Errorf("transfer %s: no ledger entry", id))
		} else if err := json.Unmarshal(raw, &e); err != nil || e.Applied != r.Applied || e.Amount != t.Amount {
			errs = append(errs, fmt.Errorf("transfer %s: ledger entry %s disagrees with receipt %+v", id, raw, r))
		}
		if a, b := string(it[Teller]["stamps/"+id]), string(it[Audit]["stamps/"+id]); a != b {
			errs = append(errs, fmt.Errorf("transfer %s: teller stamped %s but audit saw %s", id, a, b))
		}
	}
	var sum int64
	for a, w := range want {
		var got int64
		if err := json.Unmarshal(it[Accounts]["balances/"+a], &got); err != nil {
			errs = append(errs, fmt.Errorf("account %s: unreadable balance %q", a, it[Accounts]["balances/"+a]))
			continue
		}
		sum += got
		if got != w {
			errs = append(errs, fmt.Errorf("account %s: balance %d, but the applied receipts say %d", a, got, w))
		}
	}
	if sum != total {
		errs = append(errs, fmt.Errorf("money not conserved: balances sum to %d, opened with %d", sum, total))
	}
	if got := string(it[Audit]["ledger/count"]); got != fmt.Sprint(len(receipts)) {
		errs = append(errs, fmt.Errorf("ledger counted %s transfers, want %d", got, len(receipts)))
	}
	if got := string(it[Teller]["teller/seq"]); got != fmt.Sprint(len(receipts)) {
		errs = append(errs, fmt.Errorf("teller numbered %s requests, want %d", got, len(receipts)))
	}
	return errors.Join(errs...)
}
