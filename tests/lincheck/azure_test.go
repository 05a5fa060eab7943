package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// Azurite round trips take milliseconds: executions get a longer lifetime (and the GC a longer
// bound), and the clients a longer run, so that the GC still deletes rows.
func TestLinearizableAzureTables(t *testing.T) {
	o := options(t)
	o.Lifetime, o.Duration = time.Second, 8*time.Second
	Run(t, testtables.AzureTables, o)
}
