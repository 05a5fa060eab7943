// Package linearizability checks recorded histories with porcupine for the test suites, and
// leaves a visualization of a history that fails.
package linearizability

import (
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/internal/suite"
)

// Check fails t unless history is linearizable under model; on a failure it writes porcupine's
// visualization of the history to the test's temporary directory and names it.
func Check(t suite.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizable: %d operations", len(history))
	case porcupine.Unknown:
		t.Fatalf("porcupine timed out on %d operations", len(history))
	default:
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(model, info, path)
		t.Fatalf("history of %d operations is NOT linearizable; visualization: %s", len(history), path)
	}
}
