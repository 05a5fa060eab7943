package testtables

import (
	"fmt"

	"cloud.google.com/go/bigtable/bttest"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// bttestServer is the Bigtable emulator, in-process on 127.0.0.1, started once per test binary
// and stopped by Main.
var bttestServer = &testservers.Server{Name: "bttest (in-process Bigtable emulator)", Start: func() (string, func(), error) {
	srv, err := bttest.NewServer("127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return srv.Addr, srv.Close, nil
}}

// BigtableEmulator returns the address of the binary's Bigtable emulator.
func BigtableEmulator(t suite.T) string { return bttestServer.Addr(t) }

// BigtableURL is the URL of the table named table on the emulator, created on open.
func BigtableURL(t suite.T, table string) string {
	return fmt.Sprintf("bigtable://ssfkit-test/ssfkit-test/%s?create=true&emulator=%s", table, BigtableEmulator(t))
}

// Bigtable returns a fresh table on the binary's Bigtable emulator.
func Bigtable(t suite.T, ssf string) *store.Table {
	return Open(t, BigtableURL(t, Name(ssf)))
}
