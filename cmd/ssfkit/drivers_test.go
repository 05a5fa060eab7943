package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// Every driver package under adapters/store and adapters/queue registers its schemes in this
// binary: a driver the CLI does not link in refuses its documented URLs in every command.
func TestEveryDriverIsLinkedIn(t *testing.T) {
	register := regexp.MustCompile(`(store|queue)\.Register\("([a-z0-9]+)"`)
	files, err := filepath.Glob("../../adapters/*/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if filepath.Ext(f) != ".go" || regexp.MustCompile(`_test\.go$`).MatchString(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range register.FindAllSubmatch(b, -1) {
			kind, scheme := string(m[1]), string(m[2])
			linked := store.Schemes()
			if kind == "queue" {
				linked = queue.Schemes()
			}
			found++
			if !slices.Contains(linked, scheme) {
				t.Errorf("%s registers the %s scheme %q, which ssfkit does not link in: import its package in drivers.go", f, kind, scheme)
			}
		}
	}
	if found < 12 {
		t.Fatalf("found only %d driver registrations", found)
	}
}
