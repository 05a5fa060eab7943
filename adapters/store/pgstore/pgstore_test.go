package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

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
