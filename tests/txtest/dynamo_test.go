package txtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

// TestTransactionsDynamo crashes commit and abort propagation on DynamoDB (moto) at every 90th
// point. The suite's two concurrent parts do not fit moto, which takes milliseconds per request
// and one request at a time: ConcurrentTransfersSerializable relaunches executions still running
// after 300 ms of real time, which every transfer on moto is, and the duplicates multiply until
// nothing finishes; WaitDieRandomLockOrders gives 16 concurrent transactions 60 s, which a loaded
// machine does not meet. Both need Run options for slow backends (see docs/stores/dynamodb.md).
func TestTransactionsDynamo(t *testing.T) {
	suite.Run(t, "CrashAtEveryPointOfCommitAndAbort", func(t suite.T) { everyPoint(t, testtables.Dynamo, 90) })
}
