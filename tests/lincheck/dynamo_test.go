package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Moto answers in milliseconds and one request at a time. The intent collector relaunches an
// instance 5 ms after its last launch, so every execution that waits its turn grows duplicates
// that lengthen everyone's wait: three clients instead of six keep that from running away, a
// 1 s lifetime bounds each duplicate, and 6 s give the garbage collector rows to reclaim.
func TestLinearizableDynamo(t *testing.T) {
	o := options(t)
	o.Clients, o.Lifetime, o.Duration = 3, time.Second, 6*time.Second
	Run(t, testtables.Dynamo, o)
}
