package ssftemporal_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"slices"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // mem:// tables
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

// Booking is the input of the hotel and flight SSFs.
type Booking struct {
	Op   string `json:"op"` // "add" rooms or seats, or "book" one
	Item string `json:"item"`
	N    int64  `json:"n,omitempty"`
}

// stock is the hotel's and the flight's SSF. It answers how many are left; a booking of a
// full item aborts the transaction it runs in.
func stock(env *ssf.Env, b Booking) (int64, error) {
	var free int64
	if _, err := env.ReadInto("free", b.Item, &free); err != nil {
		return 0, err
	}
	switch {
	case b.Op == "add":
		free += b.N
	case free == 0:
		return 0, env.AbortTx()
	default:
		free--
	}
	return free, env.Write("free", b.Item, free)
}

// Trip is the reserve workflow's input.
type Trip struct {
	Hotel  string `json:"hotel"`
	Flight string `json:"flight"`
}

// reserve books a room and a seat in one transaction the workflow coordinates. Each SSF call is
// an activity whose effects happen exactly once, however often Temporal retries it.
func reserve(ctx workflow.Context, t Trip) (committed bool, err error) {
	return ssftemporal.RunTx(ctx, ssftemporal.TxOptions{}, func(tx *ssftemporal.Tx) error {
		if err := tx.Call(ctx, "hotel", Booking{Op: "book", Item: t.Hotel}, nil); err != nil {
			return err
		}
		return tx.Call(ctx, "flight", Booking{Op: "book", Item: t.Flight}, nil)
	})
}

// A workflow transaction under Temporal's test environment, with the SSFs on an in-process host:
// the first trip takes the last seat; the second finds the flight full, and the transaction
// aborts in both SSFs.
func ExampleRunTx() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	host := local.NewHost()
	host.Logger = quiet
	defer host.Close()
	for _, name := range []string{"hotel", "flight"} {
		table, err := store.Open(ctx, "mem://") // a fresh private in-memory table
		if err != nil {
			log.Fatal(err)
		}
		if _, err := host.Add(ssf.Config{Name: name, Store: table, Handler: ssf.Typed(stock), Logger: quiet}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := host.Invoke(ctx, "hotel", "stock-H1", Booking{Op: "add", Item: "H1", N: 2}); err != nil {
		log.Fatal(err)
	}
	if _, err := host.Invoke(ctx, "flight", "stock-F1", Booking{Op: "add", Item: "F1", N: 1}); err != nil {
		log.Fatal(err)
	}

	for _, id := range []string{"trip-1", "trip-2"} {
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(tlog.NewStructuredLogger(quiet))
		env := suite.NewTestWorkflowEnvironment()
		ssftemporal.Register(env, host.Runtimes()...) // as on a worker: one activity per SSF
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		env.ExecuteWorkflow(reserve, Trip{Hotel: "H1", Flight: "F1"})
		var committed bool
		if err := env.GetWorkflowResult(&committed); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s committed: %v\n", id, committed)
	}
	for _, rt := range host.Runtimes() {
		items, err := rt.Items(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(items)) {
			fmt.Printf("%s %s: %s left\n", rt.Name(), k, items[k])
		}
	}
	// Output:
	// trip-1 committed: true
	// trip-2 committed: false
	// flight free/F1: 0 left
	// hotel free/H1: 1 left
}
