package suite

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

// A standalone run reports every subtest, runs cleanups last-first after the context is
// canceled, and turns Fatal and panics into failures of that subtest alone.
func TestStandalone(t *testing.T) {
	var results []Result
	var order []string
	passed := RunStandalone(context.Background(), "top", func(st T) {
		Run(st, "pass", func(st T) {
			dir := st.TempDir()
			st.Cleanup(func() { order = append(order, "first") })
			st.Cleanup(func() {
				order = append(order, "second")
				if st.Context().Err() == nil {
					order = append(order, "context still live")
				}
				if _, err := os.Stat(dir); err != nil {
					order = append(order, "temp dir gone too early")
				}
			})
			st.Logf("hello %d", 1)
		})
		Run(st, "fatal", func(st T) {
			st.Fatalf("stop %s", "here")
			order = append(order, "after fatal")
		})
		Run(st, "panic", func(st T) { panic("boom") })
		Run(st, "error", func(st T) {
			st.Error("soft")
			order = append(order, "after error")
		})
	}, func(r Result) { results = append(results, r) })
	if passed {
		t.Fatal("a run with failing subtests passed")
	}
	want := []string{"second", "first", "after error"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	got := map[string]Result{}
	for _, r := range results {
		got[r.Name] = r
	}
	for name, ok := range map[string]bool{"top/pass": true, "top/fatal": false, "top/panic": false, "top/error": false, "top": false} {
		r, found := got[name]
		if !found || r.Passed != ok {
			t.Errorf("%s: %+v, want passed=%v", name, r, ok)
		}
	}
	if !strings.Contains(got["top/pass"].Log, "hello 1") || !strings.Contains(got["top/fatal"].Log, "stop here") || !strings.Contains(got["top/panic"].Log, "panic: boom") {
		t.Errorf("logs not kept: %+v", results)
	}
	if results[len(results)-1].Name != "top" {
		t.Errorf("the parent reported before its subtests: %+v", results)
	}
}

// Under go test, Run is t.Run.
func TestRunUnderGoTest(t *testing.T) {
	ran := false
	if !Run(t, "sub", func(st T) { ran = st.Name() == "TestRunUnderGoTest/sub" }) || !ran {
		t.Fatal("subtest did not run as a testing subtest")
	}
}
