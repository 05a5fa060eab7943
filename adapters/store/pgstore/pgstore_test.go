package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/pgstore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

var tables atomic.Int64

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		tbl, err := store.Open(context.Background(), pgtest.URL(t, fmt.Sprintf("conf_%d", tables.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		return tbl.Driver()
	})
}

// The same driver without store.Transactor, as the runtime's portable path sees it.
func TestConformanceWithoutTransactions(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		tbl, err := store.Open(context.Background(), pgtest.URL(t, fmt.Sprintf("conf_%d", tables.Add(1)))+"&transactions=off")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tbl.Driver().(store.Transactor); ok {
			t.Fatal("transactions=off still offers store.Transactor")
		}
		return tbl.Driver()
	})
}

func TestOpenErrors(t *testing.T) {
	good := pgtest.URL(t, "x")
	for _, bad := range []string{
		strings.Replace(good, "table=x", "table=bad-name", 1),
		good + "&max_row_bytes=1",
		good + "&transactions=maybe",
		"postgres://postgres@127.0.0.1:1/postgres", // nothing listens there
	} {
		if _, err := store.Open(context.Background(), bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// An update that may only create its row (a log entry, an intent), or usually does (an intent
// replacing a void, an index entry), is one INSERT when the row is absent, alone or in a
// transaction; when the row exists it gets the result any conditional update gets, with one
// INSERT tried before the locked read; a delete without a condition is one statement. Statements are
// counted by pg_stat_statements on the durable cluster, which loads it.
func TestCreateOnlyIsOneStatement(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "create_only")
	set := store.Update{store.SetAttr(store.Path{"v"}, int64(1))}
	for i, c := range []struct {
		name string
		run  func(key store.Key, cond store.Cond) (store.UpdateResult, error)
		want int64 // statements when the row is absent
	}{
		{"alone", func(key store.Key, cond store.Cond) (store.UpdateResult, error) { return d.Update(ctx, key, cond, set) }, 1},
		{"in a transaction", func(key store.Key, cond store.Cond) (r store.UpdateResult, err error) {
			err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) (err error) {
				r, err = tx.Update(ctx, key, cond, set)
				return err
			})
			return r, err
		}, 3}, // BEGIN, INSERT, COMMIT
	} {
		for j, cond := range []store.Cond{store.RowAbsent(), store.And(store.RowAbsent(), store.NotExists(store.Path{"v"})),
			store.Or(store.RowAbsent(), store.Equal(store.Path{"v"}, int64(5))), store.Always()} {
			key := store.Key{Partition: fmt.Sprintf("p%d-%d", i, j), Sort: "s"}
			before := statements()
			r, err := c.run(key, cond)
			if err != nil || !r.Applied {
				t.Fatalf("%s, %v: creating an absent row: %+v %v", c.name, cond, r, err)
			}
			if got := statements() - before; got != c.want { // (the count itself is normalized to "query ~* $1": not counted)
				t.Errorf("%s, %v: %d statements, want %d", c.name, cond, got, c.want)
			}
			// On the existing row: the INSERT that found it, then the read (alone: a SELECT; in a
			// transaction: BEGIN, SELECT ... FOR UPDATE, COMMIT), and the UPDATE when the condition
			// holds; never a second INSERT.
			before = statements()
			r, err = c.run(key, cond)
			holds := cond.Op == store.OpTrue
			if err != nil || r.Applied != holds || r.Attrs["v"] != int64(1) {
				t.Errorf("%s, %v: on the existing row: %+v %v, want applied %v with the current row", c.name, cond, r, err, holds)
			}
			want := c.want + 1
			if holds {
				want++
			}
			if got := statements() - before; got != want {
				t.Errorf("%s, %v: on the existing row: %d statements, want %d", c.name, cond, got, want)
			}
		}
	}
	// A delete without a condition is one statement (three in a transaction).
	before := statements()
	if ok, err := d.Delete(ctx, store.Key{Partition: "p0-0", Sort: "s"}, store.Always()); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if err := d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		ok, err := tx.Delete(ctx, store.Key{Partition: "p0-1", Sort: "s"}, store.Always())
		if err == nil && !ok {
			err = errors.New("nothing deleted")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := statements() - before; got != 4 {
		t.Errorf("two deletes without a condition, one in a transaction: %d statements, want 1 + 3", got)
	}
}

// Inside a transaction, updating a row the transaction's scan read is one compare-and-swap
// UPDATE; a row another writer changed since the scan is decided on its current state, not on
// what the scan saw.
func TestScannedRowIsUpdatedInOneStatement(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "scanned_rows")
	key := store.Key{Partition: "p", Sort: "row"}
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	if _, err := d.Update(ctx, key, store.Always(), v(1)); err != nil {
		t.Fatal(err)
	}
	before := statements()
	var r store.UpdateResult
	if err := d.(store.Transactor).Transact(ctx, func(tx store.Driver) (err error) {
		if _, err := tx.Scan(ctx, "p", store.ScanOptions{Projection: []store.Path{}}); err != nil {
			return err
		}
		r, err = tx.Update(ctx, key, store.Equal(store.Path{"v"}, int64(1)), v(2))
		return err
	}); err != nil || !r.Applied || r.Attrs["v"] != int64(2) {
		t.Fatalf("update of a scanned row: %+v %v", r, err)
	}
	if got := statements() - before; got != 4 { // BEGIN with the scan, UPDATE, COMMIT
		t.Errorf("scan and update in a transaction: %d statements, want 4", got)
	}
	if err := d.(store.Transactor).Transact(ctx, func(tx store.Driver) (err error) {
		if _, err := tx.Scan(ctx, "p", store.ScanOptions{}); err != nil {
			return err
		}
		if _, err := d.Update(ctx, key, store.Always(), v(10)); err != nil { // another writer, committed
			return err
		}
		r, err = tx.Update(ctx, key, store.Equal(store.Path{"v"}, int64(2)), v(3))
		return err
	}); err != nil || r.Applied || r.Attrs["v"] != int64(10) {
		t.Fatalf("update of a row changed since the scan: %+v %v, want refused on the current row (v 10)", r, err)
	}
	if a, _, err := d.Get(ctx, key); err != nil || a["v"] != int64(10) {
		t.Fatalf("the row holds %v (%v), want the other writer's 10", a, err)
	}
}

// A batch in a transaction sends its one-statement updates together (a creation, a swap of a
// scanned row) and decides the others, and those whose statement found the row otherwise, on
// the rows' current state, as the same updates one by one would.
func TestBatchInATransaction(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "tx_batches")
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	tail, entry, other := store.Key{Partition: "p", Sort: "tail"}, store.Key{Partition: "log", Sort: "1"}, store.Key{Partition: "q", Sort: "x"}
	if _, err := d.Update(ctx, tail, store.Always(), v(1)); err != nil {
		t.Fatal(err)
	}
	batch := func(interfere func() error) (rs []store.UpdateResult, err error) {
		err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
			if _, err := tx.Scan(ctx, "p", store.ScanOptions{}); err != nil {
				return err
			}
			if err := interfere(); err != nil {
				return err
			}
			rs, err = tx.(store.Batcher).UpdateBatch(ctx, []store.BatchUpdate{
				{Key: entry, Cond: store.RowAbsent(), Update: v(7)},
				{Key: tail, Cond: store.Equal(store.Path{"v"}, int64(1)), Update: v(2)},
				{Key: other, Cond: store.RowExists(), Update: v(3)}, // neither: decided alone
			})
			return err
		})
		return rs, err
	}
	before := statements()
	rs, err := batch(func() error { return nil })
	if err != nil || !rs[0].Applied || !rs[1].Applied || rs[1].Attrs["v"] != int64(2) || rs[2].Applied {
		t.Fatalf("batch: %+v %v", rs, err)
	}
	// BEGIN with the scan; the INSERT and the UPDATE; the locked read of the absent row; COMMIT.
	if got := statements() - before; got != 6 {
		t.Errorf("batch in a transaction: %d statements, want 6", got)
	}
	// The entry exists now and another writer changes the tail after the scan: both statements
	// find their rows otherwise, and both updates are decided on the rows as they are.
	if _, err := d.Update(ctx, tail, store.Always(), v(1)); err != nil {
		t.Fatal(err)
	}
	rs, err = batch(func() error { _, err := d.Update(ctx, tail, store.Always(), v(10)); return err })
	if err != nil || rs[0].Applied || rs[0].Attrs["v"] != int64(7) || rs[1].Applied || rs[1].Attrs["v"] != int64(10) {
		t.Fatalf("batch on rows changed since: %+v %v, want both refused with the current rows (entry 7, tail 10)", rs, err)
	}
	if a, _, err := d.Get(ctx, tail); err != nil || a["v"] != int64(10) {
		t.Fatalf("the tail holds %v (%v), want the other writer's 10", a, err)
	}
}

// A final batch whose updates all apply as the transaction's scan predicts commits in the same
// round trip; one whose row was there or changed since the scan aborts the attempt, and the
// function runs again with the batch decided one update at a time, on the rows as they are.
func TestFinalBatchCommitsWithItsStatements(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "final_batches")
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	tail := store.Key{Partition: "p", Sort: "tail"}
	if _, err := d.Update(ctx, tail, store.Always(), v(1)); err != nil {
		t.Fatal(err)
	}
	run := func(entry store.Key, interfere func() error) (rs []store.UpdateResult, committed bool, attempts int, err error) {
		err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
			attempts++
			rows, err := tx.Scan(ctx, "p", store.ScanOptions{})
			if err != nil {
				return err
			}
			cur, _ := rows[0].Attrs["v"].(int64)
			if attempts == 1 {
				if err := interfere(); err != nil {
					return err
				}
			}
			rs, committed, err = tx.(store.FinalBatcher).UpdateBatchFinal(ctx, []store.BatchUpdate{
				{Key: entry, Cond: store.RowAbsent(), Update: v(7)},
				{Key: tail, Cond: store.Equal(store.Path{"v"}, cur), Update: v(cur + 1)},
			})
			return err
		})
		return rs, committed, attempts, err
	}
	before := statements()
	rs, committed, attempts, err := run(store.Key{Partition: "log", Sort: "1"}, func() error { return nil })
	if err != nil || !committed || attempts != 1 || !rs[0].Applied || !rs[1].Applied || rs[1].Attrs["v"] != int64(2) {
		t.Fatalf("final batch: %+v committed %v after %d attempts, %v", rs, committed, attempts, err)
	}
	if got := statements() - before; got != 5 { // BEGIN with the scan; INSERT, the swap, COMMIT
		t.Errorf("final batch: %d statements, want 5", got)
	}
	// The entry is there already: the attempt aborts, and the next decides on the rows.
	rs, committed, attempts, err = run(store.Key{Partition: "log", Sort: "1"}, func() error { return nil })
	if err != nil || committed || attempts != 2 || rs[0].Applied || rs[0].Attrs["v"] != int64(7) || !rs[1].Applied || rs[1].Attrs["v"] != int64(3) {
		t.Fatalf("final batch over an existing entry: %+v committed %v after %d attempts, %v; want the entry refused, the tail 3, two attempts", rs, committed, attempts, err)
	}
	// Another writer changes the tail after the first attempt's scan: nothing of it commits.
	rs, committed, attempts, err = run(store.Key{Partition: "log", Sort: "2"}, func() error { _, err := d.Update(ctx, tail, store.Always(), v(10)); return err })
	if err != nil || committed || attempts != 2 || !rs[0].Applied || !rs[1].Applied || rs[1].Attrs["v"] != int64(11) {
		t.Fatalf("final batch on a changed tail: %+v committed %v after %d attempts, %v; want the tail 11 after two attempts", rs, committed, attempts, err)
	}
}

// A batch of creations (an intent with its index entry) is one round trip; where a row exists
// the whole attempt aborts and the batch is decided on the rows as they are: the existing row
// is not overwritten, and an update that always applies does apply.
func TestBatchOfCreations(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "created_batches")
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	intent, index := store.Key{Partition: "i", Sort: "intent"}, store.Key{Partition: "p", Sort: "1"}
	batch := func(n int64) []store.BatchUpdate {
		return []store.BatchUpdate{{Key: index, Cond: store.Always(), Update: v(n)}, {Key: intent, Cond: store.RowAbsent(), Update: v(n)}}
	}
	before := statements()
	rs, err := d.(store.Batcher).UpdateBatch(ctx, batch(1))
	if err != nil || !rs[0].Applied || !rs[1].Applied {
		t.Fatalf("creations: %+v %v", rs, err)
	}
	if got := statements() - before; got != 4 { // BEGIN, the two INSERTs, COMMIT: sent in one pgx batch
		t.Errorf("creations: %d statements, want 4", got)
	}
	rs, err = d.(store.Batcher).UpdateBatch(ctx, batch(2))
	if err != nil || !rs[0].Applied || rs[0].Attrs["v"] != int64(2) || rs[1].Applied || rs[1].Attrs["v"] != int64(1) {
		t.Fatalf("creations over existing rows: %+v %v; want the index entry updated to 2 and the intent refused, still 1", rs, err)
	}
	for key, want := range map[store.Key]int64{index: 2, intent: 1} {
		if a, _, err := d.Get(ctx, key); err != nil || a["v"] != want {
			t.Errorf("%v: %v %v, want v %d", key, a, err, want)
		}
	}
}

// A final batch of creations only (a called instance's intent created done, with its index
// entry and log entries) commits in the same round trip too; one that meets an existing row
// aborts the attempt, and the next decides on the rows as they are.
func TestFinalBatchOfCreationsCommitsWithThem(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "final_creations")
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	intent, index := store.Key{Partition: "i", Sort: "intent"}, store.Key{Partition: "f", Sort: "1"}
	run := func(n int64) (rs []store.UpdateResult, committed bool, attempts int, err error) {
		err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
			attempts++
			rs, committed, err = tx.(store.FinalBatcher).UpdateBatchFinal(ctx, []store.BatchUpdate{
				{Key: intent, Cond: store.RowAbsent(), Update: v(n)},
				{Key: index, Cond: store.Always(), Update: v(n)},
			})
			return err
		})
		return rs, committed, attempts, err
	}
	before := statements()
	rs, committed, attempts, err := run(1)
	if err != nil || !committed || attempts != 1 || !rs[0].Applied || !rs[1].Applied {
		t.Fatalf("creations: %+v committed %v after %d attempts, %v", rs, committed, attempts, err)
	}
	if got := statements() - before; got != 4 { // BEGIN, the two INSERTs, COMMIT
		t.Errorf("creations: %d statements, want 4", got)
	}
	rs, committed, attempts, err = run(2)
	if err != nil || committed || attempts != 2 || rs[0].Applied || rs[0].Attrs["v"] != int64(1) || !rs[1].Applied {
		t.Fatalf("creations over an existing intent: %+v committed %v after %d attempts, %v; want the intent refused and two attempts", rs, committed, attempts, err)
	}
}

// A blind delete goes with the transaction's next request, or with its COMMIT when none
// follows; a transaction that fails takes it back with everything else.
func TestDeleteBlindGoesWithTheNextRequest(t *testing.T) {
	ctx := context.Background()
	d, _ := countedTable(t, "blind_deletes")
	v := store.Update{store.SetAttr(store.Path{"v"}, int64(1))}
	a, b, c := store.Key{Partition: "p", Sort: "a"}, store.Key{Partition: "p", Sort: "b"}, store.Key{Partition: "p", Sort: "c"}
	for _, k := range []store.Key{a, b, c} {
		if _, err := d.Update(ctx, k, store.Always(), v); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(k store.Key) bool {
		_, found, err := d.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	// With a read after it, in the transaction's first request: the read does not see the row.
	err := d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		if err := tx.(store.BlindDeleter).DeleteBlind(ctx, a); err != nil {
			return err
		}
		if _, found, err := tx.Get(ctx, a); err != nil || found {
			return fmt.Errorf("the transaction still sees the row it deleted: %v %v", found, err)
		}
		_, err := tx.Update(ctx, b, store.Always(), store.Update{store.SetAttr(store.Path{"v"}, int64(2))})
		return err
	})
	if err != nil || exists(a) || !exists(b) {
		t.Fatalf("delete then read: %v; a exists %v, b exists %v; want a gone, b kept", err, exists(a), exists(b))
	}
	// A failed transaction deletes nothing.
	err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		if err := tx.(store.BlindDeleter).DeleteBlind(ctx, b); err != nil {
			return err
		}
		if _, _, err := tx.Get(ctx, c); err != nil {
			return err
		}
		return errors.New("the function fails")
	})
	if err == nil || !exists(b) {
		t.Fatalf("a failed transaction: %v; b exists %v, want it kept", err, exists(b))
	}
	// The only operation: it goes with the COMMIT.
	err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		return tx.(store.BlindDeleter).DeleteBlind(ctx, c)
	})
	if err != nil || exists(c) {
		t.Fatalf("a transaction of one blind delete: %v; c exists %v, want it gone", err, exists(c))
	}
}

// A row the transaction read with Get is swapped like a scanned one: the runtime's done mark
// reads its intent in the transaction so that it, the index entries and the COMMIT go in one
// final batch; a row changed after the Get aborts that batch, and the next attempt decides.
func TestFinalBatchSwapsARowReadByGet(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "final_gets")
	done := func(b bool) store.Update { return store.Update{store.SetAttr(store.Path{"done"}, b)} }
	intent := store.Key{Partition: "i", Sort: "intent"}
	if _, err := d.Update(ctx, intent, store.Always(), done(false)); err != nil {
		t.Fatal(err)
	}
	run := func(entry store.Key, interfere func() error) (rs []store.UpdateResult, committed bool, attempts int, err error) {
		err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
			attempts++
			if _, _, err := tx.Get(ctx, intent); err != nil {
				return err
			}
			if attempts == 1 {
				if err := interfere(); err != nil {
					return err
				}
			}
			rs, committed, err = tx.(store.FinalBatcher).UpdateBatchFinal(ctx, []store.BatchUpdate{
				{Key: intent, Cond: store.Equal(store.Path{"done"}, false), Update: done(true)},
				{Key: entry, Cond: store.Always(), Update: done(true)},
			})
			return err
		})
		return rs, committed, attempts, err
	}
	before := statements()
	rs, committed, attempts, err := run(store.Key{Partition: "f", Sort: "1"}, func() error { return nil })
	if err != nil || !committed || attempts != 1 || !rs[0].Applied || !rs[1].Applied {
		t.Fatalf("final batch after a Get: %+v committed %v after %d attempts, %v; want it committed in one attempt", rs, committed, attempts, err)
	}
	if got := statements() - before; got != 5 { // BEGIN with the SELECT; the swap, INSERT, COMMIT
		t.Errorf("final batch after a Get: %d statements, want 5", got)
	}
	// Another writer marks it done after the first attempt's Get: the batch aborts, and the
	// next attempt finds the condition false.
	if _, err := d.Update(ctx, intent, store.Always(), done(false)); err != nil {
		t.Fatal(err)
	}
	rs, committed, attempts, err = run(store.Key{Partition: "f", Sort: "2"}, func() error { _, err := d.Update(ctx, intent, store.Always(), done(true)); return err })
	if err != nil || committed || attempts != 2 || rs[0].Applied || !rs[1].Applied {
		t.Fatalf("final batch on an intent changed after the Get: %+v committed %v after %d attempts, %v; want the done mark refused in a second attempt", rs, committed, attempts, err)
	}
}

// A row presumed to hold what an update left it (the runtime's done mark, on the intent its
// execution created) is swapped without being read: the final batch is one round trip with its
// COMMIT. If the row holds anything else by then, the swap matches nothing, the batch aborts,
// and the next attempt decides on the row as it is: a presumption never applies an update
// planned on other contents.
func TestFinalBatchSwapsAPresumedRow(t *testing.T) {
	ctx := context.Background()
	d, statements := countedTable(t, "final_presumed")
	set := func(attr string, v any) store.Update { return store.Update{store.SetAttr(store.Path{attr}, v)} }
	intent := store.Key{Partition: "i", Sort: "intent"}
	created, err := d.Update(ctx, intent, store.RowAbsent(), set("done", false))
	if err != nil {
		t.Fatal(err)
	}
	run := func(presumed store.Attrs, entry store.Key, interfere func() error) (rs []store.UpdateResult, committed bool, attempts int, err error) {
		err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
			attempts++
			if !tx.(store.Presumer).Presume(intent, presumed) {
				return errors.New("the transaction did not take the presumption")
			}
			if attempts == 1 {
				if err := interfere(); err != nil {
					return err
				}
			}
			rs, committed, err = tx.(store.FinalBatcher).UpdateBatchFinal(ctx, []store.BatchUpdate{
				{Key: intent, Cond: store.Equal(store.Path{"done"}, false), Update: set("done", true)},
				{Key: entry, Cond: store.Always(), Update: set("done", true)},
			})
			return err
		})
		return rs, committed, attempts, err
	}
	before := statements()
	rs, committed, attempts, err := run(created.Attrs, store.Key{Partition: "f", Sort: "1"}, func() error { return nil })
	if err != nil || !committed || attempts != 1 || !rs[0].Applied || !rs[1].Applied {
		t.Fatalf("final batch on a presumed row: %+v committed %v after %d attempts, %v; want it committed in one attempt", rs, committed, attempts, err)
	}
	if got := statements() - before; got != 4 { // BEGIN with the swap, the INSERT, COMMIT: no SELECT
		t.Errorf("final batch on a presumed row: %d statements, want 4", got)
	}
	// Another writer changes the row after the presumption (done is still false): the swap
	// matches nothing, and the next attempt applies the update on top of the writer's change.
	reset, err := d.Update(ctx, intent, store.Always(), set("done", false))
	if err != nil {
		t.Fatal(err)
	}
	rs, committed, attempts, err = run(reset.Attrs, store.Key{Partition: "f", Sort: "2"}, func() error {
		_, err := d.Update(ctx, intent, store.Always(), set("claimed", int64(7)))
		return err
	})
	if err != nil || committed || attempts != 2 || !rs[0].Applied || rs[0].Attrs["claimed"] != int64(7) {
		t.Fatalf("final batch on a row changed after the presumption: %+v committed %v after %d attempts, %v; want it applied on the changed row in a second attempt", rs, committed, attempts, err)
	}
	if a, _, err := d.Get(ctx, intent); err != nil || a["claimed"] != int64(7) || a["done"] != true {
		t.Fatalf("the row after it: %v, %v; want the other writer's change kept and done", a, err)
	}
	// A presumption that is wrong from the start (another writer marked it done): refused.
	rs, committed, _, err = run(reset.Attrs, store.Key{Partition: "f", Sort: "3"}, func() error { return nil })
	if err != nil || committed || rs[0].Applied {
		t.Fatalf("final batch on a row presumed not done, which is done: %+v committed %v, %v; want the done mark refused", rs, committed, err)
	}
}

// countedTable opens table on the durable cluster and returns its driver and a count of the
// statements run on it so far (with every COMMIT and ROLLBACK, and a BEGIN for each: a BEGIN
// pipelined with the first statement, in the extended protocol, is not in pg_stat_statements).
func countedTable(t *testing.T, table string) (store.Driver, func() int64) {
	ctx := context.Background()
	base, err := pgtest.DurableBaseURL()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := store.Open(ctx, base+"?table="+table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		t.Fatalf("the durable cluster has no pg_stat_statements (internal/pgtest preloads it from PostgreSQL's lib directory): %v", err)
	}
	return tbl.Driver(), func() int64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(calls) FILTER (WHERE query ~* ('\y' || $1 || '\y|^commit|^rollback')), 0)::bigint
			+ coalesce(sum(calls) FILTER (WHERE query ~* '^(commit|rollback)'), 0)::bigint FROM pg_stat_statements`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// An update of a row the transaction knows the bytes of, whose condition holds on them, is not
// a round trip of its own: the swap goes with the transaction's next request (the runtime's
// transaction end commits its items this way, then its done mark and the COMMIT in one). Until
// then the row is not locked; the transaction's own later read sees the update. A row another
// writer changed in between makes that next request fail the attempt, and the next attempt
// decides the update on the row as it is.
func TestSwapGoesWithTheNextRequest(t *testing.T) {
	ctx := context.Background()
	d, _ := countedTable(t, "swaps_later")
	base, err := pgtest.DurableBaseURL()
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close(ctx) })
	lockedElsewhere := func(k store.Key) bool {
		_, err := other.Exec(ctx, `SELECT 1 FROM swaps_later WHERE pk = $1 AND sk = $2 FOR UPDATE NOWAIT`, k.Partition, k.Sort)
		return err != nil
	}
	v := func(n int64) store.Update { return store.Update{store.SetAttr(store.Path{"v"}, n)} }
	a, b := store.Key{Partition: "p", Sort: "a"}, store.Key{Partition: "p", Sort: "b"}
	for _, k := range []store.Key{a, b} {
		if _, err := d.Update(ctx, k, store.Always(), v(1)); err != nil {
			t.Fatal(err)
		}
	}
	attempts := 0
	err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		attempts++
		if _, _, err := tx.Get(ctx, a); err != nil {
			return err
		}
		r, err := tx.Update(ctx, a, store.Equal(store.Path{"v"}, int64(1)), v(2))
		if err != nil || !r.Applied {
			return fmt.Errorf("update of a read row: %+v %v", r, err)
		}
		if lockedElsewhere(a) {
			return errors.New("the swap was sent on its own: the row is locked before the next request")
		}
		got, _, err := tx.Get(ctx, b) // the next request: the swap goes first
		if err != nil || got["v"] != int64(1) || !lockedElsewhere(a) {
			return fmt.Errorf("the next request: %v %v, a locked %v; want b read and a locked by the swap", got, err, lockedElsewhere(a))
		}
		got, _, err = tx.Get(ctx, a)
		if err != nil || got["v"] != int64(2) {
			return fmt.Errorf("the transaction reads %v (%v) after its update, want 2", got, err)
		}
		return nil
	})
	if err != nil || attempts != 1 {
		t.Fatalf("swap sent ahead: %v after %d attempts, want one", err, attempts)
	}
	// Another writer changes the row between the read and the update: the attempt fails with the
	// next request, and the second decides on the writer's value.
	attempts = 0
	var last store.UpdateResult
	err = d.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		attempts++
		if _, _, err := tx.Get(ctx, a); err != nil {
			return err
		}
		if attempts == 1 {
			if _, err := d.Update(ctx, a, store.Always(), v(10)); err != nil {
				return err
			}
		}
		var err error
		if last, err = tx.Update(ctx, a, store.Equal(store.Path{"v"}, int64(2)), v(3)); err != nil {
			return err
		}
		_, _, err = tx.Get(ctx, b)
		return err
	})
	if err != nil || attempts != 2 || last.Applied || last.Attrs["v"] != int64(10) {
		t.Fatalf("swap of a row changed since the read: %+v %v after %d attempts, want refused on the writer's 10 in a second attempt", last, err, attempts)
	}
	if got, _, err := d.Get(ctx, a); err != nil || got["v"] != int64(10) {
		t.Fatalf("the row holds %v (%v), want the other writer's 10", got, err)
	}
}
