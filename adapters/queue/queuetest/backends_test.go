package queuetest

import (
	"net/url"
	"slices"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

// Every row is whole: a unique name, a scheme whose driver this package links in, a URL
// function; on the rows without a server to start, the URL has the row's scheme and opens.
func TestBackendRows(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Backends {
		if b.Name == "" || seen[b.Name] {
			t.Errorf("row %+v: empty or repeated name", b)
		}
		seen[b.Name] = true
		if !slices.Contains(queue.Schemes(), b.Scheme) {
			t.Errorf("row %s: scheme %q is not registered: blank-import its driver in backends.go", b.Name, b.Scheme)
		}
		if b.URL == nil {
			t.Errorf("row %s: no URL", b.Name)
			continue
		}
		if b.Server != "" {
			continue
		}
		raw := b.URL(t)
		if u, err := url.Parse(raw); err != nil || u.Scheme != b.Scheme {
			t.Errorf("row %s: URL %q does not have the scheme %q (%v)", b.Name, raw, b.Scheme, err)
		}
		q, err := queue.Open(t.Context(), raw)
		if err != nil {
			t.Errorf("row %s: %v", b.Name, err)
			continue
		}
		q.Close()
	}
}
