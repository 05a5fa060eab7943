package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)

// Bad store URLs fail at Open with an error that names the problem.
func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "empty URL"},
		{"   ", "empty URL"},
		{"/var/lib/app.db", "has no scheme"},
		{"dynamo://orders", `unknown URL scheme "dynamo"`},
		{"mem://x/path", "takes a name, not a path"},
		{"mem://x?max_row_bytes=ten", "max_row_bytes"},
		{"mem://x?colour=blue", `unknown parameter "colour"`},
		{"sqlite://relative.db", "sqlite:///absolute/path"},
		{"sqlite:///no/such/dir/x.db", "/no/such/dir"},
		{"sqlite:///tmp/x.db?table=bad-name", "bad-name"},
		{"postgres://user:s3cret@db/x", "xxxxx"}, // the password never appears
	} {
		_, err := store.Open(context.Background(), tc.url)
		if err == nil {
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %q, want it to mention %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) leaks the password: %q", tc.url, err)
		}
	}
	if _, err := store.Open(context.Background(), "mem://open-test"); err != nil {
		t.Fatalf("a good URL failed: %v", err)
	}
}
