package crashtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)

func TestCrashInjectionMemStore(t *testing.T) {
	Run(t, func(testing.TB, string) *store.Table {
		return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
	}, Options{Stride: 1, Schedules: 20})
}

func TestCrashInjectionSQLite(t *testing.T) {
	dir := t.TempDir()
	n := 0
	Run(t, func(t testing.TB, name string) *store.Table {
		n++
		tbl, err := store.Open(context.Background(), fmt.Sprintf("sqlite://%s/crash.db?table=%s_%d", dir, name, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}, Options{Stride: 3, Schedules: 10}) // every point on mem://; every third here keeps the default run short
}
