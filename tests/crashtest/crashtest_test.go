package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// The suite on every store of the matrix, sized by its row (testtables.Backends). Backends served
// by another process (PostgreSQL and the emulators) run in parallel, after the in-process ones:
// most of their time is spent waiting on that process.
func TestCrashInjection(t *testing.T) {
	for _, b := range testtables.Backends {
		t.Run(b.Name, func(t *testing.T) {
			if b.Server != "" {
				t.Parallel()
			}
			Run(t, b.Tables(t), b.Crash)
		})
	}
}
