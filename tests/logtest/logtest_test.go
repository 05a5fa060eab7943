// Package logtest runs the shared log's suite (orchestrator/sharedlog/logtest) on the cloud
// stores, each against its emulator, and on PostgreSQL; the in-memory store and SQLite run it in
// orchestrator/sharedlog.
package logtest

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// Emulators answer in milliseconds: a longer hole timeout (a live writer must beat it between
// reserving and writing) and a smaller linearizability run.
var emulated = logtest.Options{HoleTimeout: time.Second, Appenders: 3, Appends: 8, Readers: 2, Reads: 12}

func TestPostgres(t *testing.T) { t.Parallel(); logtest.Run(t, testtables.Postgres, logtest.Options{}) }

func TestDynamo(t *testing.T) { t.Parallel(); logtest.Run(t, testtables.Dynamo, emulated) }

func TestAzureTables(t *testing.T) { t.Parallel(); logtest.Run(t, testtables.AzureTables, emulated) }

func TestBigtable(t *testing.T) { t.Parallel(); logtest.Run(t, testtables.Bigtable, logtest.Options{}) }

func TestFirestore(t *testing.T) { t.Parallel(); logtest.Run(t, testtables.Firestore, emulated) }
