package txtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/pgstore"
	"github.com/ssfkit/ssfkit/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

var pgTables atomic.Int64

// postgresTables opens a fresh table per SSF on the throwaway cluster.
func postgresTables(t testing.TB, name string) *store.Table {
	tbl, err := store.Open(context.Background(), pgtest.URL(t, fmt.Sprintf("%s_%d", name, pgTables.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

func TestTransactionsPostgres(t *testing.T) {
	Run(t, postgresTables, 6)
}
