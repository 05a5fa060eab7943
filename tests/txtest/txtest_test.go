package txtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)

func TestTransactionsMemStore(t *testing.T) {
	Run(t, func(testing.TB, string) *store.Table {
		return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
	}, 1)
}

func TestTransactionsSQLite(t *testing.T) {
	dir := t.TempDir()
	n := 0
	Run(t, func(t testing.TB, name string) *store.Table {
		n++
		tbl, err := store.Open(context.Background(), fmt.Sprintf("sqlite://%s/tx.db?table=%s_%d", dir, name, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}, 6) // every point on mem://; every sixth here keeps the default run short
}
