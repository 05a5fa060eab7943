package testservers

import (
	"net/http"
	"os"
	"os/exec"
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
	for name, url := range map[string]string{"moto": Moto.Addr(t) + "/moto-api/", "azurite table": az.Table, "azurite queue": az.Queue, "azurite blob": az.Blob} {
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

// The real ZooKeeper server starts on 127.0.0.1, and its own command-line client (zkCli.sh's
// class) writes and reads a node on it.
func TestZooKeeperAndZkCli(t *testing.T) {
	addr := ZooKeeper.Addr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("ZooKeeper at %s, want 127.0.0.1", addr)
	}
	cp, err := ZooKeeperClasspath()
	if err != nil {
		t.Fatal(err)
	}
	java, err := Java()
	if err != nil {
		t.Fatal(err)
	}
	zkCli := func(args ...string) string {
		out, err := exec.Command(java, append([]string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
			"org.apache.zookeeper.ZooKeeperMain", "-server", addr}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("zkCli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := zkCli("create", "/ssfkit", "hello"); !strings.Contains(out, "Created /ssfkit") {
		t.Fatalf("create: %s", out)
	}
	if out := zkCli("get", "-s", "/ssfkit"); !strings.Contains(out, "hello") || !strings.Contains(out, "dataLength = 5") {
		t.Fatalf("get: %s", out)
	}
}
