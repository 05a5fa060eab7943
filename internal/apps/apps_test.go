package apps

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/deploy"
)

// Every app is complete: SSFs with its entry among them, a demo, and a main package per cloud
// host that `ssfkit build --app` can compile.
func TestEveryAppIsComplete(t *testing.T) {
	if len(All) == 0 || All[0].Name != Default {
		t.Fatalf("the default app %q must come first in All", Default)
	}
	var mains []string
	for _, a := range All {
		if got, ok := Lookup(a.Name); !ok || got.Name != a.Name {
			t.Errorf("Lookup(%q) does not find it", a.Name)
		}
		h := a.Handlers()
		if _, ok := h[a.Entry]; !ok {
			t.Errorf("%s: entry %q is not among its SSFs", a.Name, a.Entry)
		}
		if a.Title == "" || a.Try == nil || a.demo == nil {
			t.Errorf("%s: title, example requests and demo are required", a.Name)
		}
		for _, cloud := range deploy.Clouds {
			dir, _ := deploy.HostDir(cloud)
			mains = append(mains, a.MainPackage(dir))
		}
	}
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{.Name}}"}, mains...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list of the apps' main packages: %v\n%s", err, out)
	}
	for _, m := range mains {
		if !slices.Contains(strings.Split(strings.TrimSpace(string(out)), "\n"), m+" main") {
			t.Errorf("%s is not a main package:\n%s", m, out)
		}
	}
	if _, ok := Lookup(TemporalDemoName); ok {
		t.Errorf("an app is named %q, the Temporal demo's name", TemporalDemoName)
	}
}
