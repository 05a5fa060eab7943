package testtables

import (
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// BigtableEmulator returns the address of the binary's Bigtable emulator, started once per test
// binary and stopped by Main.
func BigtableEmulator(t suite.T) string { return testservers.Bigtable.Addr(t) }

// BigtableURL is the URL of the table named table on the emulator, created on open.
func BigtableURL(t suite.T, table string) string {
	return fmt.Sprintf("bigtable://ssfkit-test/ssfkit-test/%s?create=true&emulator=%s", table, BigtableEmulator(t))
}

// Bigtable returns a fresh table on the binary's Bigtable emulator.
func Bigtable(t suite.T, ssf string) *store.Table {
	return Open(t, BigtableURL(t, Name(ssf)))
}
