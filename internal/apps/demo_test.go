package apps

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fastTiming shortens the runtime's bounds so the garbage collector's wait takes a second.
var fastTiming = demoTiming{
	relaunchDelay: 50 * time.Millisecond,
	lifetime:      time.Second,
	gcBound:       1200 * time.Millisecond,
	icEvery:       50 * time.Millisecond,
	gcEvery:       200 * time.Millisecond,
	stallTimeout:  30 * time.Second,
}

// runDemoTest runs a small demo of app with crashes, and checks that its output reports every
// invariant as passing and fits 80 columns.
func runDemoTest(t *testing.T, app App, work workload, invariants ...string) *Demo {
	var out bytes.Buffer
	d := &Demo{app: app, work: work, opt: demoOptions{
		concurrency: 4, crashRate: 0.05, seed: 7, storeDir: t.TempDir(), timing: fastTiming,
	}}
	if err := d.Run(context.Background(), "ssfkit demo", &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	if d.inj.Stats().Total == 0 {
		t.Fatalf("no crashes were injected at rate 0.05:\n%s", out.String())
	}
	for _, want := range append(invariants,
		"PASS  garbage collection changed no state",
		"PASS  runtime state consistent",
		"All invariants hold",
	) {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "FAIL") || t.Failed() {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, line := range strings.Split(out.String(), "\n") {
		if len(line) > 80 && !strings.Contains(line, "sqlite://") { // the temp path may be long
			t.Errorf("line %d is %d columns wide: %q", i+1, len(line), line)
		}
	}
	return d
}

func TestDemoEndToEnd(t *testing.T) {
	// Accounts hold more than all 30 transfers could take out of one, so no transfer into the
	// vault is refused for insufficient funds in any order, and the seed's deposits into it
	// exceed its room plus the withdrawals from it (checked below): some must be refused for
	// overflow. (With 1000 each, a crash once delayed a deposit until its payer had less.)
	app := &bankDemo{transfers: 30, numAccounts: 3, balance: 30 * maxAmount}
	d := runDemoTest(t, bankApp, app,
		"PASS  money conserved",
		"PASS  every transfer applied exactly once",
		"PASS  audit ledger complete",
		"PASS  transfers to a missing account refused",
		"PASS  transfers from a missing account refused",
		"PASS  zero or negative amounts refused",
		"PASS  overflows refused or refunded",
		"PASS  bad openings refused: a negative balance, a second opening",
	)
	// The demo sent transfers of every kind, and some into the vault were refused for overflow.
	receipts, failures := app.receipts(d)
	if len(failures) > 0 {
		t.Fatalf("transfers without a receipt: %v", failures)
	}
	kinds, overflows, room := map[string]int{}, 0, int64(vaultRoom)
	for id, r := range receipts {
		kinds[app.kinds[id]]++
		if !r.Applied && refusal(r.Reason) == "overflow" {
			overflows++
		}
		switch p := app.plans[id]; {
		case app.kinds[id] != kindValid:
		case p.To == vault:
			room -= p.Amount
		case p.From == vault:
			room += p.Amount
		}
	}
	if room >= 0 {
		t.Fatalf("the plan's deposits into the vault fit its room and withdrawals (%d to spare): no overflow is certain", room)
	}
	for _, k := range append(invalidKinds, kindValid) {
		if kinds[k] == 0 {
			t.Errorf("no transfer %s among %v", k, kinds)
		}
	}
	if overflows == 0 {
		t.Errorf("no transfer was refused for overflow")
	}
}

func TestTravelDemoEndToEnd(t *testing.T) {
	app := &travelDemo{reservations: 40, browse: 10, capacity: 2}
	d := runDemoTest(t, travelApp, app,
		"PASS  capacity never exceeded",
		"PASS  hotel booked iff flight booked",
		"PASS  outcomes agree with the bookings",
		"PASS  no lock left held",
	)
	confirmations, answered, failures := app.outcomes(d)
	if len(confirmations) != 40 || answered != 10 || len(failures) > 0 {
		t.Fatalf("%d confirmations, %d answered, failures %v", len(confirmations), answered, failures)
	}
}

func TestDemoRefusesUsedStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "demo.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := (&Demo{app: bankApp, work: &bankDemo{transfers: 1, numAccounts: 2, balance: openingBalance}, opt: demoOptions{concurrency: 1, storeDir: dir, timing: fastTiming}}).Run(context.Background(), "ssfkit demo", &out)
	if err == nil || !strings.Contains(err.Error(), "exists from an earlier run") {
		t.Fatalf("got %v, want a refusal to reuse %s", err, dir)
	}
}
