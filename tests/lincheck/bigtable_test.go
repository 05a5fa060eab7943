package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Bigtable requests are gRPC round trips (bttest in-process): executions outlive the default
// 250 ms lifetime, so it is raised, and the clients run longer so that the garbage collector
// finds rows past the longer bound T.
func TestLinearizableBigtable(t *testing.T) {
	o := options(t)
	o.Lifetime = 500 * time.Millisecond
	o.Duration = 5 * time.Second
	Run(t, testtables.Bigtable, o)
}
