package sharedlog_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // mem:// tables
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// Append records to a color and read them back by sequence number (SN), forwards, and from the
// tail.
func ExampleLog_Append() {
	ctx := context.Background()
	table, err := store.Open(ctx, "mem://") // a fresh private in-memory table
	if err != nil {
		log.Fatal(err)
	}
	l, err := sharedlog.New(table, "shop", sharedlog.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := l.AddColor(ctx, "orders", ""); err != nil { // a top-level color
		log.Fatal(err)
	}
	last, err := l.Append(ctx, "orders", []byte("order 1"), []byte("order 2"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended up to SN", last)
	if last, err = l.Append(ctx, "orders", []byte("order 3")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended up to SN", last)

	rec, err := l.Read(ctx, "orders", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read: SN %d: %s\n", rec.SN, rec.Data)
	var found bool
	for sn := uint64(1); ; sn = rec.SN + 1 { // a scan: each record at or after sn, in order
		rec, found, err = l.ReadNext(ctx, "orders", sn)
		if err != nil {
			log.Fatal(err)
		}
		if !found {
			break
		}
		fmt.Printf("scan: SN %d: %s\n", rec.SN, rec.Data)
	}
	tail, err := l.CheckTail(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tail:", tail)
	_, err = l.Read(ctx, "orders", 4)
	fmt.Println(errors.Is(err, sharedlog.ErrNotFound), err)
	// Output:
	// appended up to SN 2
	// appended up to SN 3
	// read: SN 2: order 2
	// scan: SN 1: order 1
	// scan: SN 2: order 2
	// scan: SN 3: order 3
	// tail: 3
	// true sharedlog: no record: orders 4
}
