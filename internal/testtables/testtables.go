// Package testtables opens fresh, empty tables on each backend the default test run covers, and
// lists those backends in one matrix (Backends, matrix.go) that every runtime suite loops over,
// with each suite's sizes per backend, so that every suite runs on every store the same way.
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
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// Main runs the package's tests, then stops the PostgreSQL cluster and the emulators the tests
// started.
func Main(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	testservers.StopAll()
	os.Exit(code)
}

var tables atomic.Int64

// Name makes table names unique within a test binary.
func Name(ssf string) string { return fmt.Sprintf("%s_%d", ssf, tables.Add(1)) }

// Open opens url and closes the table when t ends.
func Open(t suite.T, url string) *store.Table {
	tbl, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// Mem returns a fresh private in-memory table.
func Mem(suite.T, string) *store.Table {
	return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
}

// SQLite returns a factory of fresh tables in one SQLite file in t's temporary directory.
func SQLite(t suite.T) Factory {
	dir := t.TempDir()
	return func(t suite.T, ssf string) *store.Table {
		return Open(t, fmt.Sprintf("sqlite://%s/test.db?table=%s", dir, Name(ssf)))
	}
}

// Postgres returns a fresh table on the throwaway cluster pgtest starts (once per binary).
func Postgres(t suite.T, ssf string) *store.Table {
	return Open(t, pgtest.URL(t, Name(ssf)))
}

// Factory returns a fresh, empty table for the named SSF; the runtime suites take one per
// backend (Backend.Tables).
type Factory func(t suite.T, ssfName string) *store.Table
