package testtables

import (
	"net/url"
	"slices"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Every row is whole: a unique name, a scheme whose driver this package links in, a factory;
// on the embedded rows (no server to start) the factory opens a table of the row's scheme.
func TestBackendRows(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Backends {
		if b.Name == "" || seen[b.Name] {
			t.Errorf("row %+v: empty or repeated name", b)
		}
		seen[b.Name] = true
		if !slices.Contains(store.Schemes(), b.Scheme) {
			t.Errorf("row %s: scheme %q is not registered: blank-import its driver in this package", b.Name, b.Scheme)
		}
		if b.Tables == nil {
			t.Errorf("row %s: no Tables", b.Name)
			continue
		}
		if b.Server != "" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			tbl := b.Tables(t)(t, "row")
			if u, err := url.Parse(tbl.Name()); err != nil || u.Scheme != b.Scheme {
				t.Errorf("table %q: not of scheme %q (%v)", tbl.Name(), b.Scheme, err)
			}
		})
	}
	if len(Backends) == 0 {
		t.Error("no rows")
	}
}
