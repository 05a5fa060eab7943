package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// DynamoDB on moto takes milliseconds per request, one request at a time, and the suite's
// concurrent part alone makes thousands: every 240th point (one of them followed by garbage
// collection) and one random schedule keep the whole to about two minutes.
func TestCrashInjectionDynamo(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Dynamo, Options{Stride: 240, Schedules: 1})
}
