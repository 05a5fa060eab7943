package crashtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

// The Firestore emulator takes milliseconds per request, most for queries, whose cost grows
// with the collection: every 135th point (the first with a garbage-collection pass) and one
// random schedule keep the suite under a minute on a loaded machine.
func TestCrashInjectionFirestore(t *testing.T) {
	t.Parallel()
	Run(t, testtables.Firestore, Options{Stride: 135, Schedules: 1})
}
