package memstore_test

import (
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(*testing.T) store.Driver { return memstore.New(memstore.DefaultMaxRowBytes) })
}

func BenchmarkDriver(b *testing.B) {
	storetest.RunBenchmarks(b, func(*testing.B) store.Driver { return memstore.New(memstore.DefaultMaxRowBytes) })
}
