package ssf_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"    // mem:// tables
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore" // sqlite:// tables
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Op is the wallet SSF's input.
type Op struct {
	Op      string `json:"op"` // "open" or "withdraw"
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// wallet is an SSF written with Go types; ssf.Typed(wallet) is its ssf.Handler.
func wallet(env *ssf.Env, op Op) (bool, error) {
	if op.Op == "open" { // only if the account does not exist yet
		return env.CondWrite("balances", op.Account, op.Amount, store.Equal(nil, nil))
	}
	var balance int64
	if _, err := env.ReadInto("balances", op.Account, &balance); err != nil {
		return false, err
	}
	if balance < op.Amount {
		return false, nil
	}
	// Written only if the balance is still what we read; the outcome is logged, so a
	// re-execution replays it instead of withdrawing twice.
	return env.CondWrite("balances", op.Account, balance-op.Amount, store.Equal(nil, balance))
}

// A withdrawal with CondWrite, hosted in-process on a mem:// table. The request id is the
// instance id: sent again, a request answers from its record and runs nothing.
func ExampleTyped() {
	ctx := context.Background()
	host := local.NewHost()
	defer host.Close()
	table, err := store.Open(ctx, "mem://wallet")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := host.Add(ssf.Config{Name: "wallet", Store: table, Handler: ssf.Typed(wallet)}); err != nil {
		log.Fatal(err)
	}
	for _, req := range []struct {
		id string
		op Op
	}{
		{"open-ann", Op{Op: "open", Account: "ann", Amount: 100}},
		{"w-1", Op{Op: "withdraw", Account: "ann", Amount: 30}},
		{"w-2", Op{Op: "withdraw", Account: "ann", Amount: 100}},
		{"w-1", Op{Op: "withdraw", Account: "ann", Amount: 30}}, // a retry of w-1
	} {
		res, err := host.Invoke(ctx, "wallet", req.id, req.op)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s (replayed: %v)\n", req.id, res.Output, res.Replayed)
	}
	// Input that does not decode into Op is the instance's application error, recorded once.
	res, err := host.Invoke(ctx, "wallet", "w-3", map[string]any{"op": "withdraw", "amount": "ten"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("w-3:", res.Error)
	rt, _ := host.Runtime("wallet")
	items, err := rt.Items(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balances/ann = %s\n", items["balances/ann"])
	// Output:
	// open-ann: true (replayed: false)
	// w-1: true (replayed: false)
	// w-2: false (replayed: false)
	// w-1: true (replayed: true)
	// w-3: ssf wallet: input does not decode into ssf_test.Op: json: cannot unmarshal string into Go struct field Op.amount of type int64
	// balances/ann = 70
}

// Booking is the input of the hotel and flight SSFs.
type Booking struct {
	Op   string `json:"op"` // "add" rooms or seats, or "book" one
	Item string `json:"item"`
	N    int64  `json:"n,omitempty"`
}

// stock is the hotel's and the flight's SSF. It answers how many are left.
func stock(env *ssf.Env, b Booking) (int64, error) {
	var free int64
	if _, err := env.ReadInto("free", b.Item, &free); err != nil {
		return 0, err
	}
	switch {
	case b.Op == "add":
		free += b.N
	case free == 0 && env.InTx():
		return 0, env.AbortTx() // full: the transaction it runs in aborts
	case free == 0:
		return 0, fmt.Errorf("%s is full", b.Item) // full: an application error
	default:
		free--
	}
	return free, env.Write("free", b.Item, free)
}

// Trip is the input of the trip SSFs.
type Trip struct {
	Hotel  string `json:"hotel"`
	Flight string `json:"flight"`
}

// tripTx books a room and a seat in one transaction across the hotel and flight SSFs: both,
// or neither.
func tripTx(env *ssf.Env, t Trip) (bool, error) {
	if err := env.BeginTx(); err != nil {
		return false, err
	}
	// Each callee runs inside the transaction: it locks what it reads and writes.
	_, err := ssf.Call[int64](env, "hotel", Booking{Op: "book", Item: t.Hotel})
	if err == nil {
		_, err = ssf.Call[int64](env, "flight", Booking{Op: "book", Item: t.Flight})
	}
	if err != nil && !errors.Is(err, ssf.ErrTxAborted) {
		return false, err
	}
	return env.EndTx() // commits, or aborts if a callee aborted (or anything died)
}

// tripSaga books the room, then the seat, without a transaction: if the flight is full, the
// room is given back (compensated).
func tripSaga(env *ssf.Env, t Trip) (string, error) {
	call := func(ssfName string, b Booking) func() error {
		return func() error {
			_, err := ssf.Call[int64](env, ssfName, b)
			return err
		}
	}
	err := ssf.NewSaga(env).Run(
		ssf.SagaStep{Name: "hotel",
			Action:     call("hotel", Booking{Op: "book", Item: t.Hotel}),
			Compensate: call("hotel", Booking{Op: "add", Item: t.Hotel, N: 1})},
		ssf.SagaStep{Name: "flight",
			Action:     call("flight", Booking{Op: "book", Item: t.Flight}),
			Compensate: call("flight", Booking{Op: "add", Item: t.Flight, N: 1})},
	)
	if err != nil {
		return "", err // saga step "flight" failed: F1 is full; earlier steps compensated
	}
	return "booked", nil
}

// travelHost hosts the hotel and flight SSFs and a trip SSF on mem:// tables named after
// prefix, with two rooms in H1 and one seat on F1.
func travelHost(ctx context.Context, prefix string, trip ssf.Handler) *local.Host {
	host := local.NewHost()
	for name, h := range map[string]ssf.Handler{"hotel": ssf.Typed(stock), "flight": ssf.Typed(stock), "trip": trip} {
		table, err := store.Open(ctx, "mem://"+prefix+"_"+name)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := host.Add(ssf.Config{Name: name, Store: table, Handler: h}); err != nil {
			log.Fatal(err)
		}
	}
	for ssfName, b := range map[string]Booking{"hotel": {Op: "add", Item: "H1", N: 2}, "flight": {Op: "add", Item: "F1", N: 1}} {
		if _, err := host.Invoke(ctx, ssfName, "stock-"+b.Item, b); err != nil {
			log.Fatal(err)
		}
	}
	return host
}

// left prints the rooms and seats left.
func left(ctx context.Context, host *local.Host) {
	for _, name := range []string{"hotel", "flight"} {
		rt, _ := host.Runtime(name)
		items, err := rt.Items(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(items)) {
			fmt.Printf("  %s %s: %s left\n", name, k, items[k])
		}
	}
}

// A transaction across two SSFs: the first trip takes the last seat; the second finds the
// flight full, the flight SSF aborts, and the hotel's booking is undone with it.
func ExampleEnv_BeginTx() {
	ctx := context.Background()
	host := travelHost(ctx, "tx", ssf.Typed(tripTx))
	defer host.Close()
	for _, id := range []string{"trip-1", "trip-2"} {
		res, err := host.Invoke(ctx, "trip", id, Trip{Hotel: "H1", Flight: "F1"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s committed: %s\n", id, res.Output)
		left(ctx, host)
	}
	// Output:
	// trip-1 committed: true
	//   hotel free/H1: 1 left
	//   flight free/F1: 0 left
	// trip-2 committed: false
	//   hotel free/H1: 1 left
	//   flight free/F1: 0 left
}

// A saga across the same SSFs: the second trip books a room, finds the flight full, and gives
// the room back.
func ExampleNewSaga() {
	ctx := context.Background()
	host := travelHost(ctx, "saga", ssf.Typed(tripSaga))
	defer host.Close()
	for _, id := range []string{"trip-1", "trip-2"} {
		res, err := host.Invoke(ctx, "trip", id, Trip{Hotel: "H1", Flight: "F1"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: output %s, error %q\n", id, res.Output, res.Error)
		left(ctx, host)
	}
	// Output:
	// trip-1: output "booked", error ""
	//   hotel free/H1: 1 left
	//   flight free/F1: 0 left
	// trip-2: output , error "saga step \"flight\" failed: F1 is full; earlier steps compensated"
	//   hotel free/H1: 1 left
	//   flight free/F1: 0 left
}

// A payment as a SQL step: the application's own tables in the SSF's SQLite file, its
// statements and the step's log entry in one transaction. Sent again, the request runs nothing;
// an execution that crashed after the commit would get the logged balance instead of paying
// twice.
func ExampleRunSQL() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ssfkit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	table, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "shop.db")+"?table=payments")
	if err != nil {
		log.Fatal(err)
	}
	pay := func(env *ssf.Env, amount int64) (int64, error) {
		return ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
			if _, err := tx.Exec(ctx, `UPDATE wallets SET balance = balance - $1 WHERE id = 'ann'`, amount); err != nil {
				return 0, err
			}
			var balance int64
			err := tx.QueryRow(ctx, `SELECT balance FROM wallets WHERE id = 'ann'`).Scan(&balance)
			return balance, err
		})
	}
	host := local.NewHost()
	defer host.Close()
	if _, err := host.Add(ssf.Config{Name: "payments", Store: table, Handler: ssf.Typed(pay)}); err != nil {
		log.Fatal(err)
	}
	// The application's schema is its own; here it is made through the same file.
	if err := table.Driver().(store.SQLTransactor).TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(ctx, `CREATE TABLE wallets (id text PRIMARY KEY, balance integer); INSERT INTO wallets VALUES ('ann', 100)`)
		return err
	}); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"pay-1", "pay-1", "pay-2"} {
		res, err := host.Invoke(ctx, "payments", id, 30)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, string(res.Output), res.Replayed)
	}
	// Output:
	// pay-1 70 false
	// pay-1 70 true
	// pay-2 40 false
}
