package lincheck

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/crashkit"
)

func options(t *testing.T) Options {
	return Options{Clients: 6, Duration: 2500 * time.Millisecond, Keys: 3, Seed: crashkit.Seed(t), MaxDelay: 300 * time.Microsecond, Crash: 0.01}
}

func TestLinearizableMemStore(t *testing.T) {
	Run(t, func(testing.TB, string) *store.Table {
		return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
	}, options(t))
}

func TestLinearizableSQLite(t *testing.T) {
	dir := t.TempDir()
	Run(t, func(t testing.TB, name string) *store.Table {
		tbl, err := store.Open(context.Background(), fmt.Sprintf("sqlite://%s/lin.db?table=%s", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}, options(t))
}
