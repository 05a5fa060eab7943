package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// options are the suite's sizes on backend b: the defaults, with what its row changes.
func options(t *testing.T, b testtables.Backend) Options {
	o := Options{Clients: 6, Duration: 2500 * time.Millisecond, Keys: 3, Seed: crashkit.Seed(t), MaxDelay: 300 * time.Microsecond, Crash: 0.01}
	c := b.Lincheck
	if c.Clients > 0 {
		o.Clients = c.Clients
	}
	if c.Duration > 0 {
		o.Duration = c.Duration
	}
	o.Lifetime, o.RelaunchDelay = c.Lifetime, c.RelaunchDelay // zero: Run's defaults
	return o
}

// The suite on every store of the matrix (testtables.Backends), one store at a time.
func TestLinearizable(t *testing.T) {
	for _, b := range testtables.Backends {
		t.Run(b.Name, func(t *testing.T) { Run(t, b.Tables(t), options(t, b)) })
	}
}
