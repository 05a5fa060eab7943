package zkserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/linearizability"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// server is a Service on a fresh table behind a Server on 127.0.0.1.
type server struct {
	addr string
	svc  *coord.Service
}

func forEachStore(t *testing.T, fn func(t *testing.T, srv server)) {
	for _, name := range []string{"mem", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			url := "mem://"
			if name == "sqlite" {
				url = "sqlite://" + filepath.Join(t.TempDir(), "zk.db")
			}
			fn(t, start(t, url))
		})
	}
}

func start(t *testing.T, url string) server {
	t.Helper()
	ctx := context.Background()
	tbl, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	svc, err := coord.New(ctx, tbl, coord.Config{MinSessionTimeout: 100 * time.Millisecond, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zs := New(svc, t.Logf)
	go zs.Serve(ln)
	t.Cleanup(func() { zs.Close() })
	return server{addr: ln.Addr().String(), svc: svc}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// connect opens a go-zookeeper client and waits for its session.
func connect(t *testing.T, srv server, timeout time.Duration, opts ...func(*zk.Conn)) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{srv.addr}, timeout, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitState(t, events, zk.StateHasSession)
	return c
}

func waitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %v", want)
		}
	}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

var open = zk.WorldACL(zk.PermAll)

func TestCRUDWithStats(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		c := connect(t, srv, 2*time.Second)
		mustS := must[string](t)
		if p := mustS(c.Create("/app", []byte("v0"), zk.FlagPersistent, open)); p != "/app" {
			t.Fatalf("create: %q", p)
		}
		data, st, err := c.Get("/app")
		if err != nil || string(data) != "v0" || st.Version != 0 || st.DataLength != 2 || st.Czxid != st.Mzxid || st.Czxid != st.Pzxid || st.EphemeralOwner != 0 || st.Ctime == 0 || st.Ctime != st.Mtime {
			t.Fatalf("get: %q %+v %v", data, st, err)
		}
		created := *st
		st2, err := c.Set("/app", []byte("v1!"), 0)
		if err != nil || st2.Version != 1 || st2.DataLength != 3 || st2.Czxid != created.Czxid || st2.Mzxid <= created.Mzxid || st2.Pzxid != created.Pzxid {
			t.Fatalf("set: %+v %v", st2, err)
		}
		_, err = c.Set("/app", []byte("x"), 0)
		wantErr(t, err, zk.ErrBadVersion)
		_, err = c.Create("/app", nil, 0, open)
		wantErr(t, err, zk.ErrNodeExists)
		_, err = c.Create("/missing/x", nil, 0, open)
		wantErr(t, err, zk.ErrNoNode)
		_, _, err = c.Get("/missing")
		wantErr(t, err, zk.ErrNoNode)
		if ok, _, err := c.Exists("/missing"); ok || err != nil {
			t.Fatalf("exists: %v %v", ok, err)
		}

		eph := mustS(c.Create("/app/e", nil, zk.FlagEphemeral, open))
		seq := mustS(c.Create("/app/s-", nil, zk.FlagSequence, open))
		ephSeq := mustS(c.Create("/app/s-", nil, zk.FlagEphemeralSequential, open))
		if eph != "/app/e" || seq != "/app/s-0000000001" || ephSeq != "/app/s-0000000002" {
			t.Fatalf("names: %q %q %q", eph, seq, ephSeq)
		}
		_, est, _ := c.Get(ephSeq)
		if est.EphemeralOwner != c.SessionID() {
			t.Fatalf("ephemeral owner %#x, session %#x", est.EphemeralOwner, c.SessionID())
		}
		_, err = c.Create("/app/e/child", nil, 0, open)
		wantErr(t, err, zk.ErrNoChildrenForEphemerals)
		kids, pst, err := c.Children("/app")
		if err != nil || !reflect.DeepEqual(kids, []string{"e", "s-0000000001", "s-0000000002"}) || pst.NumChildren != 3 || pst.Cversion != 3 || pst.Pzxid != est.Czxid || pst.Version != 1 {
			t.Fatalf("children: %v %+v %v", kids, pst, err)
		}
		wantErr(t, c.Delete("/app", -1), zk.ErrNotEmpty)
		wantErr(t, c.Delete(seq, 5), zk.ErrBadVersion)
		if err := c.Delete(seq, 0); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := c.Exists(seq); ok {
			t.Fatal("deleted node exists")
		}
		if p, err := c.Sync("/app"); err != nil || p != "/app" {
			t.Fatalf("sync: %q %v", p, err)
		}
		root, _, _ := c.Children("/")
		if !reflect.DeepEqual(root, []string{"app", "zookeeper"}) {
			t.Fatalf("root: %v", root)
		}
		if p, err := c.CreateContainer("/box", nil, zk.FlagContainer, open); err != nil || p != "/box" {
			t.Fatalf("container: %q %v", p, err)
		}
		if _, err := c.CreateTTL("/ttl", nil, zk.FlagTTL, open, 0); !errors.Is(err, zk.ErrBadArguments) {
			t.Fatalf("a TTL of 0: %v, want BadArguments", err)
		}
	})
}

func TestMultiAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		c := connect(t, srv, 2*time.Second)
		must[string](t)(c.Create("/m", []byte("0"), 0, open))
		res, err := c.Multi(
			&zk.CreateRequest{Path: "/m/a", Acl: open},
			&zk.SetDataRequest{Path: "/m", Data: []byte("1"), Version: 0},
			&zk.CheckVersionRequest{Path: "/m", Version: 0},
			&zk.DeleteRequest{Path: "/m/a", Version: -1},
		)
		wantErr(t, err, zk.ErrBadVersion)
		if len(res) != 4 || res[0].Error != nil || res[1].Error != nil || !errors.Is(res[2].Error, zk.ErrBadVersion) || !strings.Contains(fmt.Sprint(res[3].Error), "-2") {
			t.Fatalf("per-op results: %+v", res)
		}
		if ok, _, _ := c.Exists("/m/a"); ok {
			t.Fatal("a failed multi left /m/a")
		}
		if data, _, _ := c.Get("/m"); string(data) != "0" {
			t.Fatalf("a failed multi set /m to %q", data)
		}
		res, err = c.Multi(
			&zk.CreateRequest{Path: "/m/q-", Acl: open, Flags: zk.FlagSequence},
			&zk.SetDataRequest{Path: "/m", Data: []byte("1"), Version: 0},
			&zk.CheckVersionRequest{Path: "/m", Version: 1},
			&zk.DeleteRequest{Path: "/m/q-0000000000", Version: 0},
		)
		if err != nil || res[0].String != "/m/q-0000000000" || res[1].Stat == nil || res[1].Stat.Version != 1 {
			t.Fatalf("multi: %+v %v", res, err)
		}
		_, st, _ := c.Get("/m")
		if st.NumChildren != 0 || st.Cversion != 2 || st.Mzxid != st.Pzxid {
			t.Fatalf("one zxid for the multi's writes: %+v", st)
		}
	})
}

func TestWatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		a, b := connect(t, srv, 2*time.Second), connect(t, srv, 2*time.Second)
		_, _, created, err := a.ExistsW("/w")
		if err != nil {
			t.Fatal(err)
		}
		must[string](t)(b.Create("/w", []byte("0"), 0, open))
		expect(t, created, zk.EventNodeCreated, "/w")

		_, _, changed := mustGetW(t, a, "/w")
		_, _, kids, err := a.ChildrenW("/w")
		if err != nil {
			t.Fatal(err)
		}
		must[string](t)(b.Create("/w/k", nil, 0, open))
		expect(t, kids, zk.EventNodeChildrenChanged, "/w")
		must[*zk.Stat](t)(b.Set("/w", []byte("1"), -1))
		expect(t, changed, zk.EventNodeDataChanged, "/w")

		// A fired watch is gone: set it again, change twice, see one event.
		_, _, changed = mustGetW(t, a, "/w")
		must[*zk.Stat](t)(b.Set("/w", []byte("2"), -1))
		must[*zk.Stat](t)(b.Set("/w", []byte("3"), -1))
		expect(t, changed, zk.EventNodeDataChanged, "/w")
		if _, ok := <-changed; ok {
			t.Fatal("a one-time watch fired twice")
		}

		_, _, deleted := mustGetW(t, a, "/w/k")
		if err := b.Delete("/w/k", -1); err != nil {
			t.Fatal(err)
		}
		expect(t, deleted, zk.EventNodeDeleted, "/w/k")

		// The event reaches the client before any reply that shows the state after it.
		for i := range 20 {
			_, _, ch := mustGetW(t, a, "/w")
			want := fmt.Sprint("v", i)
			go b.Set("/w", []byte(want), -1)
			for {
				data, _, err := a.Get("/w")
				if err != nil {
					t.Fatal(err)
				}
				if string(data) == want {
					break
				}
			}
			select {
			case ev := <-ch:
				if ev.Type != zk.EventNodeDataChanged {
					t.Fatalf("event %v", ev)
				}
			default:
				t.Fatalf("round %d: a reply showed the new data before its watch event", i)
			}
		}
	})
}

func mustGetW(t *testing.T, c *zk.Conn, p string) ([]byte, *zk.Stat, <-chan zk.Event) {
	t.Helper()
	data, st, ch, err := c.GetW(p)
	if err != nil {
		t.Fatal(err)
	}
	return data, st, ch
}

func expect(t *testing.T, ch <-chan zk.Event, typ zk.EventType, p string) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Type != typ || ev.Path != p {
			t.Fatalf("event %v on %s, want %v on %s", ev.Type, ev.Path, typ, p)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %v on %s", typ, p)
	}
}

// pausable lets a test silence a client's connection (no pings reach the server) or cut it.
type pausable struct {
	mu     sync.Mutex
	conns  []net.Conn
	paused atomic.Bool
}

func (p *pausable) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	return &pausedConn{Conn: c, p: p}, nil
}

func (p *pausable) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

type pausedConn struct {
	net.Conn
	p *pausable
}

func (c *pausedConn) Write(b []byte) (int, error) {
	if c.p.paused.Load() {
		return len(b), nil // swallowed: the server hears nothing
	}
	return c.Conn.Write(b)
}

func TestEphemeralsEndWithTheSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		watcher := connect(t, srv, 2*time.Second)
		must[string](t)(watcher.Create("/e", nil, 0, open))

		closing := connect(t, srv, 2*time.Second)
		must[string](t)(closing.Create("/e/c", nil, zk.FlagEphemeral, open))
		_, _, gone, _ := watcher.ExistsW("/e/c")
		closing.Close()
		expect(t, gone, zk.EventNodeDeleted, "/e/c")

		var p pausable
		// Long enough that a loaded machine's pauses do not look like silence.
		const timeout = time.Second
		silent, events, err := zk.Connect([]string{srv.addr}, timeout, zk.WithLogger(quiet{}), zk.WithDialer(p.dial))
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		waitState(t, events, zk.StateHasSession)
		must[string](t)(silent.Create("/e/x", nil, zk.FlagEphemeral, open))
		must[string](t)(silent.Create("/e/y-", nil, zk.FlagEphemeralSequential, open))
		// Pings keep the session alive past its timeout.
		time.Sleep(timeout * 3 / 2)
		if left, _, _ := watcher.Children("/e"); len(left) != 2 {
			t.Fatalf("a pinging session lost its ephemerals: %v", left)
		}
		_, _, kids, _ := watcher.ChildrenW("/e")
		began := time.Now()
		p.paused.Store(true)
		expect(t, kids, zk.EventNodeChildrenChanged, "/e")
		// Its last heartbeat was at most a ping interval (a third of the timeout) and a refresh
		// interval (a quarter) before the pause.
		if waited := time.Since(began); waited < timeout/3 {
			t.Fatalf("the session expired %v after the pause, before its %v timeout", waited, timeout)
		}
		// Both ephemerals went in the one event's transaction.
		if left, _, _ := watcher.Children("/e"); len(left) != 0 {
			t.Fatalf("left after expiry: %v", left)
		}
		p.paused.Store(false)
		p.cut()
		waitState(t, events, zk.StateExpired)
	})
}

func TestReconnectReattachesTheSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		var p pausable
		c, events, err := zk.Connect([]string{srv.addr}, 2*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(p.dial))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitState(t, events, zk.StateHasSession)
		id := c.SessionID()
		must[string](t)(c.Create("/r", nil, zk.FlagEphemeral, open))
		_, _, changed := mustGetW(t, c, "/r")

		other := connect(t, srv, 2*time.Second)
		p.cut()
		waitState(t, events, zk.StateDisconnected)
		must[*zk.Stat](t)(other.Set("/r", []byte("while away"), -1)) // the client missed this
		waitState(t, events, zk.StateHasSession)
		if c.SessionID() != id {
			t.Fatalf("new session %#x after reconnect, want %#x", c.SessionID(), id)
		}
		// setWatches told the server the client's last zxid: the missed change fires now.
		expect(t, changed, zk.EventNodeDataChanged, "/r")
		if ok, st, err := c.Exists("/r"); !ok || err != nil || st.EphemeralOwner != id {
			t.Fatalf("ephemeral after reconnect: %v %+v %v", ok, st, err)
		}
	})
}

// rawConnect sends a ConnectRequest and returns the ConnectResponse's session id, or an error
// when the server closed the connection without answering.
func rawConnect(addr string, lastZxid, session int64, passwd []byte) (int64, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	w := &writer{b: make([]byte, 4)}
	w.int32(0)
	w.int64(lastZxid)
	w.int32(2000)
	w.int64(session)
	w.buffer(passwd)
	binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
	if _, err := nc.Write(w.b); err != nil {
		return 0, err
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return 0, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(nc, b); err != nil {
		return 0, err
	}
	r := &reader{b: b}
	r.int32()
	r.int32()
	return r.int64(), r.err
}

func TestConnectRefusals(t *testing.T) {
	srv := start(t, "mem://")
	c := connect(t, srv, 2*time.Second)
	must[string](t)(c.Create("/z", nil, 0, open))
	if id, err := rawConnect(srv.addr, srv.svc.LastZxid(), 0, make([]byte, 16)); err != nil || id == 0 {
		t.Fatalf("a client at the server's zxid: %#x %v", id, err)
	}
	last := srv.svc.LastZxid()
	// Single system image: a client that has seen more than this server is turned away.
	if id, err := rawConnect(srv.addr, last+1, 0, make([]byte, 16)); !errors.Is(err, io.EOF) {
		t.Fatalf("a client ahead of the server got session %#x, %v; want the connection closed", id, err)
	}
	// A wrong password is answered as an expired session: id 0.
	if id, err := rawConnect(srv.addr, 0, c.SessionID(), bytes.Repeat([]byte{7}, 16)); err != nil || id != 0 {
		t.Fatalf("wrong password: session %#x, %v", id, err)
	}
}

func TestDigestACL(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		alice, anon := connect(t, srv, 2*time.Second), connect(t, srv, 2*time.Second)
		if err := alice.AddAuth("digest", []byte("alice:secret")); err != nil {
			t.Fatal(err)
		}
		must[string](t)(alice.Create("/private", []byte("x"), 0, zk.DigestACL(zk.PermAll, "alice", "secret")))
		must[string](t)(alice.Create("/readonly", []byte("r"), 0, append(zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "alice", "secret")...)))
		_, _, err := anon.Get("/private")
		wantErr(t, err, zk.ErrNoAuth)
		_, err = anon.Set("/private", nil, -1)
		wantErr(t, err, zk.ErrNoAuth)
		_, err = anon.Create("/private/c", nil, 0, open)
		wantErr(t, err, zk.ErrNoAuth)
		_, _, err = anon.Children("/private")
		wantErr(t, err, zk.ErrNoAuth)
		if data, _, err := anon.Get("/readonly"); err != nil || string(data) != "r" {
			t.Fatalf("world-readable: %q %v", data, err)
		}
		_, err = anon.Set("/readonly", nil, -1)
		wantErr(t, err, zk.ErrNoAuth)
		_, err = anon.SetACL("/readonly", open, -1)
		wantErr(t, err, zk.ErrNoAuth)
		if err := anon.AddAuth("digest", []byte("alice:wrong")); err != nil {
			t.Fatal(err) // ZooKeeper accepts any digest; it just matches no ACL
		}
		_, _, err = anon.Get("/private")
		wantErr(t, err, zk.ErrNoAuth)
		if err := anon.AddAuth("digest", []byte("alice:secret")); err != nil {
			t.Fatal(err)
		}
		if data, _, err := anon.Get("/private"); err != nil || string(data) != "x" {
			t.Fatalf("after auth: %q %v", data, err)
		}
		acl, _, err := alice.GetACL("/private")
		if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "alice:") {
			t.Fatalf("getACL: %+v %v", acl, err)
		}
		_, err = alice.Create("/bad", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}})
		wantErr(t, err, zk.ErrInvalidACL)
	})
}

func TestMegabyteData(t *testing.T) {
	forEachStore(t, func(t *testing.T, srv server) {
		c := connect(t, srv, 4*time.Second)
		big := bytes.Repeat([]byte("ssfkit-z"), coord.MaxData/8)
		big[12345] = 0
		must[string](t)(c.Create("/big", big, 0, open))
		data, st, err := c.Get("/big")
		if err != nil || !bytes.Equal(data, big) || st.DataLength != coord.MaxData {
			t.Fatalf("read back %d bytes, %v", len(data), err)
		}
		_, err = c.Set("/big", append(big, 1), -1)
		wantErr(t, err, zk.ErrBadArguments)
	})
}

// Two servers on one table are one system: a write through either fires a watch set through the
// other, and a client moved from one to the other keeps its session, its ephemeral and its view.
func TestTwoServersOneSystem(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "zk.db")
	s1, s2 := start(t, url), start(t, url)
	var target atomic.Value
	target.Store(s1.addr)
	var p pausable
	dial := func(network, _ string, timeout time.Duration) (net.Conn, error) {
		return p.dial(network, target.Load().(string), timeout)
	}
	c, events, err := zk.Connect([]string{s1.addr}, 2*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitState(t, events, zk.StateHasSession)
	id := c.SessionID()
	must[string](t)(c.Create("/moving", []byte("0"), zk.FlagEphemeral, open))
	_, _, changed := mustGetW(t, c, "/moving")

	other := connect(t, s2, 2*time.Second)
	st := must[*zk.Stat](t)(other.Set("/moving", []byte("1"), 0))
	expect(t, changed, zk.EventNodeDataChanged, "/moving")
	if data, _, _ := c.Get("/moving"); string(data) != "1" {
		t.Fatalf("after its watch fired, server 1 showed %q", data)
	}

	target.Store(s2.addr)
	p.cut()
	waitState(t, events, zk.StateHasSession)
	if c.SessionID() != id {
		t.Fatalf("session %#x after moving, want %#x", c.SessionID(), id)
	}
	data, st2, err := c.Get("/moving")
	if err != nil || string(data) != "1" || st2.Mzxid != st.Mzxid || st2.EphemeralOwner != id {
		t.Fatalf("on server 2: %q %+v %v", data, st2, err)
	}
	// Closing the session through server 2 removes the ephemeral server 1 created.
	_, _, gone, err := other.ExistsW("/moving")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	expect(t, gone, zk.EventNodeDeleted, "/moving")
}

// A request whose outcome the store left unknown is answered as ZooKeeper answers it: the
// connection drops (ConnectionLoss), never an error that says the write did not happen.
func TestStoreFailureDropsTheConnection(t *testing.T) {
	ctx := context.Background()
	tbl, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := coord.New(ctx, tbl, coord.Config{Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zs := New(svc, t.Logf)
	go zs.Serve(ln)
	defer zs.Close()
	c := connect(t, server{addr: ln.Addr().String(), svc: svc}, 4*time.Second)
	must[string](t)(c.Create("/before", nil, 0, open))
	tbl.Close()
	_, err = c.Create("/after", nil, 0, open)
	wantErr(t, err, zk.ErrConnectionClosed)
}

// zkCode maps a go-zookeeper error back to ZooKeeper's code, for the history.
func zkCode(t *testing.T, err error) int32 {
	switch {
	case err == nil:
		return linearizability.ZOK
	case errors.Is(err, zk.ErrNoNode):
		return linearizability.ZNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return linearizability.ZNodeExists
	case errors.Is(err, zk.ErrBadVersion):
		return linearizability.ZBadVersion
	}
	t.Errorf("an error with no place in the history: %v", err)
	return 1
}

// Clients of two servers on one table race conditional creates, sets and deletes on two
// znodes, with sync-then-get reads: through the wire protocol the history must be linearizable.
func TestWireHistoryIsLinearizable(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "zk.db")
	servers := []server{start(t, url), start(t, url)}
	const clients, opsEach = 4, 25
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	begin := time.Now()
	for ci := range clients {
		c := connect(t, servers[ci%2], 4*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(ci), 19))
			for i := range opsEach {
				in := linearizability.ZnodeIn{Path: fmt.Sprint("/k", rng.IntN(2)), Version: int32(rng.IntN(3)) - 1, Data: fmt.Sprintf("c%d-%d", ci, i)}
				var out linearizability.ZnodeOut
				call := time.Since(begin).Nanoseconds()
				switch k := rng.IntN(10); {
				case k < 2:
					in.Kind, in.Version = "create", 0
					_, err := c.Create(in.Path, []byte(in.Data), 0, open)
					out.Code = zkCode(t, err)
				case k < 6:
					in.Kind = "set"
					st, err := c.Set(in.Path, []byte(in.Data), in.Version)
					out.Code = zkCode(t, err)
					if err == nil {
						out.Version = st.Version
					}
				case k < 7:
					in.Kind, in.Data = "delete", ""
					out.Code = zkCode(t, c.Delete(in.Path, in.Version))
				default:
					in.Kind, in.Version, in.Data = "read", 0, ""
					if _, err := c.Sync(in.Path); err != nil {
						t.Error(err)
						return
					}
					data, st, err := c.Get(in.Path)
					out.Code = zkCode(t, err)
					if err == nil {
						out.Version, out.Data = st.Version, string(data)
					}
				}
				ret := time.Since(begin).Nanoseconds()
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: ci, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !t.Failed() {
		linearizability.Check(t, linearizability.ZnodeModel, history)
	}
}
