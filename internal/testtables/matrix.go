package testtables

import (
	"time"

	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// Backends is the store matrix: every store the default test run covers, one row each. Every
// runtime suite loops over it, one subtest per row named by the row's Name: crash injection
// (tests/crashtest), linearizability (tests/lincheck), transactions (tests/txtest), the shared
// log (orchestrator/sharedlog for the embedded rows, tests/logtest for the others) and the
// schedule regressions (tests/schedules). cmd/ssfkit checks that its drivers.go links every row's
// driver in and that `ssfkit bench backends` has an entry of every row's name.
//
// A new store driver is its package (adapters/store/NAME, with its own storetest conformance
// test), a factory of fresh tables in this package, and one row here.
var Backends = []Backend{
	{
		Name: "mem", Scheme: "mem",
		Tables: func(suite.T) Factory { return Mem },
		// Every crash point and twenty schedules: mem:// costs microseconds.
		Crash: CrashOptions{Stride: 1, Schedules: 20, ConcurrentProvenance: true},
	},
	{
		Name: "sqlite", Scheme: "sqlite",
		Tables: SQLite,
		// Every fifth crash point. The pure-Go SQLite runs about 40 times slower under the race
		// detector than without it, so every tenth point of the transactions' commit and abort
		// and half the concurrent transfers.
		Crash: CrashOptions{Stride: 5, Schedules: 10, ConcurrentProvenance: true},
		Tx:    TxOptions{Stride: 10, Transfers: 12},
	},
	{
		Name: "postgres", Scheme: "postgres", Server: "PostgreSQL (internal/pgtest)", Transactions: true,
		Tables: func(suite.T) Factory { return Postgres },
		Crash:  CrashOptions{Stride: 6, Schedules: 5},
		// The runtime writes through store transactions, which hold row locks across the
		// injected delays: fewer instances finish per second, so the clients run longer to give
		// the garbage collector full rows to reclaim.
		Lincheck: LincheckOptions{Duration: 4 * time.Second},
		Tx:       TxOptions{Stride: 6},
	},
	{
		Name: "dynamodb", Scheme: "dynamodb", Server: testservers.Moto.Name,
		Tables: func(suite.T) Factory { return Dynamo },
		// Moto takes milliseconds per request, one request at a time, and the crash suite's
		// concurrent part makes thousands: its 24 transfers, each relaunched at every collector
		// pass while it runs, took four minutes of a full `make test` (twice the systematic and
		// random parts together). Every 240th point (one of them followed by garbage
		// collection), one random schedule and 10 concurrent transfers.
		Crash: CrashOptions{Stride: 240, Schedules: 1, Transfers: 10},
		// With the default 5 ms relaunch delay, every execution that waits its turn grows
		// duplicates that lengthen everyone's wait (a loaded machine made a 6 s run take six
		// minutes): three clients instead of six, relaunches after 100 ms (still well inside an
		// execution on moto), a 4 s lifetime bounding each duplicate (with 1 s, and once with
		// 2 s, a machine whose moto answered slowly under a parallel `make test` fenced every
		// execution of an instance at its lifetime, 31 launches in two minutes, and left it
		// unfinished), and 6 s that give the garbage collector rows to reclaim.
		Lincheck: LincheckOptions{Clients: 3, Lifetime: 4 * time.Second, Duration: 6 * time.Second, RelaunchDelay: 100 * time.Millisecond},
		// About 150 requests a second make a transfer take seconds: fewer transfers and crashes,
		// and a relaunch delay that does not relaunch live transfers.
		Tx: func() TxOptions {
			o := emulatedTx(180)
			o.Transfers, o.Clients, o.Crashes, o.RelaunchDelay = 6, 2, 4, 6*time.Second
			return o
		}(),
		Log: emulatedLog,
	},
	{
		Name: "azure-tables", Scheme: "aztables", Server: testservers.Azurite.Name,
		Tables: func(suite.T) Factory { return AzureTables },
		// Every 24th point and two schedules: Azurite round trips cost milliseconds, not
		// microseconds.
		Crash: CrashOptions{Stride: 24, Schedules: 2},
		// Executions get a longer lifetime (and the GC a longer bound), and the clients a
		// longer run, so that the GC still deletes rows.
		Lincheck: LincheckOptions{Lifetime: time.Second, Duration: 8 * time.Second},
		Tx:       emulatedTx(40),
		Log:      emulatedLog,
	},
	{
		Name: "bigtable", Scheme: "bigtable", Server: testservers.Bigtable.Name,
		Tables: func(suite.T) Factory { return Bigtable },
		// Every request is a gRPC round trip (bttest in-process) costing about a millisecond of
		// CPU under the race detector: every sixteenth point and two schedules keep the crash
		// suite near half a minute; the crashed, collected and re-executed runs are the same
		// kinds as on every store.
		Crash: CrashOptions{Stride: 16, Schedules: 2},
		// Executions outlive the default 250 ms lifetime, so it is raised, and the clients run
		// longer so that the garbage collector finds rows past the longer bound T.
		Lincheck: LincheckOptions{Lifetime: 500 * time.Millisecond, Duration: 5 * time.Second},
		Tx:       emulatedTx(36),
	},
	{
		Name: "firestore", Scheme: "firestore", Server: testservers.Firestore.Name,
		Tables: func(suite.T) Factory { return Firestore },
		// The emulator takes milliseconds per request, most for queries, whose cost grows with
		// the collection: every 135th point (the first with a garbage-collection pass) and one
		// random schedule keep the crash suite under a minute on a loaded machine.
		Crash: CrashOptions{Stride: 135, Schedules: 1},
		// A one-second lifetime keeps executions from being fenced off while they wait. The
		// garbage collector deletes a row only after two two-second bounds (an instance becomes
		// recyclable, its row dangles) and several passes that each scan every DAAL; a
		// twenty-second run leaves it time to delete some even on a loaded machine (fifteen
		// seconds deleted as few as 5 rows).
		Lincheck: LincheckOptions{Lifetime: time.Second, Duration: 20 * time.Second},
		Tx:       emulatedTx(127),
		Log:      emulatedLog,
	},
}

// Backend is one row of the store matrix.
type Backend struct {
	// Name names the row's subtest in every suite (TestCrashInjection/dynamodb) and its entry in
	// `ssfkit bench backends`.
	Name string
	// Scheme is the URL scheme the row's driver registers; cmd/ssfkit/drivers.go must link the
	// driver in (TestEveryBackendIsLinkedIn).
	Scheme string
	// Server names what serves the tables, which the factory starts on 127.0.0.1 once per test
	// binary (PostgreSQL or an emulator, in process or not; "" for a store embedded in the test:
	// mem, SQLite). A server that is not installed fails the test, saying how to install it: it
	// never skips. The suites run the rows with a server in parallel, after the embedded ones
	// (their time goes to waiting on the server); the shared log's suite runs the embedded rows
	// in orchestrator/sharedlog and the others in tests/logtest.
	Server string
	// Tables returns the factory of fresh, empty tables that test t uses (on SQLite, tables in
	// one file in t's temporary directory).
	Tables func(t suite.T) Factory
	// Transactions marks the stores whose drivers run the runtime's writes as store
	// transactions (store.Transactor: PostgreSQL), where no execution can stop inside a write:
	// the schedule regressions (tests/schedules) skip there the schedules that stop inside one.
	Transactions bool

	// The suites' sizes on this backend; a zero field is the suite's default.
	Crash    CrashOptions    // tests/crashtest (its Options)
	Lincheck LincheckOptions // tests/lincheck (over its defaults)
	Tx       TxOptions       // tests/txtest (its Options)
	Log      LogOptions      // orchestrator/sharedlog/logtest (its Options)
}

// CrashOptions tune the crash suite's cost for slower backends (crashtest.Options).
type CrashOptions struct {
	// Stride crashes at every Stride-th point in the systematic pass (1 = every point).
	Stride int
	// Schedules is the number of randomised multi-crash schedules.
	Schedules int
	// Transfers is the number of transfers the concurrent run submits at once (default 24).
	Transfers int
	// ConcurrentProvenance captures provenance in the concurrent run too and checks it (every
	// version made once, every version read made): affordable where the store is fast.
	ConcurrentProvenance bool
}

// LincheckOptions change the linearizability suite's defaults on a backend (6 clients for
// 2.5 s, the 250 ms lifetime and 5 ms relaunch delay of lincheck.Options); zero keeps a default.
type LincheckOptions struct {
	Clients                           int
	Duration, Lifetime, RelaunchDelay time.Duration
}

// TxOptions size the transaction suite to a backend (txtest.Options). The zero value suits local
// stores (memory, SQLite, PostgreSQL); emulators and cloud stores, whose round trips take
// milliseconds, want fewer transfers and a longer relaunch delay, so that the intent collector
// relaunches executions that crashed rather than ones that are merely slow.
type TxOptions struct {
	// Stride crashes at every Stride-th point of the clean run only (default 1: every point).
	Stride int
	// Transfers and Clients shape ConcurrentTransfersSerializable (defaults 24 and 6).
	Transfers, Clients int
	// Crashes caps the random crashes injected into ConcurrentTransfersSerializable (default 30).
	Crashes int
	// Lockers is the number of concurrent transactions in WaitDieRandomLockOrders (default 16).
	Lockers int
	// RelaunchDelay is how long an unfinished transfer waits before the intent collector
	// relaunches it (default 300 ms); CollectEvery is how often the collectors run (default
	// 10 ms).
	RelaunchDelay, CollectEvery time.Duration
	// MaxBackOff caps the wait of a transaction that lost a wait-die conflict before it
	// retries (default 64 ms); the wait starts at 1 ms and doubles.
	MaxBackOff time.Duration
	// Deadline bounds how long the concurrent parts may take to finish every transaction
	// before the suite reports a deadlock (default 60 s).
	Deadline time.Duration
}

// emulatedTx sizes the transaction suite for a backend served by an emulator: requests take
// milliseconds (moto's one at a time), so fewer transfers and lockers, a relaunch delay longer
// than a slow transfer, and a sparser stride.
func emulatedTx(stride int) TxOptions {
	return TxOptions{Stride: stride, Transfers: 10, Clients: 3, Crashes: 10, Lockers: 8,
		RelaunchDelay: 2 * time.Second, CollectEvery: 500 * time.Millisecond, MaxBackOff: time.Second, Deadline: 3 * time.Minute}
}

// LogOptions size the shared log's suite for a backend (logtest.Options).
type LogOptions struct {
	// HoleTimeout for the logs under test (default 200 ms); slow emulators need more.
	HoleTimeout time.Duration
	// Appenders, Appends, Readers and Reads size the linearizability run (defaults 4, 25, 3
	// and 40, all four when Appenders is zero).
	Appenders, Appends, Readers, Reads int
}

// emulatedLog: emulators answer in milliseconds: a longer hole timeout (a live writer must beat
// it between reserving and writing) and a smaller linearizability run.
var emulatedLog = LogOptions{HoleTimeout: time.Second, Appenders: 3, Appends: 8, Readers: 2, Reads: 12}
