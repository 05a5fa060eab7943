package sharedlog_test

import (
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
)

// The suite on the in-memory store and SQLite; tests/logtest runs it on the cloud stores.
func TestMem(t *testing.T) { logtest.Run(t, testtables.Mem, logtest.Options{}) }

func TestSQLite(t *testing.T) { logtest.Run(t, testtables.SQLite(t), logtest.Options{}) }
