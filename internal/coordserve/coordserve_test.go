package coordserve

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func start(t *testing.T, storeURL, blobsURL string) (*Server, string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(context.Background(), storeURL, blobsURL, ln, coord.Config{}, t.Logf)
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return srv, ln.Addr().String(), nil
}

func connect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.After(10 * time.Second); ; {
		select {
		case ev := <-events:
			if ev.State != zk.StateHasSession {
				continue
			}
		case <-deadline:
			t.Fatal("no session")
		}
		break
	}
	return c
}

// A znode too large for a row is an object in the --blobs bucket (here a directory); a restarted
// server reads it back from there, and one without the bucket refuses the log.
func TestLargeNodeInBucket(t *testing.T) {
	storeURL := "sqlite://" + filepath.Join(t.TempDir(), "zk.db") + "?table=zookeeper"
	dir := t.TempDir()
	blobsURL := "file://" + filepath.ToSlash(dir)
	big := bytes.Repeat([]byte("ssfkit-"), 100_000) // 700 KB: over a row's 400 KB
	srv, addr, err := start(t, storeURL, blobsURL)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, addr)
	if _, err := c.Create("/big", big, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Close()
	var objects []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".attrs") {
			objects = append(objects, p)
		}
		return nil
	})
	if len(objects) != 1 {
		t.Fatalf("objects in the bucket: %v, want one", objects)
	}

	srv, addr, err = start(t, storeURL, blobsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c = connect(t, addr)
	defer c.Close()
	if data, _, err := c.Get("/big"); err != nil || !bytes.Equal(data, big) {
		t.Fatalf("read back %d bytes (%v), want %d", len(data), err, len(big))
	}
	if _, _, err := start(t, storeURL, ""); err == nil || !strings.Contains(err.Error(), "no bucket") {
		t.Fatalf("a server without --blobs on the log: %v", err)
	}
}

// A bucket URL that cannot work fails Start, before serving, saying why.
func TestBadBucketURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"not a url", "want s3://BUCKET"},
		{"nosuch://bucket", `no driver registered for "nosuch"`},
		{"file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "absent")), "absent"},
		{"azblob://container", "AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY"},
		// Nothing listens on port 1; then no credentials anywhere.
		{"s3://b?region=us-east-1&use_path_style=true&endpoint=http://127.0.0.1:1", "does not answer"},
		{"s3://b?region=us-east-1&use_path_style=true&endpoint=http://127.0.0.1:1&creds=none", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Setenv("AZURE_STORAGE_ACCOUNT", "")
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
			dir := t.TempDir()
			for k, v := range map[string]string{
				"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
				"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
				"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
			} {
				t.Setenv(k, v)
			}
			if strings.HasSuffix(tc.url, "&creds=none") {
				tc.url = strings.TrimSuffix(tc.url, "&creds=none")
				t.Setenv("AWS_ACCESS_KEY_ID", "")
				t.Setenv("AWS_SECRET_ACCESS_KEY", "")
			}
			srv, _, err := start(t, "mem://", tc.url)
			if err == nil {
				srv.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}
