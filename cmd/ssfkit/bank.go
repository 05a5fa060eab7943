package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"

	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/local"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

var bankExample = example{
	name:     "bank",
	title:    "the bank example",
	handlers: bank.Handlers,
	entry:    bank.Teller,
	try: func(base string) string {
		return fmt.Sprintf(`  curl -s %[1]s/v1/ssf/accounts \
    -H 'Idempotency-Key: open-alice' \
    -d '{"op":"open","account":"alice","amount":100}'
  curl -s %[1]s/v1/ssf/accounts \
    -H 'Idempotency-Key: open-bob' \
    -d '{"op":"open","account":"bob","amount":100}'
  curl -s %[1]s/v1/ssf/teller \
    -H 'Idempotency-Key: t-1' \
    -d '{"from":"alice","to":"bob","amount":30}'
  curl -s %[1]s/v1/ssf/accounts/items
`, base)
	},
}

const (
	openingBalance = 1000
	// maxAmount makes transfers large enough against the opening balance that some are refused.
	maxAmount = 200
)

// bankDemo is the bank in the demo: transfers between accounts, through teller, accounts and
// audit.
type bankDemo struct {
	transfers, numAccounts int
	accounts               []string
	plans                  map[string]bank.Transfer
}

func (b *bankDemo) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.transfers, "transfers", 200, "number of transfers to submit")
	fs.IntVar(&b.numAccounts, "accounts", 5, "number of accounts, 2 to 1000")
}

func (b *bankDemo) validate() error {
	switch {
	case b.transfers < 1 || b.transfers > 100_000:
		return fmt.Errorf("demo: --transfers %d: want 1 to 100000", b.transfers)
	case b.numAccounts < 2 || b.numAccounts > 1000:
		return fmt.Errorf("demo: --accounts %d: want 2 to 1000 (a transfer needs two accounts)", b.numAccounts)
	}
	return nil
}

func (b *bankDemo) info() demoInfo {
	return demoInfo{
		example: bankExample,
		synopsis: `Runs the bank example (SSFs teller, accounts, audit) on the embedded SQLite
store while killing executions at random points, with the intent and garbage
collectors running on timers, then checks that every transfer was applied
exactly once. Exits with status 1 if an invariant fails.

'ssfkit demo travel' runs the travel reservation example instead
('ssfkit demo travel -h' lists its flags).`,
		title: "ssfkit demo: exactly-once bank transfers, with crashes injected",
		intro: `Three stateful serverless functions: teller takes a transfer, calls accounts to
withdraw and then to deposit, and tells audit asynchronously, which records it
in its ledger. Executions are killed at random steps, and a crash can hit right
after an effect, losing only the reply. The intent collector re-runs what was
cut short; the runtime's logs make every step take effect exactly once.`,
		workload: fmt.Sprintf("%d transfers among %d accounts of %d each", b.transfers, b.numAccounts, openingBalance),
		section:  "Transfers",
		requests: "transfers",
		finished: "every transfer and its audit record finished",
	}
}

var accountNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}

// plan draws the accounts and transfers from the seed.
func (b *bankDemo) plan(seed uint64) ([]string, map[string]any) {
	for i := range b.numAccounts {
		name := fmt.Sprintf("acct%03d", i)
		if i < len(accountNames) {
			name = accountNames[i]
		}
		b.accounts = append(b.accounts, name)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	b.plans = map[string]bank.Transfer{}
	var ids []string
	inputs := map[string]any{}
	width := len(fmt.Sprint(b.transfers))
	for i := range b.transfers {
		from := rng.IntN(len(b.accounts))
		to := (from + 1 + rng.IntN(len(b.accounts)-1)) % len(b.accounts)
		id := fmt.Sprintf("transfer-%0*d", max(width, 4), i+1)
		ids = append(ids, id)
		b.plans[id] = bank.Transfer{From: b.accounts[from], To: b.accounts[to], Amount: 1 + rng.Int64N(maxAmount)}
		inputs[id] = b.plans[id]
	}
	return ids, inputs
}

// setup opens every account.
func (b *bankDemo) setup(ctx context.Context, h *local.Host) error {
	for _, a := range b.accounts {
		res, err := h.Invoke(ctx, bank.Accounts, "open-"+a, bank.AccountOp{Op: "open", Account: a, Amount: openingBalance})
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return fmt.Errorf("opening account %s: %w", a, err)
		}
	}
	return nil
}

func (b *bankDemo) snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (appState, error) {
	return bank.Snapshot(ctx, runtimes)
}

// receipts decodes the transfers' results; failures are transfers that did not end in a
// receipt, which the demo's well-formed transfers never should.
func (b *bankDemo) receipts(d *demo) (map[string]bank.Receipt, []error) {
	results := d.finishedResults()
	out := map[string]bank.Receipt{}
	var failures []error
	for _, id := range d.ids {
		res, ok := results[id]
		var r bank.Receipt
		switch {
		case !ok:
			failures = append(failures, fmt.Errorf("transfer %s: no result", id))
		case res.Error != "":
			failures = append(failures, fmt.Errorf("transfer %s failed: %s", id, res.Error))
		default:
			if err := json.Unmarshal(res.Output, &r); err != nil {
				failures = append(failures, fmt.Errorf("transfer %s: unreadable receipt %s: %v", id, res.Output, err))
				continue
			}
			out[id] = r
		}
	}
	return out, failures
}

func (b *bankDemo) summary(d *demo) {
	receipts, _ := b.receipts(d)
	applied := 0
	for _, r := range receipts {
		if r.Applied {
			applied++
		}
	}
	d.printf("  %d transfers: %d applied, %d refused for insufficient funds\n", b.transfers, applied, len(receipts)-applied)
}

// report prints the balances.
func (b *bankDemo) report(d *demo, it appState) {
	d.printf("\nBalances\n  %-10s %8s %8s %8s\n", "account", "opening", "final", "change")
	var total int64
	for _, a := range b.accounts {
		bal, ok := balance(it, a)
		if !ok {
			d.printf("  %-10s %8d %8s\n", a, openingBalance, "?")
			continue
		}
		total += bal
		d.printf("  %-10s %8d %8d %+8d\n", a, openingBalance, bal, bal-openingBalance)
	}
	opened := int64(openingBalance * len(b.accounts))
	d.printf("  %-10s %8d %8d %+8d\n", "total", opened, total, total-opened)
}

func balance(it appState, account string) (int64, bool) {
	var b int64
	err := json.Unmarshal(it[bank.Accounts]["balances/"+account], &b)
	return b, err == nil
}

func (b *bankDemo) invariants(_ context.Context, d *demo, after appState) {
	opened := int64(openingBalance * len(b.accounts))
	var sum int64
	var money []error
	for _, a := range b.accounts {
		bal, found := balance(after, a)
		if !found {
			money = append(money, fmt.Errorf("account %s has no readable balance", a))
		}
		sum += bal
	}
	if sum != opened {
		money = append(money, fmt.Errorf("balances sum to %d, but %d was opened", sum, opened))
	}
	d.check("money conserved", money, fmt.Sprintf("balances sum to %d, as opened", sum))

	receipts, failures := b.receipts(d)
	opening := map[string]int64{}
	for _, a := range b.accounts {
		opening[a] = openingBalance
	}
	exact := failures
	if err := bank.Check(opening, receipts, b.plans, after); err != nil {
		exact = append(exact, unjoin(err)...)
	}
	d.check("every transfer applied exactly once", exact, "balances = opening + receipts")

	var ledger []error
	for _, id := range d.ids {
		if _, found := after[bank.Audit]["ledger/"+id]; !found {
			ledger = append(ledger, fmt.Errorf("no ledger entry for %s", id))
		}
	}
	if got, want := string(after[bank.Audit]["ledger/count"]), fmt.Sprint(len(d.ids)); got != want {
		ledger = append(ledger, fmt.Errorf("the ledger counted %s transfers, want %s", got, want))
	}
	d.check("audit ledger complete", ledger, fmt.Sprintf("%d entries, one per transfer", len(d.ids)))
}
