package testservers

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ZooKeeperVersion is the Apache ZooKeeper release the coordination service is held to; `make
// tools` puts its jars and their dependencies from Maven Central into .ssfkit/tools/zookeeper.
const ZooKeeperVersion = "3.9.5"

const zooKeeperInstall = "run `make tools` (it fetches org.apache.zookeeper:zookeeper:" + ZooKeeperVersion +
	" and its dependencies from Maven Central with mvn; Java 11 or later runs it)"

// ZooKeeper is a real Apache ZooKeeper server, standalone, on 127.0.0.1 with its data in a
// temporary directory and its admin server off; Addr returns its client HOST:PORT. Sessions
// may time out after 400 ms (tickTime 200 ms), so expiry tests stay short.
var ZooKeeper = &Server{Name: "Apache ZooKeeper " + ZooKeeperVersion, Start: func() (string, func(), error) {
	// The quick compiler and the serial collector: the tests share two cores with the JVM.
	return startZooKeeper("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
}}

// ZooKeeperBench is the same server with the JVM's default compilers and collector, as
// ZooKeeper runs in production: what `ssfkit bench coord` measures against.
var ZooKeeperBench = &Server{Name: "Apache ZooKeeper " + ZooKeeperVersion, Start: func() (string, func(), error) {
	return startZooKeeper()
}}

// ZooKeeperClasspath is the Java class path of the ZooKeeper jars: the server, and the client
// zkCli.sh runs (org.apache.zookeeper.ZooKeeperMain).
func ZooKeeperClasspath() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	lib := filepath.Join(root, ".ssfkit", "tools", "zookeeper", "lib")
	if _, err := os.Stat(filepath.Join(lib, "zookeeper-"+ZooKeeperVersion+".jar")); err != nil {
		return "", fmt.Errorf("Apache ZooKeeper %s not found in %s: %s", ZooKeeperVersion, lib, zooKeeperInstall)
	}
	return filepath.Join(lib, "*"), nil
}

// Java returns the java launcher, or an error saying what needs it.
func Java() (string, error) {
	return Tool("java", "install a JDK 11 or later (Debian: apt-get install default-jre-headless)")
}

func startZooKeeper(jvmFlags ...string) (string, func(), error) {
	cp, err := ZooKeeperClasspath()
	if err != nil {
		return "", nil, err
	}
	java, err := Java()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "ssfkit-zookeeper-")
	if err != nil {
		return "", nil, err
	}
	addr, stop, err := startOnFreePorts(1, func(ports []int) (string, func(), error) {
		cfg := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(
			"tickTime=200\nminSessionTimeout=400\nmaxSessionTimeout=60000\ndataDir=%s\nclientPortAddress=127.0.0.1\nclientPort=%d\nadmin.enableServer=false\n",
			filepath.Join(dir, "data"), ports[0])), 0o644); err != nil {
			return "", nil, err
		}
		p, err := StartProcess(java, append(jvmFlags,
			"-Dzookeeper.admin.enableServer=false", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			// TTL nodes (off by default), and containers checked as often as ssfkit's tests check.
			"-Dzookeeper.extendedTypesEnabled=true", "-Dznode.container.checkIntervalMs=200",
			"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg))
		if err != nil {
			return "", nil, err
		}
		addr := HostPort(ports[0])
		if err := p.WaitReady(60*time.Second, zooKeeperServing(addr)); err != nil {
			return "", nil, err
		}
		return addr, p.Stop, nil
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return addr, func() { stop(); os.RemoveAll(dir) }, nil
}

// zooKeeperServing succeeds once the server answers the "srvr" command as a serving standalone
// server: it accepts connections before it serves, and closes sessions opened until then.
func zooKeeperServing(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if deadline, ok := ctx.Deadline(); ok {
			c.SetDeadline(deadline)
		}
		if _, err := c.Write([]byte("srvr")); err != nil {
			return err
		}
		out, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if !strings.Contains(string(out), "Mode: standalone") {
			return fmt.Errorf("not serving yet: %q", strings.TrimSpace(string(out)))
		}
		return nil
	}
}

// KazooPython is the Python interpreter that has kazoo, the Python ZooKeeper client whose
// recipes the coordination service is tested with (`make tools` installs it).
func KazooPython() (string, error) { return toolPython("kazoo", "kazoo==2.10.0") }

// DuckDBPython is the Python interpreter that has DuckDB, which tests use as a real reader of
// the Parquet objects the provenance sink writes (`make tools` installs it).
func DuckDBPython() (string, error) { return toolPython("duckdb", "duckdb==2.0.0") }

// toolPython is the interpreter of the venv `make tools` makes in .ssfkit/tools/VENV for pkg.
func toolPython(venv, pkg string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	py := filepath.Join(root, ".ssfkit", "tools", venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		return "", fmt.Errorf("%s's Python not found at %s: run `make tools` (pip install %s into a venv)", venv, py, pkg)
	}
	return py, nil
}

// Chromium is Debian's Chromium, the headless browser the console's tests drive (`make tools`
// installs it).
func Chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium on PATH: run `make tools` (apt-get install chromium)")
}
