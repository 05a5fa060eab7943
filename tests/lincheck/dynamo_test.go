package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Moto answers in milliseconds and one request at a time. With the default 5 ms relaunch delay,
// every execution that waits its turn grows duplicates that lengthen everyone's wait (a loaded
// machine made a 6 s run take six minutes): three clients instead of six, relaunches after
// 100 ms (still well inside an execution on moto), a 1 s lifetime bounding each duplicate, and
// 6 s that give the garbage collector rows to reclaim.
func TestLinearizableDynamo(t *testing.T) {
	o := options(t)
	o.Clients, o.Lifetime, o.Duration, o.RelaunchDelay = 3, time.Second, 6*time.Second, 100*time.Millisecond
	Run(t, testtables.Dynamo, o)
}
