package bench

import (
	"context"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
)

// transactingStore is a store.Transactor whose transactions' driver has every optional
// interface a transaction's driver may have, and counts their use.
type transactingStore struct {
	store.Driver
	final, blind, presumed int
}

func (s *transactingStore) Transact(ctx context.Context, fn func(store.Driver) error) error {
	return fn(transactionDriver{s})
}

type transactionDriver struct{ *transactingStore }

func (t transactionDriver) UpdateBatchFinal(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	t.final++
	rs, err := store.UpdateBatch(ctx, t.Driver, ups)
	return rs, false, err
}

func (t transactionDriver) DeleteBlind(ctx context.Context, key store.Key) error {
	t.blind++
	_, err := t.Driver.Delete(ctx, key, store.Always())
	return err
}

func (t transactionDriver) Presume(store.Key, store.Attrs) bool {
	t.presumed++
	return true
}

// A counted store's transactions keep the optional interfaces of the store's (final batches,
// blind deletes, presumed rows): without them the runtime takes a slower path through a
// counted store than through the store itself, and the benchmark measures that path.
func TestCountedTransactionsKeepTheStoresPath(t *testing.T) {
	ctx := context.Background()
	st := &transactingStore{Driver: memstore.New(store.PortableMaxRowBytes)}
	c := &Counter{}
	counted := countingTransactor{countingDriver{Driver: st, c: c}}
	key := store.Key{Partition: "p", Sort: "s"}
	err := counted.Transact(ctx, func(tx store.Driver) error {
		if !store.Presume(tx, key, store.Attrs{}) {
			t.Error("the counted transaction does not presume rows")
		}
		fb, ok := tx.(store.FinalBatcher)
		if !ok {
			t.Fatal("the counted transaction has no final batches")
		}
		if _, _, err := fb.UpdateBatchFinal(ctx, []store.BatchUpdate{{Key: key, Cond: store.Always(), Update: store.Update{store.SetAttr(store.Path{"v"}, int64(1))}}}); err != nil {
			return err
		}
		return store.DeleteBlind(ctx, tx, key)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.final != 1 || st.blind != 1 || st.presumed != 1 {
		t.Fatalf("the store's transaction saw %d final batches, %d blind deletes, %d presumptions; want 1 each", st.final, st.blind, st.presumed)
	}
	if got := c.Snapshot(); got.N[reqUpdate] != 1 || got.N[reqDelete] != 1 {
		t.Fatalf("counted %+v, want the final batch as 1 update and the blind delete as 1 delete", got)
	}
}
