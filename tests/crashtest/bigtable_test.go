package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// On Bigtable (bttest in-process, every request a gRPC round trip costing about a millisecond
// of CPU under the race detector) every sixteenth point and two schedules keep the suite near
// half a minute; the crashed, collected and re-executed runs are the same kinds as on every store.
func TestCrashInjectionBigtable(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Bigtable, Options{Stride: 16, Schedules: 2})
}
