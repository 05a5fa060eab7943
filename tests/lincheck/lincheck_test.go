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

// On PostgreSQL the runtime writes through store transactions, which hold row locks across the
// injected delays: fewer instances finish per second, so the clients run longer to give the
// garbage collector full rows to reclaim.
func TestLinearizablePostgres(t *testing.T) {
	o := options(t)
	o.Duration = 4 * time.Second
	Run(t, testtables.Postgres, o)
}
