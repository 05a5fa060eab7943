package lincheck

import (
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// The Firestore emulator answers in milliseconds, and a query's cost grows with the table: a
// one-second lifetime keeps executions from being fenced off while they wait. The garbage
// collector deletes a row only after two two-second bounds (an instance becomes recyclable, its
// row dangles) and several passes that each scan every DAAL; a twenty-second run leaves it time
// to delete some even on a loaded machine (fifteen seconds deleted as few as 5 rows).
func TestLinearizableFirestore(t *testing.T) {
	o := options(t)
	o.Lifetime, o.Duration = time.Second, 20*time.Second
	Run(t, testtables.Firestore, o)
}
