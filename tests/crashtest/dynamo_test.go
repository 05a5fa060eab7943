package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// DynamoDB on moto (milliseconds per request, one at a time): every 60th point and one
// schedule; the concurrent part is fixed.
func TestCrashInjectionDynamo(t *testing.T) {
	Run(t, testtables.Dynamo, Options{Stride: 60, Schedules: 1})
}
