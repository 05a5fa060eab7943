package txtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Azure Tables on Azurite runs the crash (every 40th point) and wait-die parts of the suite.
// ConcurrentTransfersSerializable is left out: on the portable path (no store.Transactor) it
// makes about 160,000 store calls, well over ten minutes at Azurite's request rate under the
// race detector. It needs a smaller-workload option in Run first.
func TestTransactionsAzureTables(t *testing.T) {
	suite.Run(t, "CrashAtEveryPointOfCommitAndAbort", func(t suite.T) { everyPoint(t, testtables.AzureTables, 40) })
	suite.Run(t, "WaitDieRandomLockOrders", func(t suite.T) { waitDie(t, testtables.AzureTables) })
}
