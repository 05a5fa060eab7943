// Package testtables opens fresh, empty tables on each backend the default test run covers, so
// that every suite runs on every store the same way.
package testtables

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/pgstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/pgtest"
)

// Main runs the package's tests, then stops the PostgreSQL cluster if a test started it.
func Main(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

var tables atomic.Int64

// name makes table names unique within a test binary.
func name(ssf string) string { return fmt.Sprintf("%s_%d", ssf, tables.Add(1)) }

func open(t testing.TB, url string) *store.Table {
	tbl, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// Mem returns a fresh private in-memory table.
func Mem(testing.TB, string) *store.Table {
	return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
}

// SQLite returns a factory of fresh tables in one SQLite file in t's temporary directory.
func SQLite(t testing.TB) func(testing.TB, string) *store.Table {
	dir := t.TempDir()
	return func(t testing.TB, ssf string) *store.Table {
		return open(t, fmt.Sprintf("sqlite://%s/test.db?table=%s", dir, name(ssf)))
	}
}

// Postgres returns a fresh table on the throwaway cluster pgtest starts (once per binary).
func Postgres(t testing.TB, ssf string) *store.Table {
	return open(t, pgtest.URL(t, name(ssf)))
}
