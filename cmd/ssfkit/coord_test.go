package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zkRoundTrip connects a ZooKeeper client to addr, creates a node and reads it back.
func zkRoundTrip(t *testing.T, addr, path string) {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	if _, err := c.Create(path, []byte("hello"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if data, st, err := c.Get(path); err != nil || string(data) != "hello" || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("get %s: %q %+v %v", path, data, st, err)
	}
}

func TestCoordServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runCoord(ctx, []string{"serve", "--store", "sqlite://" + t.TempDir() + "/zk.db?table=zookeeper", "--addr", "127.0.0.1:0",
			"--blobs", "file://" + t.TempDir()}, out, io.Discard)
	}()
	addr := awaitBanner(t, out, done)
	zkRoundTrip(t, addr, "/serve")
	if !strings.Contains(out.String(), "large entries in bucket file://") {
		t.Errorf("the banner does not name the bucket:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("coord serve: %v", err)
	}
}

// awaitBanner waits for a command's banner to print its ZooKeeper address.
func awaitBanner(t *testing.T, out *syncBuffer, done chan error) string {
	t.Helper()
	on := regexp.MustCompile(`ZooKeeper protocol on (127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := on.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address printed:\n%s", out.String())
		}
	}
}

// The serverless path from the command line: a writer and a proxy on one SQLite file, the
// writer woken through a log queue on it, serve a ZooKeeper client; the proxy never appends.
func TestCoordProxyAndWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	storeURL := "sqlite://" + dir + "/zk.db?table=zookeeper"
	queueURL := "log://zk/requests?create=true&store=" + url.QueryEscape("sqlite://"+dir+"/zk.db?table=zkqueue")
	deadURL := "log://zk/dead?create=true&store=" + url.QueryEscape("sqlite://"+dir+"/zk.db?table=zkqueue")
	writerOut, proxyOut := &syncBuffer{}, &syncBuffer{}
	writerDone, proxyDone := make(chan error, 1), make(chan error, 1)
	go func() {
		writerDone <- runCoord(ctx, []string{"writer", "--store", storeURL, "--queue", queueURL, "--dead-letter-queue", deadURL}, writerOut, io.Discard)
	}()
	go func() {
		proxyDone <- runCoord(ctx, []string{"proxy", "--store", storeURL, "--queue", queueURL, "--addr", "127.0.0.1:0"}, proxyOut, io.Discard)
	}()
	addr := awaitBanner(t, proxyOut, proxyDone)
	if !strings.Contains(proxyOut.String(), "writes decided by writers woken on log://zk/requests") {
		t.Errorf("the proxy's banner does not say where its writes go:\n%s", proxyOut.String())
	}
	zkRoundTrip(t, addr, "/proxied")
	cancel()
	for name, done := range map[string]chan error{"writer": writerDone, "proxy": proxyDone} {
		if err := <-done; err != nil {
			t.Errorf("coord %s: %v", name, err)
		}
	}
}

// coord serve refuses a missing store, a public address without --public, and a busy port,
// naming the flag.
func TestCoordServeRefusals(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "--store is required"},
		{[]string{"serve", "--store", "mem://", "--addr", "0.0.0.0:2181"}, "pass --public"},
		{[]string{"serve", "--store", "mem://", "--addr", busy.Addr().String()}, "already in use"},
		{[]string{"start"}, "give the action: serve, proxy or writer"},
		{[]string{"proxy", "--store", "mem://"}, "coord proxy: --queue is required"},
		{[]string{"proxy", "--store", "mem://", "--queue", "mem://q", "--tick", "10s"}, "--tick 10s: want a positive period no longer than --min-session-timeout"},
		{[]string{"writer", "--store", "mem://", "--queue", "mem://q"}, "coord writer: --dead-letter-queue is required"},
		{[]string{"writer", "--store", "mem://", "--queue", "mem://q", "--dead-letter-queue", "mem://d", "--heartbeat-every", "0s"}, "--heartbeat-every must be positive"},
		{[]string{"proxy", "--store", "mem://", "--queue", "nosuch://q", "--addr", "127.0.0.1:0"}, "coord proxy: "},
		{[]string{"serve", "--store", "mem://", "--snapshot-every", "0"}, "--snapshot-every 0: want a positive number"},
		{[]string{"serve", "--store", "mem://", "--addr", "127.0.0.1:0", "--blobs", "nosuch://b"}, `coord serve: blob URL nosuch://b: open blob.Bucket: no driver registered for "nosuch"`},
		{[]string{"serve", "--store", "mem://", "--addr", "127.0.0.1:0", "--blobs", "file://" + t.TempDir() + "/absent"}, "coord serve: blob URL file://"},
	} {
		err := runCoord(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("coord %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// dev serves the coordination service beside the example; a busy ZooKeeper port names the
// flags that move it or turn it off.
func TestDevServesZooKeeper(t *testing.T) {
	_, out, stop := startDev(t, "--store", "sqlite://"+t.TempDir()+"/dev.db")
	m := regexp.MustCompile(`ZooKeeper\s+(127\.0\.0\.1:\d+), ZooKeeper's protocol`).FindStringSubmatch(out.String())
	if m == nil {
		stop()
		t.Fatalf("the banner has no ZooKeeper line:\n%s", out.String())
	}
	zkRoundTrip(t, m[1], "/dev")
	stop()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--temporal", temporalOff, "--store", "sqlite://" + t.TempDir() + "/dev.db",
		"--zk-addr", busy.Addr().String()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--zk-addr 127.0.0.1:PORT") || !strings.Contains(err.Error(), "--zk-addr off") {
		t.Errorf("dev on a busy ZooKeeper port: %v", err)
	}
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--temporal", temporalOff, "--zk-addr", "off", "--zk-blobs", "mem://"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "which --zk-addr off turns off") {
		t.Errorf("dev --zk-blobs without the coordination service: %v", err)
	}
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--temporal", temporalOff, "--zk-addr", "0.0.0.0:2181"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--zk-addr") || !strings.Contains(err.Error(), "--public") {
		t.Errorf("dev with a public --zk-addr: %v", err)
	}
}
