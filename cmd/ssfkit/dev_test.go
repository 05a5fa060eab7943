package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ssfkit/ssfkit/examples/travel"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

func TestCheckListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:0", false, true},
		{"[::1]:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.168.1.5:80", false, false},
		{"0.0.0.0:8080", true, true},
		{"8080", false, false},
	} {
		err := checkListenAddr("dev", "--addr", tc.addr, tc.public)
		if (err == nil) != tc.ok {
			t.Errorf("checkListenAddr(%q, public=%v) = %v, want ok=%v", tc.addr, tc.public, err, tc.ok)
		}
	}
}

func TestTablePerSSF(t *testing.T) {
	for _, tc := range []struct{ base, want, err string }{
		{base: "sqlite:///tmp/dev.db", want: "sqlite:///tmp/dev.db?table=teller"},
		{base: "sqlite:///tmp/dev.db?max_row_bytes=1000", want: "sqlite:///tmp/dev.db?max_row_bytes=1000&table=teller"},
		{base: "sqlite:///tmp/dev.db?table=x", err: "names a table"},
		{base: "mem://", want: "mem://"},
		{base: "mem://dev", want: "mem://dev_teller"},
		{base: "dynamodb://t", err: "embedded stores only"},
	} {
		f, err := apps.TablePerSSF(tc.base)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("apps.TablePerSSF(%q): error %v, want one containing %q", tc.base, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("apps.TablePerSSF(%q): %v", tc.base, err)
		}
		if got, _ := f("teller"); got != tc.want {
			t.Errorf("apps.TablePerSSF(%q)(teller) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

// syncBuffer is a bytes buffer safe for the server's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDev runs `ssfkit dev` with args on a free port, without Temporal unless args ask for
// it, until stop, which waits for it to exit.
func startDev(t *testing.T, args ...string) (base string, out *syncBuffer, stop func()) {
	base, out, stop, err := tryStartDev(t, args...)
	if err != nil {
		t.Fatalf("dev exited early: %v\n%s", err, out.String())
	}
	return base, out, stop
}

// startDevOnPorts is startDev with n ports that were free a moment ago, which args gives dev:
// another process may take one before dev listens on it (a port the kernel hands out again),
// so dev is started again on new ports when it could not listen, at most three times.
func startDevOnPorts(t *testing.T, n int, args func(ports []int) []string) (base string, out *syncBuffer, stop func(), ports []int) {
	for attempt := 1; ; attempt++ {
		ports, err := testservers.FreePorts(n)
		if err != nil {
			t.Fatal(err)
		}
		base, out, stop, err := tryStartDev(t, args(ports)...)
		if err == nil {
			return base, out, stop, ports
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatalf("dev exited early: %v\n%s", err, out.String())
		}
		t.Logf("dev could not listen on a port free a moment ago (%v); again on new ports", err)
	}
}

// tryStartDev is startDev returning dev's error if it exits before it listens.
func tryStartDev(t *testing.T, args ...string) (base string, out *syncBuffer, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		// No Temporal UI unless asked: its default port is a fixed one.
		done <- runDev(ctx, append([]string{"--addr", "127.0.0.1:0", "--temporal", temporalOff, "--zk-addr", "127.0.0.1:0", "--ui-addr", "off"}, args...), out, io.Discard)
	}()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("dev: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("dev did not shut down")
		}
	}
	listening := regexp.MustCompile(`listening\s+(http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case err := <-done:
			cancel()
			return "", out, nil, err
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("dev printed no address:\n%s", out.String())
		}
	}
	return base, out, stop, nil
}

// post invokes an SSF of the dev server and returns the response body, which must be a 200.
func post(t *testing.T, base, ssfName, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/ssf/"+ssfName, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s %s: %d %s", ssfName, body, resp.StatusCode, b)
	}
	return string(b)
}

func TestDevServesAndShutsDown(t *testing.T) {
	base, out, stop := startDev(t, "--store", "sqlite://"+t.TempDir()+"/dev.db")
	if body := post(t, base, "accounts", "open-alice", `{"op":"open","account":"alice","amount":100}`); !strings.Contains(body, `"output": true`) {
		t.Fatalf("open account: %s", body)
	}
	stop()
	if !strings.Contains(out.String(), "POST /v1/ssf/accounts 200") {
		t.Errorf("request not logged:\n%s", out.String())
	}
}

// dev loads the travel data at start, once: restarted on the same store, it finds the first
// run's reservation still booked.
func TestDevTravel(t *testing.T) {
	store := "sqlite://" + t.TempDir() + "/dev.db"
	u := apps.TravelDevData().Users[7]
	reserve := fmt.Sprintf(`{"op":"reserve","user":%q,"password":%q,"hotel":"h50","flight":"f50"}`, u.Name, u.Password)
	for run, key := range []string{"reserve-1", "reserve-2"} {
		base, out, stop := startDev(t, "--app", "travel", "--store", store)
		if !strings.Contains(out.String(), "ssfkit dev: the travel reservation example") || !strings.Contains(out.String(), u.Password) {
			t.Errorf("banner:\n%s", out.String())
		}
		if body := post(t, base, "frontend", key, reserve); !strings.Contains(body, `"booked": true`) {
			t.Fatalf("run %d: %s", run, body)
		}
		items := httpGet(t, base+"/v1/ssf/hotel/items")
		if !strings.Contains(items, `"rooms/h50": {`) || !strings.Contains(items, fmt.Sprintf(`"booked": %d`, run+1)) {
			t.Errorf("run %d: hotel items:\n%s", run, items)
		}
		stop()
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// dev with its embedded Temporal server runs the travel workflows on its own worker, and the
// server keeps their history in its SQLite file.
func TestDevRunsWorkflowsOnEmbeddedTemporal(t *testing.T) {
	dir := t.TempDir()
	_, out, stop, ports := startDevOnPorts(t, 1, func(ports []int) []string {
		os.RemoveAll(dir + "/temporal.db")
		return []string{"--app", "travel", "--store", "sqlite://" + dir + "/dev.db",
			"--temporal", temporalEmbedded, "--temporal-port", fmt.Sprint(ports[0]), "--temporal-db", dir + "/temporal.db"}
	})
	defer stop()
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	if !strings.Contains(out.String(), "Temporal    "+addr) || !strings.Contains(out.String(), "temporal workflow list --address "+addr) {
		t.Fatalf("banner without the Temporal address %s or how to list the workflows:\n%s", addr, out.String())
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u := apps.TravelDevData().Users[3]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "res-dev-1", TaskQueue: ssftemporal.DefaultTaskQueue}, travel.ReserveWorkflowName,
		travel.Request{Op: travel.OpReserve, User: u.Name, Password: u.Password, Hotel: "h50", Flight: "f50"})
	if err != nil {
		t.Fatal(err)
	}
	var conf travel.Confirmation
	if err := run.Get(ctx, &conf); err != nil || !conf.Booked {
		t.Fatalf("reservation workflow: %+v, %v", conf, err)
	}
}

// dev --config runs each SSF with the config's lifetime, T and relaunch delay, and says at
// start what it does differently from the deployment (the queues).
func TestDevHonoursTheConfig(t *testing.T) {
	dir := t.TempDir()
	entry := func(name string) string {
		return fmt.Sprintf(`%q: {"name": %q, "store": "sqlite://%s/dev.db?table=%s", "queue": "mem://%s",
			"lifetime_seconds": 20, "gc_bound_seconds": 90, "relaunch_delay_seconds": 25}`, name, name, dir, name, name)
	}
	config := dir + "/ssfkit.json"
	if err := os.WriteFile(config, []byte(`{"cloud": "aws", "environment": "test", "ssfs": {`+
		entry("teller")+","+entry("accounts")+","+entry("audit")+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base, out, stop := startDev(t, "--config", config)
	post(t, base, "accounts", "open-alice", `{"op":"open","account":"alice","amount":100}`)
	stop()
	for _, want := range []string{"logs are kept 1m30s after an instance finishes, which may run 20s", "overrides   asynchronous starts and relaunches run in this process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the banner does not say %q:\n%s", want, out.String())
		}
	}

	shared := strings.ReplaceAll(entry("accounts"), "table=accounts", "table=teller")
	if err := os.WriteFile(config, []byte(`{"cloud": "aws", "environment": "test", "ssfs": {`+
		entry("teller")+","+shared+","+entry("audit")+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--temporal", temporalOff, "--zk-addr", zkOff, "--config", config}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SSFs accounts and teller are on one table") {
		t.Fatalf("a config with two SSFs on one table: %v", err)
	}
}

// The dev server's request log is one line per request, whatever the path and key carry
// (newlines, terminal escapes, C1 controls): they are quoted. (The server itself refuses ASCII
// controls in a header.)
func TestDevLogCannotBeForged(t *testing.T) {
	base, out, stop := startDev(t, "--store", "sqlite://"+t.TempDir()+"/dev.db")
	// Raw, since Go's client refuses control characters in a header: an attacker's would not.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/ssf/teller%%0A12:00:00%%20GET%%20/forged%%20200/instances/x%%1b[31m HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\xc2\x9b2J\r\nConnection: close\r\n\r\n")
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	stop()
	if !strings.Contains(out.String(), "/forged") {
		t.Fatalf("the request was not logged:\n%s", out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "/forged") && !strings.Contains(line, `"/v1/ssf/teller\n12:00:00 GET /forged 200/instances/x\x1b[31m"`) {
			t.Errorf("a forged log line: %q", line)
		}
		if strings.ContainsAny(line, "\x1b\u009b") {
			t.Errorf("a terminal escape reached the log: %q", line)
		}
	}
}

// dev -h says what dev starts and writes, and a port in use fails dev with the flag that moves
// it (or turns it off), before anything starts.
func TestDevHelpAndBusyPorts(t *testing.T) {
	var help bytes.Buffer
	if err := runDev(context.Background(), []string{"-h"}, io.Discard, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("dev -h: %v", err)
	}
	for _, want := range []string{"127.0.0.1:8080 (--addr)", ".ssfkit/dev.db", "127.0.0.1:7233", "(--temporal-port)", ".ssfkit/temporal.db (--temporal-db)", "--temporal off", "127.0.0.1:2181", "--zk-addr off"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("dev -h does not say %q:\n%s", want, help.String())
		}
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	store := "sqlite://" + dir + "/dev.db"
	err = runDev(context.Background(), []string{"--addr", busy.Addr().String(), "--temporal", temporalOff, "--zk-addr", zkOff, "--store", store}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--addr") {
		t.Errorf("dev on a busy HTTP port: %v, want an error naming --addr", err)
	}
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--store", store, "--zk-addr", zkOff,
		"--temporal-port", fmt.Sprint(port), "--temporal-db", dir + "/temporal.db"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--temporal-port") || !strings.Contains(err.Error(), "--temporal off") {
		t.Errorf("dev on a busy Temporal port: %v, want an error naming --temporal-port and --temporal off", err)
	}
	free, err := testservers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--store", store, "--zk-addr", zkOff,
		"--temporal-port", fmt.Sprint(free), "--temporal-db", dir + "/temporal.db", "--ui-addr", busy.Addr().String()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--ui-addr off") {
		t.Errorf("dev on a busy Temporal UI port: %v, want an error naming --ui-addr", err)
	}
	err = runDev(context.Background(), []string{"--addr", "127.0.0.1:0", "--store", store, "--zk-addr", zkOff, "--ui-addr", "0.0.0.0:8233"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--ui-addr") || !strings.Contains(err.Error(), "--public") {
		t.Errorf("dev with the Temporal UI on every interface: %v, want a refusal naming --ui-addr and --public", err)
	}
}

// The banner suggests listing workflows only for an example that has some.
func TestDevBannerTemporalLine(t *testing.T) {
	tf := &temporalFlags{address: "127.0.0.1:7233", namespace: "default", taskQueue: "ssfkit"}
	if line := temporalBannerLine(tf, lookup(t, "travel")); !strings.Contains(line, "temporal workflow list --address 127.0.0.1:7233") {
		t.Errorf("travel's Temporal line: %q", line)
	}
	if line := temporalBannerLine(tf, lookup(t, "bank")); strings.Contains(line, "workflow list") || !strings.Contains(line, "no workflows") {
		t.Errorf("bank's Temporal line: %q", line)
	}
}

func lookup(t *testing.T, name string) apps.App {
	t.Helper()
	a, ok := apps.Lookup(name)
	if !ok {
		t.Fatalf("no app %q", name)
	}
	return a
}
