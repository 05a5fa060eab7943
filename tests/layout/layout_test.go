// Package layout checks the import rules of docs/architecture.md on the packages `go list`
// finds: a rule broken fails the default test run, naming the rule and the import.
package layout

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/testservers"
)

const module = "github.com/ssfkit/ssfkit/"

// testKit are the packages that exist for tests: suites, emulators, harnesses.
var testKit = map[string]bool{
	"internal/testtables": true, "internal/testservers": true, "internal/suite": true,
	"internal/crashkit": true, "internal/pgtest": true, "internal/temporaltest": true,
	"internal/testclock": true, "internal/tftest": true, "internal/linearizability": true,
	"adapters/store/storetest": true, "adapters/queue/queuetest": true,
	"orchestrator/sharedlog/logtest": true,
}

// A rule says which imports of the module a package may not have.
type rule struct {
	name    string
	applies func(pkg string) bool
	denies  func(pkg, imp string) bool
}

var rules = []rule{
	{
		name:    "a driver imports only its portable package (and internal/driverurl); logqueue, a queue on the shared log, also the store and the log",
		applies: func(pkg string) bool { return isDriver(pkg) },
		denies: func(pkg, imp string) bool {
			portable := pkg[:strings.LastIndex(pkg, "/")]
			if imp == portable || imp == "internal/driverurl" {
				return false
			}
			return !(pkg == "adapters/queue/logqueue" && (imp == "adapters/store" || imp == "orchestrator/sharedlog" || imp == "orchestrator/ssf"))
		},
	},
	{
		name: "the portable store, queue and provenance APIs import nothing of the module but internal/driverurl",
		applies: func(pkg string) bool {
			return pkg == "adapters/store" || pkg == "adapters/queue" || pkg == "adapters/provenance"
		},
		denies: func(_, imp string) bool { return imp != "internal/driverurl" },
	},
	{
		name:    "adapters/host, what every host shares, imports no host: the hosts import it",
		applies: func(pkg string) bool { return pkg == "adapters/host" },
		denies:  func(_, imp string) bool { return strings.HasPrefix(imp, "adapters/host/") },
	},
	{
		name:    "the orchestrator imports no host, no command",
		applies: func(pkg string) bool { return strings.HasPrefix(pkg, "orchestrator/") },
		denies: func(_, imp string) bool {
			return strings.HasPrefix(imp, "adapters/host") || strings.HasPrefix(imp, "cmd/")
		},
	},
	{
		name: "no production package imports the test kit (the CLI excepted: its conformance and bench commands run the suites)",
		applies: func(pkg string) bool {
			return !testKit[pkg] && !strings.HasPrefix(pkg, "tests/") && pkg != "cmd/ssfkit"
		},
		denies: func(_, imp string) bool { return testKit[imp] },
	},
	{
		name:    "the coordination service (orchestrator/coord) imports only the store API (its bucket is an interface): the ZooKeeper endpoint and the CLI import it",
		applies: func(pkg string) bool { return pkg == "orchestrator/coord" },
		denies:  func(_, imp string) bool { return imp != "adapters/store" },
	},
	{
		name:    "telemetry (internal/telemetry: OpenTelemetry's SDK from the OTEL_* environment) imports nothing of the module: the runtime traces through OpenTelemetry's API alone, and commands and hosts install the SDK",
		applies: func(pkg string) bool { return pkg == "internal/telemetry" },
		denies:  func(_, imp string) bool { return true },
	},
	{
		name:    "the coordination service's buckets (internal/coordblob, gocloud.dev/blob by URL) import nothing of the module: coord takes them as its Blobs interface",
		applies: func(pkg string) bool { return pkg == "internal/coordblob" },
		denies:  func(_, imp string) bool { return true },
	},
	{
		name: "the SSF hosts (host, lambdahost, httphost) import nothing of the coordination service, and its functions' package (coordhost) no platform host: only their binaries (coordhost/lambda, coordhost/http) join the two, so an SSF's binary never links the object-store SDKs",
		applies: func(pkg string) bool {
			return pkg == "adapters/host" || pkg == "adapters/host/lambdahost" || pkg == "adapters/host/httphost" || pkg == "adapters/host/coordhost"
		},
		denies: func(pkg, imp string) bool {
			if pkg == "adapters/host/coordhost" {
				return imp == "adapters/host/lambdahost" || imp == "adapters/host/httphost"
			}
			return imp == "adapters/host/coordhost" || imp == "internal/coordblob" || imp == "orchestrator/coord"
		},
	},
	{
		name:    "provenance queries (internal/provquery) import only the SQLite sink, which opens the database: `ssfkit trace` needs no runtime",
		applies: func(pkg string) bool { return pkg == "internal/provquery" },
		denies:  func(_, imp string) bool { return imp != "adapters/provenance/sqlitesink" },
	},
	{
		name:    "examples import no internal package: they are what users write",
		applies: func(pkg string) bool { return strings.HasPrefix(pkg, "examples/") },
		denies:  func(_, imp string) bool { return strings.HasPrefix(imp, "internal/") },
	},
}

func isDriver(pkg string) bool {
	parts := strings.Split(pkg, "/")
	return len(parts) == 3 && parts[0] == "adapters" && (parts[1] == "store" || parts[1] == "queue" || parts[1] == "provenance") && !testKit[pkg]
}

// imports lists each package of the module with its direct imports (not its tests': a test may
// use whatever it needs), from the module and from outside it.
func imports(t *testing.T) (pkgs, outside map[string][]string) {
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs, outside = map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		pkgs[pkg] = nil
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				pkgs[pkg] = append(pkgs[pkg], strings.TrimPrefix(imp, module))
			} else {
				outside[pkg] = append(outside[pkg], imp)
			}
		}
	}
	return pkgs, outside
}

// benchmarkOnly are modules the project depends on only to measure itself against them: no
// package but the benchmarks' may import them (docs/architecture.md).
var benchmarkOnly = []string{"github.com/dbos-inc/"}

func TestBenchmarkOnlyDependencies(t *testing.T) {
	_, outside := imports(t)
	used := false
	for pkg, imps := range outside {
		for _, imp := range imps {
			for _, prefix := range benchmarkOnly {
				if !strings.HasPrefix(imp, prefix) {
					continue
				}
				used = true
				if pkg != "internal/bench" {
					t.Errorf("%s imports %s, which only the benchmarks (internal/bench) may: the runtime does not depend on a peer", pkg, imp)
				}
			}
		}
	}
	if !used {
		t.Error("no package imports DBOS Transact: the check reads no import (or bench peers is gone)")
	}
}

func TestImportRules(t *testing.T) {
	pkgs, _ := imports(t)
	if len(pkgs) < 40 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	checkRules(t, pkgs)
}

func checkRules(t *testing.T, pkgs map[string][]string) {
	for _, r := range rules {
		for pkg, imps := range pkgs {
			if !r.applies(pkg) {
				continue
			}
			for _, imp := range imps {
				if r.denies(pkg, imp) {
					t.Errorf("%s imports %s, which breaks the rule: %s (docs/architecture.md)", pkg, imp, r.name)
				}
			}
		}
	}
}

// Each rule bites: a package that breaks it is reported.
func TestImportRulesBite(t *testing.T) {
	for _, c := range []struct{ pkg, imp string }{
		{"adapters/store/sqlitestore", "orchestrator/ssf"},
		{"adapters/queue/sqsqueue", "adapters/store"},
		{"orchestrator/ssf", "adapters/host/httphost"},
		{"orchestrator/ssftemporal", "cmd/ssfkit"},
		{"adapters/host/lambdahost", "internal/testtables"},
		{"examples/bank", "internal/deploy"},
		{"adapters/store", "orchestrator/ssf"},
		{"adapters/host", "adapters/host/local"},
		{"orchestrator/sharedlog", "adapters/host/local"},
		{"orchestrator/coord", "orchestrator/ssf"},
		{"orchestrator/coord", "internal/coordblob"},
		{"internal/coordblob", "orchestrator/coord"},
		{"adapters/host/lambdahost", "adapters/host/coordhost"},
		{"adapters/host/httphost", "internal/coordblob"},
		{"adapters/host/coordhost", "adapters/host/httphost"},
		{"internal/telemetry", "orchestrator/ssf"},
		{"adapters/provenance/sqlitesink", "orchestrator/ssf"},
		{"adapters/provenance", "adapters/store"},
		{"internal/provquery", "orchestrator/ssf"},
	} {
		broken := 0
		for _, r := range rules {
			if r.applies(c.pkg) && r.denies(c.pkg, c.imp) {
				broken++
			}
		}
		if broken == 0 {
			t.Errorf("%s importing %s breaks no rule", c.pkg, c.imp)
		}
	}
}

// TestEveryTestSuiteRuns: `make test` lists the packages under tests/ by name (the rest it
// finds with go list), so a suite added there without its name in the Makefile would never run.
func TestEveryTestSuiteRuns(t *testing.T) {
	out, err := exec.Command("go", "list", "../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// SLOW_PACKAGES and the test target's recipe (its lines up to the next blank line).
	var target string
	inRecipe := false
	for _, line := range strings.Split(string(makefile), "\n") {
		switch {
		case strings.HasPrefix(line, "SLOW_PACKAGES ="):
			target += line + " "
		case strings.HasPrefix(line, "test:"):
			inRecipe = true
		case inRecipe && strings.TrimSpace(line) == "":
			inRecipe = false
		case inRecipe:
			target += line + " "
		}
	}
	suites := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel := "./" + strings.TrimPrefix(pkg, module)
		suites++
		if !slices.Contains(strings.Fields(target), rel) {
			t.Errorf("%s is not in the Makefile's test target (SLOW_PACKAGES or the go test line): make test never runs it", rel)
		}
	}
	if suites < 8 {
		t.Fatalf("go list found %d packages under tests/", suites)
	}
}
