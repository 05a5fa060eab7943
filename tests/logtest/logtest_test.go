// Package logtest runs the shared log's suite (orchestrator/sharedlog/logtest) on the stores of
// the matrix that a server serves (testtables.Backends: PostgreSQL and the cloud stores, each
// against its emulator); the embedded ones (the in-memory store, SQLite) run it in
// orchestrator/sharedlog.
package logtest

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func TestSharedLog(t *testing.T) {
	for _, b := range testtables.Backends {
		if b.Server == "" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			logtest.Run(t, b.Tables(t), b.Log)
		})
	}
}
