package coord

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)

// backends open a fresh table per test; each call of the returned func opens another handle on
// the same table, as a second process would.
func backends(t *testing.T) map[string]func() *store.Table {
	open := func(url string) func() *store.Table { return opener(t, url) }
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	viaProxies := open("mem://" + name + "-proxied-" + randomHex(4))
	return map[string]func() *store.Table{
		"mem":    open("mem://" + name + "-" + randomHex(4)),
		"sqlite": open("sqlite://" + filepath.Join(t.TempDir(), "coord.db")),
		// The same tests through the serverless path: every Service newService makes on this
		// row's tables is a proxy, its writes decided by writers woken through an unruly queue.
		"proxies": func() *store.Table {
			tbl := viaProxies()
			proxied.Store(tbl, true)
			return tbl
		},
	}
}

// opener opens a handle on the table at url per call, as another process would, closed when
// t ends.
func opener(t *testing.T, url string) func() *store.Table {
	return func() *store.Table {
		tbl, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}
}

// proxied holds the tables on which newService makes proxies (the "proxies" backend row).
var proxied sync.Map

func forEachBackend(t *testing.T, fn func(t *testing.T, open func() *store.Table)) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) { fn(t, open) })
	}
}

var fast = Config{MinSessionTimeout: 50 * time.Millisecond, Tick: 10 * time.Millisecond}

func newService(t *testing.T, tbl *store.Table) *Service {
	t.Helper()
	return newServiceWith(t, tbl, Config{})
}

// newServiceWith is newService with cfg's Blobs and BlobSweep.
func newServiceWith(t *testing.T, tbl *store.Table, cfg Config) *Service {
	t.Helper()
	if _, ok := proxied.Load(tbl); ok {
		c := fast
		c.Blobs, c.BlobSweep = cfg.Blobs, cfg.BlobSweep
		return newProxy(t, tbl, c)
	}
	return newServer(t, tbl, cfg)
}

// newServer is newServiceWith, a server even when the tests run through proxies: for what only
// a server does (sweeping the bucket, Submit).
func newServer(t *testing.T, tbl *store.Table, cfg Config) *Service {
	t.Helper()
	c := fast
	c.Blobs, c.BlobSweep = cfg.Blobs, cfg.BlobSweep
	s, err := New(context.Background(), tbl, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// anyone is a caller without a session, with the given ids; on a proxy, whose writes need a
// session, a fresh session's.
func anyone(t *testing.T, s *Service, auth ...ID) Caller {
	t.Helper()
	if s.cfg.Waker == nil {
		return Caller{Auth: auth}
	}
	c := newSession(t, s, time.Minute)
	c.Auth = auth
	return c
}

func newSession(t *testing.T, s *Service, timeout time.Duration) Caller {
	t.Helper()
	id, _, _, err := s.OpenSession(context.Background(), timeout)
	if err != nil {
		t.Fatal(err)
	}
	return Caller{Session: id}
}

func wantCode(t *testing.T, err error, c Code) {
	t.Helper()
	if CodeOf(err) != c {
		t.Fatalf("got %v, want %v", err, c)
	}
}

func get(s *Service, c Caller, p string) (data []byte, st Stat, err error) {
	s.View(func(v View) { data, st, err = v.Get(c, p, false) })
	return
}

func mustCreate(t *testing.T, s *Service, c Caller, p string, data string, mode Mode) Result {
	t.Helper()
	r, _, err := s.Write(context.Background(), c, Op{Kind: OpCreate, Path: p, Data: []byte(data), ACL: OpenACLUnsafe, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTreeStatsAndErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		c := newSession(t, s, time.Second)
		z0 := s.LastZxid()
		r := mustCreate(t, s, c, "/a", "x", Persistent)
		if r.Path != "/a" || r.Stat.Czxid != z0+1 || r.Stat.Mzxid != z0+1 || r.Stat.Pzxid != z0+1 || r.Stat.DataLength != 1 || r.Stat.Version != 0 {
			t.Fatalf("create /a: %+v", r)
		}
		_, _, err := s.Write(ctx, c, Op{Kind: OpCreate, Path: "/a", ACL: OpenACLUnsafe})
		wantCode(t, err, NodeExists)
		_, _, err = s.Write(ctx, c, Op{Kind: OpCreate, Path: "/nope/b", ACL: OpenACLUnsafe})
		wantCode(t, err, NoNode)
		_, _, err = s.Write(ctx, c, Op{Kind: OpCreate, Path: "/a/", ACL: OpenACLUnsafe})
		wantCode(t, err, BadArguments)
		_, _, err = s.Write(ctx, c, Op{Kind: OpCreate, Path: "/z", ACL: nil})
		wantCode(t, err, InvalidACL)
		// A proxy's failed writes are decided, so logged (as ZooKeeper logs an error transaction
		// for each): only a server's take no zxid.
		if s.LastZxid() != z0+1 && s.cfg.Waker == nil {
			t.Fatalf("failed writes took zxids: %d", s.LastZxid())
		}

		set, zs, err := s.Write(ctx, c, Op{Kind: OpSetData, Path: "/a", Data: []byte("yy"), Version: 0})
		if err != nil || set.Stat.Version != 1 || set.Stat.Mzxid != zs || set.Stat.Czxid != z0+1 || set.Stat.DataLength != 2 {
			t.Fatalf("set: %+v %v", set, err)
		}
		_, _, err = s.Write(ctx, c, Op{Kind: OpSetData, Path: "/a", Data: []byte("z"), Version: 0})
		wantCode(t, err, BadVersion)

		seq := mustCreate(t, s, c, "/a/s-", "", PersistentSequential)
		eph := mustCreate(t, s, c, "/a/e", "", Ephemeral)
		seq2 := mustCreate(t, s, c, "/a/s-", "", EphemeralSequential)
		if seq.Path != "/a/s-0000000000" || seq2.Path != "/a/s-0000000002" {
			t.Fatalf("sequential names %q %q", seq.Path, seq2.Path)
		}
		if eph.Stat.EphemeralOwner != c.Session || seq.Stat.EphemeralOwner != 0 {
			t.Fatalf("owners: %+v %+v", eph.Stat, seq.Stat)
		}
		_, _, err = s.Write(ctx, c, Op{Kind: OpCreate, Path: "/a/e/x", ACL: OpenACLUnsafe})
		wantCode(t, err, NoChildrenForEphemerals)
		var kids []string
		var st Stat
		s.View(func(v View) { kids, st, err = v.Children(c, "/a", false) })
		if err != nil || !reflect.DeepEqual(kids, []string{"e", "s-0000000000", "s-0000000002"}) || st.NumChildren != 3 || st.Cversion != 3 || st.Pzxid != seq2.Stat.Czxid {
			t.Fatalf("children %v %+v %v", kids, st, err)
		}
		_, _, err = s.Write(ctx, c, Op{Kind: OpDelete, Path: "/a", Version: -1})
		wantCode(t, err, NotEmpty)
		_, _, err = s.Write(ctx, c, Op{Kind: OpDelete, Path: "/a/s-0000000000", Version: 3})
		wantCode(t, err, BadVersion)
		_, zd, err := s.Write(ctx, c, Op{Kind: OpDelete, Path: "/a/s-0000000000", Version: 0})
		if err != nil {
			t.Fatal(err)
		}
		_, st, _ = get(s, c, "/a")
		if st.Cversion != 4 || st.Pzxid != zd || st.Version != 1 || st.Mzxid != zs {
			t.Fatalf("parent after delete: %+v", st)
		}
		_, _, err = get(s, c, "/a/s-0000000000")
		wantCode(t, err, NoNode)
		var rootKids []string
		s.View(func(v View) { rootKids, _, _ = v.Children(Caller{}, "/", false) })
		if !reflect.DeepEqual(rootKids, []string{"a", "zookeeper"}) {
			t.Fatalf("root: %v", rootKids)
		}
	})
}

func TestMultiIsAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		c := newSession(t, s, time.Second)
		mustCreate(t, s, c, "/m", "0", Persistent)
		before := s.LastZxid()
		res, _, err := s.Multi(ctx, c, []Op{
			{Kind: OpCreate, Path: "/m/a", ACL: OpenACLUnsafe},
			{Kind: OpSetData, Path: "/m", Data: []byte("1"), Version: 0},
			{Kind: OpCheck, Path: "/m", Version: 0}, // fails: the set above made it 1
			{Kind: OpDelete, Path: "/m/a", Version: -1},
		})
		wantCode(t, err, BadVersion)
		want := []Code{OK, OK, BadVersion, RuntimeInconsistency}
		for i, r := range res {
			if r.Err != want[i] {
				t.Fatalf("result %d: %v, want %v", i, r.Err, want[i])
			}
		}
		if s.LastZxid() != before && s.cfg.Waker == nil {
			t.Fatal("a failed multi took a zxid")
		}
		if _, _, err := get(s, c, "/m/a"); CodeOf(err) != NoNode {
			t.Fatalf("failed multi left /m/a: %v", err)
		}
		res, zxid, err := s.Multi(ctx, c, []Op{
			{Kind: OpCreate, Path: "/m/q-", ACL: OpenACLUnsafe, Mode: PersistentSequential},
			{Kind: OpCreate, Path: "/m/q-", ACL: OpenACLUnsafe, Mode: PersistentSequential},
			{Kind: OpSetData, Path: "/m", Data: []byte("2"), Version: 0},
			{Kind: OpCheck, Path: "/m", Version: 1},
		})
		next := before + 1
		if s.cfg.Waker != nil {
			next++ // after the failed multi's logged decision
		}
		if err != nil || res[0].Path != "/m/q-0000000000" || res[1].Path != "/m/q-0000000001" || res[2].Stat.Mzxid != zxid || zxid != next {
			t.Fatalf("multi: %+v %d %v", res, zxid, err)
		}
	})
}

// watches records one session's events in order, with the replies it observed interleaved.
type watches struct {
	mu  sync.Mutex
	log []string
}

func (w *watches) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, s)
}

func (w *watches) events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

func attach(t *testing.T, s *Service, c Caller) (Caller, *watches, chan struct{}) {
	t.Helper()
	ws := &watches{}
	closed := make(chan struct{}, 1)
	var passwd []byte
	s.mu.RLock()
	passwd = s.t.sessions[c.Session].passwd
	s.mu.RUnlock()
	w, _, err := s.Attach(context.Background(), c.Session, passwd, 0,
		func(ev Event) { ws.add(fmt.Sprintf("%d %s", ev.Type, ev.Path)) },
		func() { closed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	c.W = w
	return c, ws, closed
}

func TestWatchesFireOnceInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		tbl := open()
		s := newService(t, tbl)
		c, ws, _ := attach(t, s, newSession(t, s, time.Second))
		other := newSession(t, s, time.Second)
		s.View(func(v View) {
			_, err := v.Exists(c, "/w", true)
			wantCode(t, err, NoNode)
		})
		mustCreate(t, s, other, "/w", "a", Persistent)
		s.View(func(v View) {
			v.Get(c, "/w", true)
			v.Children(c, "/w", true)
		})
		mustCreate(t, s, other, "/w/k", "", Persistent)
		s.Write(ctx, other, Op{Kind: OpSetData, Path: "/w", Data: []byte("b"), Version: -1})
		s.Write(ctx, other, Op{Kind: OpSetData, Path: "/w", Data: []byte("c"), Version: -1}) // fired already: no event
		want := []string{"1 /w", "4 /w", "3 /w"}
		if got := ws.events(); !reflect.DeepEqual(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}

		// A second Service's write reaches this session's watch when this Service applies it,
		// and the event is queued before any reply that shows the new data.
		s2 := newService(t, open())
		s.View(func(v View) {
			if _, _, err := v.Get(c, "/w", true); err != nil {
				t.Fatal(err)
			}
		})
		if _, _, err := s2.Write(ctx, anyone(t, s2), Op{Kind: OpSetData, Path: "/w", Data: []byte("d"), Version: -1}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var data []byte
			s.View(func(v View) {
				data, _, _ = v.Get(c, "/w", false)
				ws.add("read " + string(data))
			})
			if string(data) == "d" || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		got := ws.events()
		i := len(got) - 1
		if got[i] != "read d" || got[i-1] != "3 /w" {
			t.Fatalf("the read of the new data did not follow its event: %v", got[max(0, i-3):])
		}
	})
}

// Persistent and recursive watches (addWatch) report every change they cover and stay set;
// a watcher hears an event once however many of its watches it triggers, never an event about a
// node it may not READ, and RemoveWatches takes them away by type.
func TestPersistentAndRecursiveWatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		c, ws, _ := attach(t, s, newSession(t, s, time.Hour))
		id, _ := DigestID("alice:secret")
		alice := anyone(t, s, ID{Scheme: "digest", ID: id})
		write := func(op Op) {
			t.Helper()
			if op.Kind == OpCreate && op.ACL == nil {
				op.ACL = OpenACLUnsafe
			}
			if _, _, err := s.Write(ctx, alice, op); err != nil {
				t.Fatal(err)
			}
		}
		expect := func(step string, want ...string) {
			t.Helper()
			if got := ws.events(); !slices.Equal(got, want) {
				t.Fatalf("%s: events %q, want %q", step, got, want)
			}
			ws.mu.Lock()
			ws.log = nil
			ws.mu.Unlock()
		}
		wantCode(t, s.AddWatch(c, "/r", PersistentRecursiveWatch), OK) // before /r exists
		wantCode(t, s.AddWatch(c, "/r/p", PersistentWatch), OK)
		wantCode(t, s.AddWatch(c, "r", PersistentWatch), BadArguments)
		wantCode(t, s.AddWatch(c, "/r", WatchMode(7)), BadArguments)
		write(Op{Kind: OpCreate, Path: "/r"})
		write(Op{Kind: OpCreate, Path: "/r/p"})
		write(Op{Kind: OpCreate, Path: "/r/p/k"})
		write(Op{Kind: OpSetData, Path: "/r/p", Data: []byte("x"), Version: -1})
		write(Op{Kind: OpDelete, Path: "/r/p/k", Version: -1})
		expect("persistent", "1 /r", "1 /r/p", "1 /r/p/k", "4 /r/p", "3 /r/p", "2 /r/p/k", "4 /r/p")

		// A one-time watch on a persistently watched path: one event, and only the one-time watch goes.
		s.View(func(v View) { v.Get(c, "/r/p", true) })
		write(Op{Kind: OpSetData, Path: "/r/p", Data: []byte("y"), Version: -1})
		write(Op{Kind: OpSetData, Path: "/r/p", Data: []byte("z"), Version: -1})
		expect("with a one-time watch", "3 /r/p", "3 /r/p")

		// alice's node is hidden from a recursive watch whose session may not read it, and a
		// one-time watch on a node that became unreadable is used up silently.
		alicesOnly := []ACL{{Perms: PermAll, ID: ID{"auth", ""}}}
		write(Op{Kind: OpCreate, Path: "/r/secret", ACL: alicesOnly})
		s.View(func(v View) { v.Get(c, "/r", true) })
		write(Op{Kind: OpSetACL, Path: "/r", ACL: alicesOnly, Version: -1})
		write(Op{Kind: OpSetData, Path: "/r", Version: -1})
		write(Op{Kind: OpSetACL, Path: "/r", ACL: OpenACLUnsafe, Version: -1})
		write(Op{Kind: OpSetData, Path: "/r/secret", Version: -1})
		write(Op{Kind: OpCreate, Path: "/r/open"})
		expect("filtered by ACL", "1 /r/open")
		s.Authenticate(c.W, []ID{{Scheme: "digest", ID: id}})
		write(Op{Kind: OpSetData, Path: "/r/secret", Version: -1})
		expect("once authenticated", "3 /r/secret")

		// checkWatches keeps, removeWatches removes; NoWatcher when there is none of the type.
		wantCode(t, s.RemoveWatches(c, "/r", PersistentRecursiveWatches, false), OK)
		wantCode(t, s.RemoveWatches(c, "/r", DataWatches, false), NoWatcher)
		wantCode(t, s.RemoveWatches(c, "/r/p", PersistentRecursiveWatches, true), NoWatcher)
		wantCode(t, s.RemoveWatches(c, "/r", PersistentRecursiveWatches, true), OK)
		wantCode(t, s.RemoveWatches(c, "/r", AnyWatches, true), NoWatcher)
		wantCode(t, s.RemoveWatches(c, "/r", WatcherType(9), true), BadArguments)
		write(Op{Kind: OpSetData, Path: "/r/p", Version: -1})
		write(Op{Kind: OpCreate, Path: "/r/p/j"})
		expect("the recursive watch removed", "3 /r/p", "4 /r/p")
		wantCode(t, s.RemoveWatches(c, "/r/p", AnyWatches, true), OK)
		write(Op{Kind: OpSetData, Path: "/r/p", Version: -1})
		expect("all removed")

		// Set again after a reconnect: a new attachment of the session gets them back.
		s.SetWatches(c.W, s.LastZxid(), WatchLists{Persistent: []string{"/r/p"}, Recursive: []string{"/r/p/j"}})
		write(Op{Kind: OpDelete, Path: "/r/p/j", Version: -1})
		expect("set again", "2 /r/p/j", "4 /r/p")
	})
}

// Emptied containers and expired TTL nodes go in a housekeeping pass (the heartbeat's). Each
// deletion checks again at its own zxid that the node still qualifies, so a child created or a
// TTL node modified after the pass looked keeps the node.
func TestContainersAndTTLNodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		reaper, err := New(ctx, open(), Config{Tick: -1, ContainerCheck: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		defer reaper.Close()
		c := anyone(t, s)
		create := func(p string, mode Mode, ttl int64) (Result, error) {
			r, _, err := s.Write(ctx, c, Op{Kind: OpCreate, Path: p, ACL: OpenACLUnsafe, Mode: mode, TTL: ttl})
			return r, err
		}
		for _, bad := range []struct {
			mode Mode
			ttl  int64
		}{{PersistentWithTTL, 0}, {PersistentWithTTL, MaxTTL + 1}, {Persistent, 10}, {Container, 10}, {Mode(9), 0}, {Mode(-1), 0}} {
			_, err := create("/bad", bad.mode, bad.ttl)
			wantCode(t, err, BadArguments)
		}
		for _, n := range []struct {
			p    string
			mode Mode
			ttl  int64
		}{
			{"/box", Container, 0}, {"/never", Container, 0}, {"/full", Container, 0},
			{"/ttl", PersistentWithTTL, 1}, {"/ttl-fresh", PersistentWithTTL, time.Hour.Milliseconds()},
		} {
			r, err := create(n.p, n.mode, n.ttl)
			if err != nil {
				t.Fatal(err)
			}
			if r.Stat.EphemeralOwner != 0 {
				t.Fatalf("%s shows ephemeralOwner %#x; ZooKeeper shows 0", n.p, r.Stat.EphemeralOwner)
			}
		}
		// A TTL node with a child, made in one transaction: the service's own housekeeping may
		// run at any moment, and would take the node, expired at once, before a later child.
		if _, _, err := s.Multi(ctx, c, []Op{{Kind: OpCreate, Path: "/ttl-parent", ACL: OpenACLUnsafe, Mode: PersistentWithTTL, TTL: 1},
			{Kind: OpCreate, Path: "/ttl-parent/kid", ACL: OpenACLUnsafe, Mode: Persistent}}); err != nil {
			t.Fatal(err)
		}
		if r, err := create("/seq-", PersistentSequentialWithTTL, 1); err != nil || r.Path != "/seq-0000000006" {
			t.Fatalf("a sequential TTL node: %+v %v", r, err)
		}
		mustCreate(t, s, c, "/box/kid", "", Persistent)
		mustCreate(t, s, c, "/full/kid", "", Persistent)
		if _, _, err := s.Write(ctx, c, Op{Kind: OpDelete, Path: "/box/kid", Version: -1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // past the 1 ms TTLs
		if err := reaper.Tend(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var kids []string
		s.View(func(v View) { kids, _, _ = v.Children(c, "/", false) })
		if want := []string{"full", "never", "ttl-fresh", "ttl-parent", "zookeeper"}; !slices.Equal(kids, want) {
			t.Fatalf("after the pass: %v, want %v", kids, want)
		}

		// A deletion decided on a stale look applies only if the node still qualifies at its zxid.
		mustCreate(t, s, c, "/again", "", Container)
		mustCreate(t, s, c, "/again/kid", "", Persistent)
		for p, want := range map[string]Code{
			"/again": NotEmpty, "/never": BadVersion, "/ttl-fresh": BadVersion, "/full/kid": BadVersion, "/gone": NoNode,
		} {
			_, _, _, err := reaper.write(ctx, &txn{Ops: []Op{{Kind: opDeleteContainer, Path: p, Version: -1}}})
			wantCode(t, err, want)
		}
	})
}

func TestEphemeralsGoWithTheirSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		watcher, ws, _ := attach(t, s, newSession(t, s, time.Hour))
		mustCreate(t, s, watcher, "/e", "", Persistent)

		closing := newSession(t, s, time.Hour)
		mustCreate(t, s, closing, "/e/c1", "", Ephemeral)
		mustCreate(t, s, closing, "/e/c2", "", EphemeralSequential)
		s.View(func(v View) { v.Children(watcher, "/e", true) })
		if err := s.CloseSession(ctx, closing.Session); err != nil {
			t.Fatal(err)
		}
		var kids []string
		var st Stat
		s.View(func(v View) { kids, st, _ = v.Children(watcher, "/e", true) })
		// Both ephemerals went in one transaction: one zxid, one child event.
		if len(kids) != 0 || st.Pzxid != s.LastZxid() || st.Cversion != 4 {
			t.Fatalf("after close: %v %+v, last zxid %d", kids, st, s.LastZxid())
		}
		_, _, err := s.Write(ctx, closing, Op{Kind: OpCreate, Path: "/e/late", ACL: OpenACLUnsafe, Mode: Ephemeral})
		wantCode(t, err, SessionExpired)

		// No heartbeat: the expirer fences and closes the session once its timeout has passed.
		const timeout = 300 * time.Millisecond
		before := time.Now() // its last heartbeat is later
		expiring, _, expired := attach(t, s, newSession(t, s, timeout))
		mustCreate(t, s, expiring, "/e/x", "", Ephemeral)
		mustCreate(t, s, expiring, "/e/y", "", Ephemeral)
		select {
		case <-expired:
		case <-time.After(10 * time.Second):
			t.Fatal("the session did not expire")
		}
		if waited := time.Since(before); waited < timeout {
			t.Fatalf("the session expired %v after its last heartbeat, before its timeout %v", waited, timeout)
		}
		s.View(func(v View) { kids, _, _ = v.Children(watcher, "/e", false) })
		if len(kids) != 0 {
			t.Fatalf("after expiry: %v", kids)
		}
		if err := s.Touch(ctx, expiring.Session); CodeOf(err) != SessionExpired {
			t.Fatalf("touch after expiry: %v", err)
		}
		if got := ws.events(); !reflect.DeepEqual(got, []string{"4 /e", "4 /e"}) {
			t.Fatalf("events %v", got)
		}

		// Heartbeats keep a short session alive past its timeout.
		alive := newSession(t, s, 2*timeout)
		for end := time.Now().Add(4 * timeout); time.Now().Before(end); time.Sleep(timeout / 10) {
			if err := s.Touch(ctx, alive.Session); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestDigestACL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s := newService(t, open())
		id, _ := DigestID("alice:secret")
		alice := anyone(t, s, ID{Scheme: "digest", ID: id})
		anon := anyone(t, s)
		if _, _, err := s.Write(ctx, alice, Op{Kind: OpCreate, Path: "/p", Data: []byte("x"), ACL: []ACL{{Perms: PermAll, ID: ID{"auth", ""}}}}); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Write(ctx, anon, Op{Kind: OpCreate, Path: "/q", ACL: []ACL{{Perms: PermAll, ID: ID{"auth", ""}}}})
		wantCode(t, err, InvalidACL)
		_, _, err = get(s, anon, "/p")
		wantCode(t, err, NoAuth)
		_, _, err = s.Write(ctx, anon, Op{Kind: OpSetData, Path: "/p", Version: -1})
		wantCode(t, err, NoAuth)
		_, _, err = s.Write(ctx, anon, Op{Kind: OpCreate, Path: "/p/c", ACL: OpenACLUnsafe})
		wantCode(t, err, NoAuth)
		if data, _, err := get(s, alice, "/p"); err != nil || string(data) != "x" {
			t.Fatalf("alice: %q %v", data, err)
		}
		// Read-only for everyone, all for alice.
		r, _, err := s.Write(ctx, alice, Op{Kind: OpSetACL, Path: "/p", Version: 0, ACL: []ACL{{Perms: PermRead, ID: ID{"world", "anyone"}}, {Perms: PermAll, ID: ID{"digest", id}}}})
		if err != nil || r.Stat.Aversion != 1 {
			t.Fatalf("setACL: %+v %v", r, err)
		}
		if _, _, err := get(s, anon, "/p"); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.Write(ctx, anon, Op{Kind: OpDelete, Path: "/p", Version: -1}) // DELETE is on the parent: open
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestLargeDataSpansRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		tbl := open()
		s := newService(t, tbl)
		big := bytes.Repeat([]byte("0123456789abcdef"), MaxData/16)
		big[7] = 'X'
		if _, _, err := s.Write(ctx, anyone(t, s), Op{Kind: OpCreate, Path: "/big", Data: big, ACL: OpenACLUnsafe}); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Write(ctx, anyone(t, s), Op{Kind: OpCreate, Path: "/bigger", Data: append(big, 0), ACL: OpenACLUnsafe})
		wantCode(t, err, BadArguments)
		// A replica built from the log alone reads the entry back from its parts.
		s2 := newService(t, open())
		data, st, err := get(s2, Caller{}, "/big")
		if err != nil || !bytes.Equal(data, big) || st.DataLength != MaxData {
			t.Fatalf("read back %d bytes (%v), want %d", len(data), err, len(big))
		}
		rows, err := tbl.Scan(ctx, blobPartition, store.ScanOptions{})
		if err != nil || len(rows) < 2 {
			t.Fatalf("the entry was not split: %d parts, %v", len(rows), err)
		}
		// An append that loses its zxid leaves no parts behind.
		won, err := s.appendTxn(ctx, 1, &txn{Nonce: "loser", Ops: []Op{{Kind: OpSetData, Path: "/big", Data: big, Version: -1}}})
		if err != nil || won {
			t.Fatalf("appending at a taken zxid: won=%v %v", won, err)
		}
		after, err := tbl.Scan(ctx, blobPartition, store.ScanOptions{})
		if err != nil || len(after) != len(rows) {
			t.Fatalf("%d parts after a lost append, %d before (%v)", len(after), len(rows), err)
		}
	})
}

func TestReplicasConverge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s1, s2 := newService(t, open()), newService(t, open())
		c := newSession(t, s1, time.Hour)
		mustCreate(t, s1, c, "/r", "1", Persistent)
		mustCreate(t, s2, anyone(t, s2), "/r/x", "2", Persistent) // s2 catches up before validating
		mustCreate(t, s1, c, "/r/e", "", Ephemeral)
		if _, err := s2.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		s3 := newService(t, open())
		if err := s1.CloseSession(ctx, c.Session); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Service{s1, s2, s3} {
			if _, err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := dump(s1)
		for i, s := range []*Service{s2, s3} {
			if got := dump(s); got != want {
				t.Fatalf("replica %d differs:\n%s\nwant\n%s", i+2, got, want)
			}
		}
	})
}

func dump(s *Service) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var b strings.Builder
	fmt.Fprintf(&b, "zxid %d sessions %d\n", s.t.zxid, len(s.t.sessions))
	var walk func(p string)
	walk = func(p string) {
		n := s.t.nodes[p]
		data := fmt.Sprintf("%q", n.data)
		if len(n.data) > 64 {
			data = fmt.Sprintf("<%d bytes, sha256 %x>", len(n.data), sha256.Sum256(n.data))
		}
		fmt.Fprintf(&b, "%s %s %+v\n", p, data, n.fullStat())
		kids := make([]string, 0)
		for k := range n.children {
			kids = append(kids, k)
		}
		sort.Strings(kids)
		for _, k := range kids {
			walk(strings.TrimSuffix(p, "/") + "/" + k)
		}
	}
	walk("/")
	return b.String()
}

func TestBrokenLogFailsClosed(t *testing.T) {
	ctx := context.Background()
	tbl, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	// An entry that cannot apply (deleting a node that was never created).
	bad := []byte(`{"n":"x","t":1,"o":[{"k":2,"p":"/ghost","v":-1}]}`)
	if err := tbl.Put(ctx, txnKey(1), store.Attrs{"t": bad}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, tbl, fast); err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Fatalf("New on a broken log: %v", err)
	}
}
