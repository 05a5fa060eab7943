package main

import (
	"github.com/ssfkit/ssfkit/internal/testservers"

	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// asCLI makes this test binary act as the ssfkit command when the demo starts it as a worker
// process (os.Executable is the test binary).
const asCLI = "SSFKIT_TEST_BINARY_IS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		main()
	}
	code := m.Run()
	testservers.StopAll() // the emulators the docs' commands ran against
	os.Exit(code)
}

// The Temporal demo SIGKILLs its worker process in the middle of activities and checks the
// travel invariants; it fails if an invariant fails or no kill landed mid-activity.
func TestTemporalDemoSurvivesWorkerKills(t *testing.T) {
	t.Setenv(asCLI, "1")
	var out bytes.Buffer
	err := run(context.Background(), []string{"demo", "temporal", "--reservations", "40", "--kills", "3", "--kill-every", "800ms"}, &out, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Every invariant holds after 3 SIGKILLs") {
		t.Fatal("the demo did not report its invariants")
	}
}
