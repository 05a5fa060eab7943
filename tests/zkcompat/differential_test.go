package zkcompat

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// startEndpoint serves ssfkit's coordination service on storeURL at a fresh 127.0.0.1 port,
// with ZooKeeper's session bounds and container check as testservers.ZooKeeper configures them.
func startEndpoint(t *testing.T, storeURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := coordserve.Start(context.Background(), storeURL, "", ln,
		coord.Config{MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute, ContainerCheck: 200 * time.Millisecond}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// startServerless serves the serverless path on storeURL: `ssfkit coord proxy` at a fresh
// 127.0.0.1 port, its writes decided by `ssfkit coord writer` (two of them, as the cloud runs
// several writer functions at once) woken through a queue.
func startServerless(t *testing.T, storeURL string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	queueURL := "mem://zkcompat-requests-" + newRoot()[1:]
	done := make(chan error, 2)
	for range 2 {
		go func() {
			done <- coordserve.RunWriter(ctx, coordserve.WriterOptions{Store: storeURL, Queue: queueURL, DeadLetterQueue: queueURL + "-dead",
				HeartbeatEvery: 100 * time.Millisecond, Concurrency: 4})
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := coordserve.StartProxy(ctx, storeURL, queueURL, "", ln,
		coord.Config{MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: time.Minute}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("a writer: %v", err)
			}
		}
	})
	return ln.Addr().String()
}

// Every scenario gives the same transcript on ssfkit's endpoint, on each embedded store and
// through the serverless path, as on the real Apache ZooKeeper server.
func TestDifferentialAgainstZooKeeper(t *testing.T) {
	reference := testservers.ZooKeeper.Addr(t)
	endpoints := map[string]string{
		"mem":               startEndpoint(t, "mem://zkcompat"),
		"sqlite":            startEndpoint(t, fmt.Sprintf("sqlite://%s/coord.db?table=zookeeper", t.TempDir())),
		"serverless-sqlite": startServerless(t, fmt.Sprintf("sqlite://%s/serverless.db?table=zookeeper", t.TempDir())),
	}
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := newRoot()
			want, err := Run(reference, name, root)
			if err != nil {
				t.Fatalf("on ZooKeeper: %v", err)
			}
			for store, addr := range endpoints {
				got, err := Run(addr, name, root)
				if err != nil {
					t.Errorf("on ssfkit (%s): %v", store, err)
					continue
				}
				if diff := firstDifference(want, got); diff != "" {
					t.Errorf("ssfkit (%s) differs from ZooKeeper %s\nZooKeeper:\n%s\nssfkit:\n%s", store, diff,
						strings.Join(want, "\n"), strings.Join(got, "\n"))
				}
			}
		})
	}
}

// firstDifference describes the first line where the transcripts differ, or "" if they agree.
func firstDifference(want, got []string) string {
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			return fmt.Sprintf("at line %d:\n  ZooKeeper: %s\n  ssfkit:    %s", i+1, w, g)
		}
	}
	return ""
}

// kazoo's recipes work unchanged on ssfkit's endpoint, a server's and the serverless path's.
func TestKazooRecipesOnSsfkit(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		runKazoo(t, startEndpoint(t, fmt.Sprintf("sqlite://%s/coord.db?table=zookeeper", t.TempDir())))
	})
	t.Run("serverless", func(t *testing.T) {
		runKazoo(t, startServerless(t, fmt.Sprintf("sqlite://%s/coord.db?table=zookeeper", t.TempDir())))
	})
}

// javaClient is a command running main (a class, or a source file java compiles) with
// ZooKeeper's client jars, quietly and quick to start.
func javaClient(t *testing.T, main string, args ...string) *exec.Cmd {
	t.Helper()
	cp, err := testservers.ZooKeeperClasspath()
	if err != nil {
		t.Fatal(err)
	}
	java, err := testservers.Java()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(java, append([]string{"-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, main}, args...)...)
}

// zkCliScript is a session of ZooKeeper's own command-line client, typed on its standard input.
const zkCliScript = `create /zkcli hello
create -s /zkcli/s- x
create -e /zkcli/e y
ls /zkcli
get /zkcli
set /zkcli world
get -s /zkcli
delete /zkcli/s-0000000000
stat /zkcli
set -v 0 /zkcli nope
delete /zkcli
create /zkcli/e/kid z
ls -s /zkcli
quit
`

// zkCli runs zkCliScript against server and returns what it printed, without what differs
// between servers by design (zxids, times, the address). zkCli's event thread prints a watcher
// notification ("WATCHER::", the event, blank lines) whenever the event arrives, between any
// two commands' output: the events are listed at the end instead of kept in place. The session's
// Closed event is left out: quit ends the JVM as the session closes, and whether the event
// thread printed the event first is a race (ZooKeeper's own server loses it too, now and then).
func zkCli(t *testing.T, server string) string {
	t.Helper()
	cmd := javaClient(t, "org.apache.zookeeper.ZooKeeperMain", "-server", server)
	cmd.Stdin = strings.NewReader(zkCliScript)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zkCli against %s: %v\n%s", server, err, out)
	}
	var kept, events []string
	for _, l := range strings.Split(string(out), "\n") {
		if m := zkCliEvent.FindStringSubmatch(l); m != nil {
			if !strings.HasPrefix(m[1], "state:Closed ") {
				events = append(events, m[1])
			}
			continue
		}
		switch {
		case l == "" || l == "WATCHER::" || zkCliVaries.MatchString(l):
		default:
			kept = append(kept, l)
		}
	}
	return strings.Join(append(kept, fmt.Sprintf("(watcher notifications: %s)", strings.Join(events, "; "))), "\n")
}

var (
	zkCliVaries = regexp.MustCompile(`^(cZxid|mZxid|pZxid|ctime|mtime) = |^Connecting to `)
	// zkCliEvent is a notification's event without its zxid, e.g. "state:SyncConnected type:None path:null".
	zkCliEvent = regexp.MustCompile(`^WatchedEvent (.*?) zxid: `)
)

// ZooKeeper's Java client, as zkCli.sh runs it, prints the same on ssfkit's endpoint as on the
// real server.
func TestZkCliOnSsfkit(t *testing.T) {
	want := zkCli(t, testservers.ZooKeeper.Addr(t))
	if !strings.Contains(want, "Created /zkcli/s-0000000000") || !strings.Contains(want, "Node not empty: /zkcli") {
		t.Fatalf("the script did not run on ZooKeeper:\n%s", want)
	}
	for name, addr := range map[string]string{"server": startEndpoint(t, "mem://zkcli"), "serverless": startServerless(t, "mem://zkcli-serverless")} {
		if got := zkCli(t, addr); got != want {
			t.Errorf("zkCli differs on ssfkit's %s %s\nZooKeeper:\n%s\nssfkit:\n%s", name, firstDifference(strings.Split(want, "\n"), strings.Split(got, "\n")), want, got)
		}
	}
}

// watchProbe runs testdata/WatchProbe.java, a program on ZooKeeper's own Java client, against
// server under a fresh root and returns what it printed.
func watchProbe(t *testing.T, server string) string {
	t.Helper()
	cmd := javaClient(t, "testdata/WatchProbe.java", server, newRoot())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("WatchProbe against %s: %v\n%s\n%s", server, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// ZooKeeper's Java client sees the same persistent and recursive watches (addWatch), their
// removal, their reset after a reconnect (setWatches2), events withheld by ACL and multiRead
// results on ssfkit's endpoint, a server's and the serverless path's, as on the real server.
func TestJavaClientWatchesOnSsfkit(t *testing.T) {
	zookeeper := testservers.ZooKeeper.Addr(t)
	want := watchProbe(t, zookeeper)
	t.Log("\n" + want)
	if again := watchProbe(t, zookeeper); again != want {
		t.Fatalf("the probe is not deterministic on ZooKeeper %s", firstDifference(strings.Split(want, "\n"), strings.Split(again, "\n")))
	}
	for name, addr := range map[string]string{"server": startEndpoint(t, "mem://watchprobe"), "serverless": startServerless(t, "mem://watchprobe-serverless")} {
		if got := watchProbe(t, addr); got != want {
			t.Errorf("the Java client sees otherwise on ssfkit's %s %s\nZooKeeper:\n%s\nssfkit:\n%s", name, firstDifference(strings.Split(want, "\n"), strings.Split(got, "\n")), want, got)
		}
	}
}
