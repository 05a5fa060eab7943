package testservers

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}

// Each emulator starts on 127.0.0.1 and answers HTTP.
func TestEmulatorsStart(t *testing.T) {
	az := AzuriteAddrs(t)
	for name, url := range map[string]string{"moto": Moto.Addr(t) + "/moto-api/", "azurite table": az.Table, "azurite queue": az.Queue} {
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Errorf("%s at %s, want 127.0.0.1", name, url)
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
	}
}

// A missing tool is an error that says how to install it.
func TestMissingToolSaysHowToInstall(t *testing.T) {
	_, err := Tool("ssfkit-no-such-tool", "run `make tools`")
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("got %v", err)
	}
}
