package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// Backends served by another process (PostgreSQL and the emulators) run their tests in parallel,
// after the in-process ones: most of their time is spent waiting on that process.

func TestCrashInjectionMemStore(t *testing.T) {
	Run(t, testtables.Mem, Options{Stride: 1, Schedules: 20})
}

// Every point on mem://; every fifth or sixth on the slower stores keeps the default run short.

func TestCrashInjectionSQLite(t *testing.T) {
	Run(t, testtables.SQLite(t), Options{Stride: 5, Schedules: 10})
}

func TestCrashInjectionPostgres(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Postgres, Options{Stride: 6, Schedules: 5})
}
