package build

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const hello = "./testdata/hello"

func isELF(b []byte) bool { return bytes.HasPrefix(b, []byte("\x7fELF")) }

func TestAzureFunctionsZip(t *testing.T) {
	out := filepath.Join(t.TempDir(), "app.zip")
	var progress bytes.Buffer
	if err := AzureFunctions(context.Background(), ".", hello, out, &progress); err != nil {
		t.Fatal(err)
	}
	z, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string][]byte{}
	for _, f := range z.File {
		r, _ := f.Open()
		files[f.Name], _ = io.ReadAll(r)
		r.Close()
		if f.Name == "handler" && f.Mode().Perm() != 0o755 {
			t.Errorf("handler mode %v, want executable", f.Mode())
		}
	}
	if !isELF(files["handler"]) {
		t.Fatal("handler is not a Linux executable")
	}
	var host struct {
		CustomHandler struct {
			Description                 struct{ DefaultExecutablePath string }
			EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
		}
	}
	if err := json.Unmarshal(files["host.json"], &host); err != nil || host.CustomHandler.Description.DefaultExecutablePath != "handler" || !host.CustomHandler.EnableForwardingHTTPRequest {
		t.Fatalf("host.json: %s %v", files["host.json"], err)
	}
	// Each function's trigger, as httphost expects it.
	want := map[string]string{"ssf": "httpTrigger/ssf", "spawn": "httpTrigger/spawn", "queue": "queueTrigger/message",
		"intent-collector": "timerTrigger/%SSFKIT_INTENT_COLLECTOR_SCHEDULE%", "garbage-collector": "timerTrigger/%SSFKIT_GARBAGE_COLLECTOR_SCHEDULE%"}
	for fn, trigger := range want {
		var f struct {
			Bindings []struct{ Type, Name, Route, Schedule, AuthLevel string }
		}
		if err := json.Unmarshal(files[fn+"/function.json"], &f); err != nil || len(f.Bindings) == 0 {
			t.Fatalf("%s/function.json: %s %v", fn, files[fn+"/function.json"], err)
		}
		b := f.Bindings[0]
		got := b.Type + "/" + b.Name
		switch b.Type {
		case "httpTrigger":
			got = b.Type + "/" + b.Route
			if b.AuthLevel != "function" {
				t.Errorf("%s: authLevel %q: HTTP functions must require a key", fn, b.AuthLevel)
			}
		case "timerTrigger":
			got = b.Type + "/" + b.Schedule
		}
		if got != trigger {
			t.Errorf("%s: trigger %s, want %s", fn, got, trigger)
		}
	}
	if !strings.Contains(progress.String(), "wrote "+out) {
		t.Errorf("progress: %q", progress.String())
	}
}

// The image is pushed to a registry on 127.0.0.1 and pulled back: one layer with the
// executable at the entrypoint, not run as root, the same digest as the tarball written.
func TestCloudRunImage(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/ssfkit/hello:test"
	out := filepath.Join(t.TempDir(), "hello.tar")
	digestRef, err := CloudRunImage(context.Background(), ".", hello, ref, out, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(digestRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil || cfg.OS != "linux" || cfg.Architecture != "amd64" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.User == "" || cfg.Config.User == "0" {
		t.Fatalf("config %+v %v", cfg, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || "/"+h.Name != cfg.Config.Entrypoint[0] || h.Mode&0o111 == 0 {
		t.Fatalf("layer entry %+v %v, want the executable %s", h, err, cfg.Config.Entrypoint[0])
	}
	if b, _ := io.ReadAll(tr); !isELF(b) {
		t.Fatal("the entrypoint is not a Linux executable")
	}
	fromTar, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if td, _ := fromTar.Digest(); td.String() != d.DigestStr() {
		t.Fatalf("the tarball's image %s differs from the pushed %s", td, d.DigestStr())
	}
}

func TestCloudRunImageRefusals(t *testing.T) {
	for _, c := range []struct{ ref, out, want string }{
		{"Not A Ref", "x.tar", "image reference"},
		{"example.com/app:v1", "", "nowhere to put the image"},
	} {
		if _, err := CloudRunImage(context.Background(), ".", hello, c.ref, c.out, false, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.ref, err, c.want)
		}
	}
	if _, err := os.Stat("x.tar"); err == nil {
		t.Error("a refused build wrote x.tar")
	}
}

// The coordination function app binds the writer's queue and the heartbeat's timer to the routes
// adapters/host/coordhost/http serves, with settings the coordination module sets.
func TestAzureCoordinationFunctions(t *testing.T) {
	b, _ := json.Marshal(azureCoordinationFunctions)
	for _, want := range []string{`"queue":{"bindings":[{"connection":"SSFKIT_QUEUE_CONNECTION"`, `"queueName":"%SSFKIT_QUEUE_NAME%"`,
		`"heartbeat":{"bindings":[{"direction":"in","name":"timer","runOnStartup":false,"schedule":"%SSFKIT_HEARTBEAT_SCHEDULE%"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the coordination app's functions %s lack %s", b, want)
		}
	}
	if len(azureCoordinationFunctions) != 2 {
		t.Errorf("%d functions, want the queue and the heartbeat", len(azureCoordinationFunctions))
	}
}
