package policies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/policycorpus"
)

// TestCorpus runs the policies on the corpus of real plans (testdata/corpus, made by the real
// providers: `make corpus`; tests/terraform replans some in every run and all in make
// test-long): each case is denied by the rule it breaks, naming the resource, and the kit's
// module in it by nothing.
func TestCorpus(t *testing.T) {
	cases, err := policycorpus.Load("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	clouds := map[string]int{}
	for _, c := range cases {
		clouds[c.Cloud]++
		t.Run(c.Cloud+"/"+c.Name, func(t *testing.T) {
			want, err := c.SourceHash()
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(c.Dir, policycorpus.HashFile)); err != nil || strings.TrimSpace(string(got)) != want {
				t.Fatalf("the plan of %s is missing or was made from other sources (%v): run make corpus", c.Dir, err)
			}
			plan, err := os.ReadFile(filepath.Join(c.Dir, policycorpus.PlanFile))
			if err != nil {
				t.Fatal(err)
			}
			v, err := Evaluate(context.Background(), plan)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range c.Expect {
				if !hasPrefix(v.Deny, d.Prefix()) {
					t.Errorf("no denial starts %q; the policies said:\n%s", d.Prefix(), strings.Join(v.Deny, "\n"))
				}
			}
			for _, d := range v.Deny {
				if strings.Contains(d, "] module.") {
					t.Errorf("the kit's module is denied: %s", d)
				}
			}
			if len(v.Warn) != 0 {
				t.Errorf("warnings: %v", v.Warn)
			}
		})
	}
	if clouds["aws"] < 15 || clouds["gcp"] < 8 {
		t.Fatalf("the corpus has %v cases per cloud", clouds)
	}
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
