package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // mem:// tables
)

// Conditional updates on a mem:// table: create a row only if it is absent, then withdraw from
// it only while a condition (built with the constructors, or parsed from its text) holds.
func ExampleParseCond() {
	ctx := context.Background()
	table, err := store.Open(ctx, "mem://") // a fresh private in-memory table
	if err != nil {
		log.Fatal(err)
	}
	defer table.Close()
	key := store.Key{Partition: "accounts", Sort: "ann"}
	open := store.Update{
		store.SetAttr(store.Attr("balance"), int64(100)),
		store.SetAttr(store.Attr("owner"), map[string]any{"name": "ann"}),
	}
	for range 2 {
		res, err := table.Update(ctx, key, store.RowAbsent(), open) // create only if absent
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("opened:", res.Applied)
	}

	// The same condition, built and parsed.
	built := store.And(
		store.Compare(store.Attr("balance"), store.Ge, int64(30)),
		store.Equal(store.Attr("owner").Entry("name"), "ann"))
	parsed, err := store.ParseCond(`balance >= 30 and owner.name == "ann"`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(built)
	fmt.Println(parsed)

	withdraw := store.Update{store.AddInt(store.Attr("balance"), -30)}
	for range 4 {
		res, err := table.Update(ctx, key, parsed, withdraw)
		if err != nil {
			log.Fatal(err)
		}
		// When the condition fails, Attrs is the row as it was.
		fmt.Println("withdrew 30:", res.Applied, "balance:", res.Attrs["balance"])
	}

	// Conditions evaluate over decoded JSON too: "$" is the whole value (what Env.CondWrite's
	// conditions see), and "== null" holds for a value that is absent.
	fmt.Println(store.MustParseCond("$ == 10").Eval(int64(10), true), store.Equal(nil, nil).Eval(nil, false))

	_, err = store.ParseCond("balance >= ")
	fmt.Println(err)
	fmt.Println(errors.Is(err, store.ErrInvalid))
	// Output:
	// opened: true
	// opened: false
	// (balance >= 30 and owner.name == "ann")
	// (balance >= 30 and owner.name == "ann")
	// withdrew 30: true balance: 70
	// withdrew 30: true balance: 40
	// withdrew 30: true balance: 10
	// withdrew 30: false balance: 10
	// true true
	// condition "balance >= ": at offset 11: expected a literal, found end of input
	// true
}
