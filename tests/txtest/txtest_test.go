package txtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// The whole suite runs on every store of the matrix, sized by its row (testtables.Backends).
// Backends served by another process run in parallel (after the in-process ones): their tests
// spend most of their time waiting on that process, which runs on the other core.
func TestTransactions(t *testing.T) {
	for _, b := range testtables.Backends {
		t.Run(b.Name, func(t *testing.T) {
			if b.Server != "" {
				t.Parallel()
			}
			Run(t, b.Tables(t), b.Tx)
		})
	}
}
