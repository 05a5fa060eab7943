package apps

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

var bankApp = App{
	Name:     "bank",
	Title:    "the bank example",
	Handlers: bank.Handlers,
	Entry:    bank.Teller,
	demo:     func() workload { return &bankDemo{} },
	Try: func(base string) string {
		return fmt.Sprintf(`  curl -s %[1]s/v1/ssf/accounts \
    -H 'Idempotency-Key: open-alice' \
    -d '{"op":"open","account":"alice","amount":100}'
  curl -s %[1]s/v1/ssf/accounts \
    -H 'Idempotency-Key: open-bob' \
    -d '{"op":"open","account":"bob","amount":100}'
  curl -s %[1]s/v1/ssf/teller \
    -H 'Idempotency-Key: t-1' \
    -d '{"from":"alice","to":"bob","amount":30}'
  curl -s %[1]s/v1/ssf/teller \
    -H 'Idempotency-Key: t-2' \
    -d '{"from":"alice","to":"carol","amount":30}'
  curl -s %[1]s/v1/ssf/accounts/items
`, base)
	},
}

const (
	openingBalance = 1000
	// maxAmount makes transfers large enough against the opening balance that some are refused.
	maxAmount = 200
	// vault is an account opened vaultRoom short of the int64 limit: transfers into it that
	// would overflow its balance are refused, or refunded when another deposit won the room
	// between the teller's check and the deposit.
	vault     = "vault"
	vaultRoom = 150
	// missingAccount is never opened: its opening, with a negative balance, is refused.
	missingAccount = "mallory"
	// invalidEvery: every invalidEvery-th transfer names a missing account or a bad amount.
	invalidEvery = 4
)

// The kinds of transfer the demo sends.
const (
	kindValid       = "valid"
	kindToMissing   = "to a missing account"
	kindFromMissing = "from a missing account"
	kindBadAmount   = "zero or negative amount"
)

var invalidKinds = []string{kindToMissing, kindFromMissing, kindBadAmount}

// bankDemo is the bank in the demo: transfers between accounts, through teller, accounts and
// audit, some of which the bank must refuse or compensate.
type bankDemo struct {
	transfers, numAccounts int
	balance                int64    // every regular account's opening balance
	accounts               []string // the regular accounts; the vault is not among them
	plans                  map[string]bank.Transfer
	kinds                  map[string]string // request id -> kind
	openings               []badOpening
}

// badOpening is an opening the bank must refuse, and what it answered.
type badOpening struct {
	what, reason string // reason: the refusal's expected prefix
	account      string
	amount       int64
	res          ssf.Result
	err          error
}

func (b *bankDemo) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.transfers, "transfers", 200, "number of transfers to submit")
	fs.IntVar(&b.numAccounts, "accounts", 5, "number of accounts, 2 to 1000")
	fs.Int64Var(&b.balance, "opening", openingBalance, "opening balance of each account, 1 to 10^15")
}

func (b *bankDemo) validate() error {
	switch {
	case b.transfers < 1 || b.transfers > 100_000:
		return fmt.Errorf("demo: --transfers %d: want 1 to 100000", b.transfers)
	case b.numAccounts < 2 || b.numAccounts > 1000:
		return fmt.Errorf("demo: --accounts %d: want 2 to 1000 (a transfer needs two accounts)", b.numAccounts)
	case b.balance < 1 || b.balance > 1e15:
		// 1000 accounts of 10^15 and the vault's MaxInt64-vaultRoom still fit the checks' sums.
		return fmt.Errorf("demo: --opening %d: want 1 to 10^15", b.balance)
	}
	return nil
}

func (b *bankDemo) info() demoInfo {
	return demoInfo{
		synopsis: `Runs the bank example (SSFs teller, accounts, audit) on the embedded SQLite
store while killing executions at random points, with the intent and garbage
collectors running on timers, then checks that every transfer was applied
exactly once, or refused before any money moved, or refunded, and that money
was conserved. Some transfers are meant to be refused: to or from a missing
account, of a zero or negative amount, into a vault near the int64 limit.
Exits with status 1 if an invariant fails.

'ssfkit demo travel' runs the travel reservation example instead; 'ssfkit demo
temporal' runs it as Temporal workflows on an embedded Temporal server, killing
the worker process ('ssfkit demo APP -h' lists an app's flags).`,
		title: "ssfkit demo: exactly-once bank transfers, with crashes injected",
		intro: `Three stateful serverless functions: teller takes a transfer, calls accounts to
withdraw and then to deposit, and tells audit asynchronously, which records it
in its ledger. Executions are killed at random steps, and a crash can hit right
after an effect, losing only the reply. The intent collector re-runs what was
cut short; the runtime's logs make every step take effect exactly once.
Transfers the bank cannot make are refused before any money moves, or, if the
deposit is refused after the withdraw, refunded by the teller.`,
		workload: fmt.Sprintf("%d transfers among %d accounts of %d each and a vault\n"+
			"              %d short of the int64 limit; 1 in %d transfers names\n"+
			"              a missing account or a zero or negative amount",
			b.transfers, b.numAccounts, b.balance, vaultRoom, invalidEvery),
		section:  "Transfers",
		requests: "transfers",
		finished: "every transfer and its audit record finished",
	}
}

var accountNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}

// plan draws the accounts and transfers from the seed. Of the valid transfers, a third go into
// the vault and a sixth come out of it, so that it stays near full and deposits race for the
// room left; the rest go between regular accounts. Every invalidEvery-th transfer is, in turn,
// to the missing account, from it, or of a zero or negative amount, between regular accounts
// otherwise (so that it has just one reason to be refused).
func (b *bankDemo) plan(seed uint64) ([]string, map[string]any) {
	for i := range b.numAccounts {
		name := fmt.Sprintf("acct%03d", i)
		if i < len(accountNames) {
			name = accountNames[i]
		}
		b.accounts = append(b.accounts, name)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	b.plans, b.kinds = map[string]bank.Transfer{}, map[string]string{}
	var ids []string
	inputs := map[string]any{}
	width := len(fmt.Sprint(b.transfers))
	for i := range b.transfers {
		from := rng.IntN(len(b.accounts))
		to := (from + 1 + rng.IntN(len(b.accounts)-1)) % len(b.accounts)
		t := bank.Transfer{From: b.accounts[from], To: b.accounts[to], Amount: 1 + rng.Int64N(maxAmount)}
		kind := kindValid
		switch r := rng.IntN(6); {
		case i%invalidEvery == invalidEvery-1:
			kind = invalidKinds[(i/invalidEvery)%len(invalidKinds)]
			switch kind {
			case kindToMissing:
				t.To = missingAccount
			case kindFromMissing:
				t.From = missingAccount
			case kindBadAmount:
				t.Amount = []int64{0, -t.Amount, math.MinInt64}[rng.IntN(3)]
			}
		case r < 2:
			t.To = vault
		case r == 2:
			t.From = vault
		}
		id := fmt.Sprintf("transfer-%0*d", max(width, 4), i+1)
		ids = append(ids, id)
		b.plans[id], b.kinds[id] = t, kind
		inputs[id] = t
	}
	return ids, inputs
}

// opening returns every account's opening balance.
func (b *bankDemo) opening() map[string]int64 {
	out := map[string]int64{vault: math.MaxInt64 - vaultRoom}
	for _, a := range b.accounts {
		out[a] = b.balance
	}
	return out
}

// setup opens every account, and tries two openings the bank must refuse.
func (b *bankDemo) setup(ctx context.Context, h *local.Host) error {
	for _, a := range append(slices.Clone(b.accounts), vault) {
		res, err := h.Invoke(ctx, bank.Accounts, "open-"+a, bank.AccountOp{Op: "open", Account: a, Amount: b.opening()[a]})
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return fmt.Errorf("opening account %s: %w", a, err)
		}
	}
	b.openings = []badOpening{
		{what: "a negative balance", reason: bank.ReasonNegativeOpening, account: missingAccount, amount: -500},
		{what: "a second opening", reason: bank.ReasonAlreadyOpen, account: b.accounts[0], amount: 5 * b.balance},
	}
	for i, o := range b.openings {
		b.openings[i].res, b.openings[i].err = h.Invoke(ctx, bank.Accounts, fmt.Sprintf("open-%s-%d", o.account, i+2), bank.AccountOp{Op: "open", Account: o.account, Amount: o.amount})
	}
	return nil
}

func (b *bankDemo) snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (appState, error) {
	return bank.Snapshot(ctx, runtimes)
}

// receipts decodes the transfers' results; failures are transfers that did not end in a
// receipt, which the bank's transfers never should: it refuses with a receipt.
func (b *bankDemo) receipts(d *Demo) (map[string]bank.Receipt, []error) {
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

// refusal names the kind of a refusal's reason.
func refusal(reason string) string {
	for _, k := range []struct{ prefix, name string }{
		{bank.ReasonInsufficientFunds, "insufficient funds"},
		{bank.ReasonNoAccount, "missing account"},
		{bank.ReasonBadAmount, "bad amount"},
		{bank.ReasonOverflow, "overflow"},
	} {
		if strings.HasPrefix(reason, k.prefix) {
			return k.name
		}
	}
	return "other"
}

func (b *bankDemo) summary(d *Demo) {
	receipts, _ := b.receipts(d)
	applied, refunded := 0, 0
	refused := map[string]int{}
	for _, r := range receipts {
		switch {
		case r.Applied:
			applied++
		case r.Refund != "":
			refunded++
		default:
			refused[refusal(r.Reason)]++
		}
	}
	n := len(receipts) - applied - refunded
	d.printf("  %d transfers: %d applied, %d refused before any money moved,\n", b.transfers, applied, n)
	d.printf("    %d refunded after their deposit was refused\n", refunded)
	if n > 0 {
		d.printf("  refused for   %s\n", counts(refused))
	}
}

// amount shows an amount, relative to the int64 limit when near it.
func amount(x *big.Int) string {
	diff := new(big.Int).Sub(x, big.NewInt(math.MaxInt64))
	if diff.CmpAbs(big.NewInt(1e12)) < 0 {
		return fmt.Sprintf("max%+d", diff.Int64())
	}
	return x.String()
}

// report prints the balances.
func (b *bankDemo) report(d *Demo, it appState) {
	d.printf("\nBalances (max: the int64 limit, %d)\n  %-10s %10s %10s %8s\n", int64(math.MaxInt64), "account", "opening", "final", "change")
	opening := b.opening()
	opened, total := new(big.Int), new(big.Int)
	for _, a := range append(slices.Clone(b.accounts), vault) {
		o := big.NewInt(opening[a])
		opened.Add(opened, o)
		bal, ok := balance(it, a)
		if !ok {
			d.printf("  %-10s %10s %10s\n", a, amount(o), "?")
			continue
		}
		total.Add(total, big.NewInt(bal))
		d.printf("  %-10s %10s %10s %+8d\n", a, amount(o), amount(big.NewInt(bal)), bal-opening[a])
	}
	if held := suspense(it); held.Sign() != 0 {
		total.Add(total, held)
		d.printf("  %-10s %10s %10s %+8v\n", "suspense", "0", held, held)
	}
	d.printf("  %-10s %10s %10s %+8v\n", "total", amount(opened), amount(total), new(big.Int).Sub(total, opened))
}

func balance(it appState, account string) (int64, bool) {
	var b int64
	raw, ok := it[bank.Accounts]["balances/"+account]
	err := json.Unmarshal(raw, &b)
	return b, ok && err == nil
}

// suspense sums the amounts the accounts SSF holds in suspense (refunds that found no room).
func suspense(it appState) *big.Int {
	sum := new(big.Int)
	for k, v := range it[bank.Accounts] {
		var h bank.Held
		if strings.HasPrefix(k, "suspense/") && json.Unmarshal(v, &h) == nil {
			sum.Add(sum, big.NewInt(h.Amount))
		}
	}
	return sum
}

func (b *bankDemo) invariants(_ context.Context, d *Demo, after appState) {
	opening := b.opening()
	opened, sum := new(big.Int), suspense(after)
	var money []error
	for _, a := range slices.Sorted(maps.Keys(opening)) {
		opened.Add(opened, big.NewInt(opening[a]))
		bal, found := balance(after, a)
		if !found {
			money = append(money, fmt.Errorf("account %s has no readable balance", a))
		}
		sum.Add(sum, big.NewInt(bal))
	}
	if sum.Cmp(opened) != 0 {
		money = append(money, fmt.Errorf("balances sum to %s, but %s was opened", amount(sum), amount(opened)))
	}
	d.check("money conserved", money, fmt.Sprintf("balances sum to %s, as opened", amount(sum)))

	receipts, failures := b.receipts(d)
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

	b.checkRefused(d, receipts, after, "transfers to a missing account refused", kindToMissing, bank.ReasonNoAccount)
	b.checkRefused(d, receipts, after, "transfers from a missing account refused", kindFromMissing, bank.ReasonNoAccount)
	b.checkRefused(d, receipts, after, "zero or negative amounts refused", kindBadAmount, bank.ReasonBadAmount)
	b.checkOverflows(d, receipts, after)
	b.checkOpenings(d, after)
}

// checkRefused checks that every transfer of a kind was refused before any money moved, for
// the expected reason, and, for a missing account, that it was not created on the way. (That
// the balances show no trace of these transfers is the exactly-once check's.)
func (b *bankDemo) checkRefused(d *Demo, receipts map[string]bank.Receipt, after appState, name, kind, reason string) {
	var problems []error
	n := 0
	for _, id := range d.ids {
		if b.kinds[id] != kind {
			continue
		}
		n++
		r, ok := receipts[id]
		switch {
		case !ok: // reported by the exactly-once check
		case r.Applied:
			problems = append(problems, fmt.Errorf("%s %+v applied", id, b.plans[id]))
		case r.Refund != "":
			problems = append(problems, fmt.Errorf("%s %+v moved money before it was refused (refund: %s)", id, b.plans[id], r.Refund))
		case !strings.HasPrefix(r.Reason, reason):
			problems = append(problems, fmt.Errorf("%s %+v refused for %q, want %q", id, b.plans[id], r.Reason, reason))
		}
	}
	if v, found := after[bank.Accounts]["balances/"+missingAccount]; found && reason == bank.ReasonNoAccount {
		problems = append(problems, fmt.Errorf("account %s, never opened, has a balance: %s", missingAccount, v))
	}
	pass := fmt.Sprintf("%d, before any money moved", n)
	if n == 0 {
		pass = "none among these transfers"
	}
	d.check(name, problems, pass)
}

// checkOverflows checks the transfers into the vault: each applied, refused (for insufficient
// funds, or because the vault's balance would overflow), or, if another deposit took the room
// after the teller's check, refunded. And no balance wrapped around to a negative one.
func (b *bankDemo) checkOverflows(d *Demo, receipts map[string]bank.Receipt, after appState) {
	var problems []error
	refused, refunded, held := 0, 0, 0
	for _, id := range d.ids {
		r, ok := receipts[id]
		if !ok || b.plans[id].To != vault || b.kinds[id] != kindValid || r.Applied {
			continue
		}
		switch why := refusal(r.Reason); {
		case why == "insufficient funds" && r.Refund == "":
		case why != "overflow":
			problems = append(problems, fmt.Errorf("%s %+v refused for %q", id, b.plans[id], r.Reason))
		case r.Refund == "":
			refused++
		case r.Refund == bank.RefundedToPayer:
			refunded++
		case r.Refund == bank.HeldInSuspense:
			held++
		default:
			problems = append(problems, fmt.Errorf("%s: unknown refund %q", id, r.Refund))
		}
	}
	for _, a := range append(slices.Clone(b.accounts), vault) {
		if bal, ok := balance(after, a); ok && bal < 0 {
			problems = append(problems, fmt.Errorf("account %s has a negative balance, %d: a deposit wrapped around", a, bal))
		}
	}
	pass := fmt.Sprintf("%d refused, %d refunded, none wrapped", refused, refunded)
	if held > 0 {
		pass = fmt.Sprintf("%d refused, %d refunded, %d in suspense", refused, refunded, held)
	}
	d.check("overflows refused or refunded", problems, pass)
}

// checkOpenings checks that the bad openings were refused, for the expected reason, and
// changed nothing: the missing account has no balance (checkRefused), and the account opened
// twice kept its first opening (the exactly-once check compares it with the receipts).
func (b *bankDemo) checkOpenings(d *Demo, after appState) {
	var problems []error
	var what []string
	for _, o := range b.openings {
		what = append(what, o.what)
		switch {
		case o.err != nil:
			problems = append(problems, fmt.Errorf("opening %s with %d: %v", o.account, o.amount, o.err))
		case o.res.Error == "":
			problems = append(problems, fmt.Errorf("opening %s with %d: answered %s, want refused for %q", o.account, o.amount, o.res.Output, o.reason))
		case !strings.HasPrefix(o.res.Error, o.reason):
			problems = append(problems, fmt.Errorf("opening %s with %d: refused for %q, want %q", o.account, o.amount, o.res.Error, o.reason))
		}
	}
	if v, found := after[bank.Accounts]["balances/"+missingAccount]; found {
		problems = append(problems, fmt.Errorf("account %s, whose opening was refused, has a balance: %s", missingAccount, v))
	}
	d.check("bad openings refused", problems, strings.Join(what, ", "))
}
