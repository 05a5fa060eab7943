package txtest

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// The whole suite runs on every backend. Every point on mem://, every tenth on SQLite and every
// sixth on PostgreSQL (the other local stores). The pure-Go SQLite runs about 40 times slower
// under the race detector than without it, so it gets half the concurrent transfers. The emulators take milliseconds per request (moto one request at a time), so they get
// fewer transfers and lockers, a relaunch delay longer than a slow transfer, and a sparser stride.
// Backends served by another process run in parallel (after the in-process ones): their tests
// spend most of their time waiting on that process, which runs on the other core.

func TestTransactionsMemStore(t *testing.T) { Run(t, testtables.Mem, Options{}) }

func TestTransactionsSQLite(t *testing.T) {
	Run(t, testtables.SQLite(t), Options{Stride: 10, Transfers: 12})
}

func TestTransactionsPostgres(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Postgres, Options{Stride: 6})
}

// emulated sizes the suite for a backend served by an emulator.
func emulated(stride int) Options {
	return Options{Stride: stride, Transfers: 10, Clients: 3, Crashes: 10, Lockers: 8,
		RelaunchDelay: 2 * time.Second, CollectEvery: 500 * time.Millisecond, MaxBackOff: time.Second, Deadline: 3 * time.Minute}
}

// moto serves one request at a time, about 150 a second, so a transfer takes seconds: fewer
// transfers and crashes, and a relaunch delay that does not relaunch live transfers.
func TestTransactionsDynamo(t *testing.T) {
	t.Parallel()
	opts := emulated(180)
	opts.Transfers, opts.Clients, opts.Crashes, opts.RelaunchDelay = 6, 2, 4, 6*time.Second
	Run(t, testtables.Dynamo, opts)
}

func TestTransactionsAzureTables(t *testing.T) {
	t.Parallel()
	Run(t, testtables.AzureTables, emulated(40))
}

func TestTransactionsBigtable(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Bigtable, emulated(36))
}

func TestTransactionsFirestore(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Firestore, emulated(127))
}
