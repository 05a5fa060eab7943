package sharedlog_test

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
)

// The suite on the stores of the matrix embedded in the test (testtables.Backends without a
// server: the in-memory store and SQLite); tests/logtest runs it on the others.
func TestSharedLog(t *testing.T) {
	for _, b := range testtables.Backends {
		if b.Server != "" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) { logtest.Run(t, b.Tables(t), b.Log) })
	}
}
