// Package temporaltest gives tests an embedded Temporal server (orchestrator/ssftemporal/devserver,
// in memory), started once per test binary on first use and stopped when its tests end. It is
// apart from internal/testservers so that test binaries without Temporal do not link the server.
package temporaltest

import (
	"log/slog"
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal/devserver"
)

// Namespace is the namespace the server creates and Client uses.
const Namespace = "default"

// Temporal is the binary's embedded server; its address is the frontend's, for client.Dial.
var Temporal = &testservers.Server{
	Name: "Temporal (embedded)",
	Start: func() (string, func(), error) {
		s, err := devserver.Start(devserver.Options{Namespace: Namespace, Logger: warnings()})
		if err != nil {
			return "", nil, err
		}
		return s.Addr(), s.Stop, nil
	},
}

// Client returns a client of the binary's server in Namespace, closed when t ends.
func Client(t suite.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  Temporal.Addr(t),
		Namespace: Namespace,
		Logger:    sdklog.NewStructuredLogger(warnings()),
	})
	if err != nil {
		t.Fatalf("dial the embedded Temporal server: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Main runs the package's tests, then stops the servers they started.
func Main(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// warnings logs Temporal's warnings and errors to stderr, which go test shows for failing
// packages; the per-task info lines would drown the test output.
func warnings() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
