package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func options(t *testing.T) Options {
	return Options{Clients: 6, Duration: 2500 * time.Millisecond, Keys: 3, Seed: crashkit.Seed(t), MaxDelay: 300 * time.Microsecond, Crash: 0.01}
}

func TestLinearizableMemStore(t *testing.T) { Run(t, testtables.Mem, options(t)) }

func TestLinearizableSQLite(t *testing.T) { Run(t, testtables.SQLite(t), options(t)) }

func TestLinearizablePostgres(t *testing.T) { Run(t, testtables.Postgres, options(t)) }
