package txtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Bigtable runs the crash-at-every-point and wait-die parts of the suite (every 36th point: each
// request is a gRPC round trip to bttest). ConcurrentTransfersSerializable is left out: its
// wall-clock intent collector and relaunch delay are sized for local stores, and on bttest under
// the race detector it takes about six minutes (see docs/stores/bigtable.md, Tests).
func TestTransactionsBigtable(t *testing.T) {
	t.Run("CrashAtEveryPointOfCommitAndAbort", func(t *testing.T) { everyPoint(t, testtables.Bigtable, 36) })
	t.Run("WaitDieRandomLockOrders", func(t *testing.T) { waitDie(t, testtables.Bigtable) })
}
