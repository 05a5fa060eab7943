package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// sessionTimeout is every test session's timeout: short, so expiries take about a second.
const sessionTimeout = time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// backends are the ZooKeeper servers every test runs against: ssfkit's endpoint on an
// in-memory table and on SQLite, each started by the test on 127.0.0.1, and a real Apache
// ZooKeeper (one per test binary, started on 127.0.0.1 by internal/testservers; `make tools`
// installs it): the recipes are plain ZooKeeper. Each test uses its own directories, so the
// tests share the one real server.
func backends(t *testing.T, run func(t *testing.T, addr string)) {
	for _, b := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"mem", func(t *testing.T) string { return startEndpoint(t, "mem://") }},
		{"sqlite", func(t *testing.T) string {
			return startEndpoint(t, "sqlite://"+filepath.Join(t.TempDir(), "zk.db")+"?table=zookeeper")
		}},
		{"zookeeper", func(t *testing.T) string { return testservers.ZooKeeper.Addr(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			run(t, b.addr(t))
		})
	}
}

// startEndpoint serves the coordination service on storeURL at a free 127.0.0.1 port.
func startEndpoint(t *testing.T, storeURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := coordserve.Start(context.Background(), storeURL, "", ln,
		coord.Config{MinSessionTimeout: 400 * time.Millisecond, Tick: 50 * time.Millisecond}, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// app hosts the jobs SSF on a fresh in-memory table, as every worker's SSF calls reach it.
type app struct {
	host *local.Host
	rt   *ssf.Runtime
}

func newApp(t *testing.T) *app {
	t.Helper()
	tbl, err := store.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	h := local.NewHost()
	rt, err := h.Add(ssf.Config{Name: SSF, Store: tbl, Handler: Handlers()[SSF],
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &app{host: h, rt: rt}
}

// state reads the job's cursor and runs (in slot order) from the SSF's table.
func (a *app) state(t *testing.T, job string) (Cursor, []Run, Report) {
	t.Helper()
	items, err := a.rt.Items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var c Cursor
	var rep Report
	var runs []Run
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range items {
			if !yield(k) {
				return
			}
		}
	}) {
		v := items[k]
		if len(v) == 0 {
			continue // an item being created while the test looks (it polls a running app)
		}
		switch {
		case k == "cursors/"+job:
			mustDecode(t, v, &c)
		case k == "reports/"+job:
			mustDecode(t, v, &rep)
		case strings.HasPrefix(k, "runs/"+job+"/"):
			var r Run
			mustDecode(t, v, &r)
			runs = append(runs, r)
		}
	}
	return c, runs, rep
}

// settledState is state between two ticks. A look while a worker ticks is not a snapshot: a
// tick advances the cursor before it writes the runs of the slots it claimed, and Items lists
// the key directory one shard at a time, so it can miss a run written early in a catch-up tick
// (its shard already listed) and see a later one. It waits (while workers may still tick) for
// a look whose runs are every slot from the first to the cursor's; a slot that is really
// missing never gives one, so after the deadline it returns the last look for checkRuns to
// report.
func (a *app) settledState(t *testing.T, job string) (Cursor, []Run) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, runs, _ := a.state(t, job)
		contiguous := len(runs) > 0 && runs[len(runs)-1].Slot == c.Done &&
			c.Done-runs[0].Slot == int64(len(runs)-1)
		if contiguous || time.Now().After(deadline) {
			return c, runs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustDecode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
}

// checkRuns checks the schedule's record: every slot from the first run to the cursor ran
// exactly once, and no slot ran under an older leader's token than an earlier slot (once a
// newer leader ran, no older one's run is ever accepted). It returns the tokens seen.
func checkRuns(t *testing.T, c Cursor, runs []Run) []int64 {
	t.Helper()
	if len(runs) == 0 {
		t.Fatal("no slot ran")
	}
	var tokens []int64
	for i, r := range runs {
		if want := runs[0].Slot + int64(i); r.Slot != want {
			t.Errorf("run %d is slot %d, want %d: slots missed or repeated", i, r.Slot, want)
		}
		if i > 0 && r.Token < runs[i-1].Token {
			t.Errorf("slot %d ran under token %d (%s) after slot %d under the newer %d (%s): a stale leader's run was accepted",
				r.Slot, r.Token, r.Leader, runs[i-1].Slot, runs[i-1].Token, runs[i-1].Leader)
		}
		if len(tokens) == 0 || tokens[len(tokens)-1] != r.Token {
			tokens = append(tokens, r.Token)
		}
	}
	if last := runs[len(runs)-1].Slot; last != c.Done {
		t.Errorf("cursor at %d, last run %d", c.Done, last)
	}
	return tokens
}

// dial opens a session to addr, or through p if not nil.
func dial(t *testing.T, addr string, p *proxy) *Session {
	t.Helper()
	return dialTimeout(t, addr, p, sessionTimeout)
}

func dialTimeout(t *testing.T, addr string, p *proxy, timeout time.Duration) *Session {
	t.Helper()
	var d zk.Dialer
	if p != nil {
		d = p.dial
	}
	s, err := Dial([]string{addr}, timeout, 10*time.Second, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// proxy forwards a client's TCP connections to a server until cut: then it drops whatever
// either side sends, without closing anything (a black hole, as a partition is: the client
// notices only when its pings go unanswered), and refuses new connections, until healed.
type proxy struct {
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newProxy(target string) *proxy { return &proxy{target: target} }

func (p *proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// dial is the client's dialer: a pipe to the server through the proxy.
func (p *proxy) dial(network, _ string, timeout time.Duration) (net.Conn, error) {
	if p.isCut() {
		return nil, fmt.Errorf("proxy: partitioned")
	}
	server, err := net.DialTimeout(network, p.target, timeout)
	if err != nil {
		return nil, err
	}
	client, mine := net.Pipe()
	p.mu.Lock()
	p.conns = append(p.conns, server, mine)
	p.mu.Unlock()
	forward := func(dst, src net.Conn) {
		defer dst.Close()
		defer src.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if p.isCut() {
				continue // dropped
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go forward(server, mine)
	go forward(mine, server)
	return client, nil
}

// Reset closes the client's connections (it reconnects at once, within its session).
func (p *proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Cut starts the partition.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal ends the partition.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// eventually polls cond every 10 ms for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
