package zkcompat

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/internal/testservers"
)

var roots atomic.Int64

// newRoot names a fresh subtree for one run of a scenario on a shared server.
func newRoot() string { return fmt.Sprintf("/run-%d", roots.Add(1)) }

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// The harness is deterministic: every scenario, run twice against the real ZooKeeper server,
// gives the same transcript, so a difference against ssfkit's endpoint is the endpoint's.
func TestHarnessIsDeterministicOnZooKeeper(t *testing.T) {
	addr := testservers.ZooKeeper.Addr(t)
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rootA, rootB := newRoot(), newRoot()
			first, err := Run(addr, name, rootA)
			if err != nil {
				t.Fatal(err)
			}
			second, err := Run(addr, name, rootB)
			if err != nil {
				t.Fatal(err)
			}
			a := strings.ReplaceAll(strings.Join(first, "\n"), rootA, "ROOT")
			b := strings.ReplaceAll(strings.Join(second, "\n"), rootB, "ROOT")
			if a != b {
				t.Fatalf("two runs differ:\n%s\n---\n%s", a, b)
			}
			if slices.ContainsFunc(first, func(l string) bool { return strings.Contains(l, "unknown") && !strings.Contains(l, "unknown error") }) {
				t.Errorf("a session the harness does not know owns a node:\n%s", a)
			}
			t.Log("\n" + a)
		})
	}
}

// runKazoo runs kazoo's recipes (testdata/kazoo_recipes.py) against server under a fresh root.
func runKazoo(t *testing.T, server string) {
	py, err := testservers.KazooPython()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "testdata/kazoo_recipes.py", server, newRoot()).CombinedOutput()
	t.Logf("kazoo against %s:\n%s", server, out)
	if err != nil {
		t.Fatalf("kazoo's recipes failed: %v", err)
	}
}

// The recipes' script holds on the real server, so a failure against ssfkit is ssfkit's.
func TestKazooRecipesOnZooKeeper(t *testing.T) {
	runKazoo(t, testservers.ZooKeeper.Addr(t))
}
