package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

// drivers.go itself links in every driver package, and with it every backend of the test
// matrices (internal/testtables and adapters/queue/queuetest): the test kit this binary also
// links (for conformance and bench) imports every driver, so the schemes registered here alone
// cannot tell whether drivers.go is whole.
func TestEveryBackendIsLinkedIn(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "drivers.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		imported[strings.TrimPrefix(path, "github.com/ssfkit/ssfkit/")] = true
	}
	register := regexp.MustCompile(`(store|queue|provenance)\.Register\("([a-z0-9]+)"`)
	files, err := filepath.Glob("../../adapters/*/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string][]string{} // kind -> schemes registered by the packages drivers.go imports
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(filepath.ToSlash(filepath.Dir(f)), "../../")
		for _, m := range register.FindAllSubmatch(b, -1) {
			if !imported[pkg] {
				t.Errorf("%s registers the %s scheme %q, but drivers.go does not import %s", f, m[1], m[2], pkg)
				continue
			}
			linked[string(m[1])] = append(linked[string(m[1])], string(m[2]))
		}
	}
	for _, b := range testtables.Backends {
		if !slices.Contains(linked["store"], b.Scheme) {
			t.Errorf("store backend %s (internal/testtables): no package drivers.go imports registers its scheme %q", b.Name, b.Scheme)
		}
	}
	for _, b := range queuetest.Backends {
		if !slices.Contains(linked["queue"], b.Scheme) {
			t.Errorf("queue backend %s (adapters/queue/queuetest): no package drivers.go imports registers its scheme %q", b.Name, b.Scheme)
		}
	}
}

// `ssfkit bench backends` has an entry for every store of the test matrix, by the same name
// (mem excepted: `bench ops` measures it in process, with nothing to start).
func TestBenchHasEveryStoreBackend(t *testing.T) {
	bench := backendNames(localBackends(t.TempDir()))
	for _, b := range testtables.Backends {
		if b.Name != "mem" && !slices.Contains(bench, b.Name) {
			t.Errorf("store backend %s (internal/testtables) has no entry in localBackends (cmd/ssfkit/backends.go): %v", b.Name, bench)
		}
	}
}
