package coord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// A delivery is what one client receives, in order: a reply (showing the state at zxid) or a
// watch event (of the change at zxid).
type delivery struct {
	event bool
	zxid  int64
	what  string
	start time.Time // replies: when the request was sent
	end   time.Time
	write bool
}

// zClient is a client session of the guarantees test: it moves between servers, and records
// its deliveries as its connection would pass them on.
type zClient struct {
	name    string
	id      int64
	passwd  []byte
	mu      sync.Mutex
	got     []delivery
	watches map[string]bool // paths with a data watch set and not yet fired
	armed   map[string]int  // data watches set per path (a watch already pending is not another)
	fired   map[string]int  // data events per path
	srv     *Service
	w       *Watcher
}

func (c *zClient) notify(ev Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, delivery{event: true, zxid: ev.Zxid, what: fmt.Sprintf("event %d %s", ev.Type, ev.Path), end: time.Now()})
	if ev.Type != NodeChildrenChanged {
		c.fired[ev.Path]++
	}
	delete(c.watches, ev.Path)
}

func (c *zClient) reply(start time.Time, zxid int64, what string, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, delivery{zxid: zxid, what: what, start: start, end: time.Now(), write: write})
}

func (c *zClient) lastSeen() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var z int64
	for _, d := range c.got {
		z = max(z, d.zxid)
	}
	return z
}

// attach moves the client to srv, as a reconnect does: its last seen zxid goes with it and its
// pending watches are set again (firing those whose change it missed).
func (c *zClient) attach(ctx context.Context, srv *Service) error {
	if c.w != nil {
		c.srv.Detach(c.w)
	}
	w, _, err := srv.Attach(ctx, c.id, c.passwd, c.lastSeen(), c.notify, func() {})
	if err != nil {
		return err
	}
	c.srv, c.w = srv, w
	c.mu.Lock()
	var data []string
	for p := range c.watches {
		data = append(data, p)
	}
	c.mu.Unlock()
	srv.SetWatches(w, c.lastSeen(), WatchLists{Data: data})
	return nil
}

func (c *zClient) history() string {
	var b strings.Builder
	for i, d := range c.got {
		fmt.Fprintf(&b, "  %3d zxid %3d %s\n", i, d.zxid, d.what)
	}
	return b.String()
}

func (c *zClient) caller() Caller { return Caller{Session: c.id, W: c.w} }

// ZooKeeper's guarantees (FaaSKeeper's Z1-Z4) on histories of clients that move between three
// servers on one table while one server's store access dies and a session expires:
//   - Z1, Z3: a client's writes take increasing zxids, and no reply shows a state older than
//     an earlier reply did, across servers too (a write's reply may follow events of later
//     transactions: docs/coordination.md);
//   - Z2: a write that finished before another began has the lower zxid;
//   - Z4: a watch event reaches its client before any reply showing its change or later;
//   - watches are one-time; an expired session's ephemerals go at once for every reader.
//
// The same runs through the serverless path: the clients' servers are proxies, their writes
// decided by writers woken through an unruly queue, one of which dies mid-run too, while a
// third writer does the heartbeat's work (expiry, snapshots) on its tick.
func TestZooKeeperGuaranteesAcrossServers(t *testing.T) {
	for _, proxies := range []bool{false, true} {
		t.Run(map[bool]string{false: "servers", true: "proxies"}[proxies], func(t *testing.T) { guarantees(t, proxies) })
	}
}

func guarantees(t *testing.T, proxies bool) {
	ctx := context.Background()
	url := "mem://coord-guarantees-" + randomHex(4)
	// Snapshots every few transactions, compacting behind them, while the clients run.
	cfg := Config{MinSessionTimeout: 300 * time.Millisecond, Tick: 20 * time.Millisecond, SnapshotEvery: 8}
	table := func(d **crashingDriver) *store.Table {
		tbl, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		if d != nil {
			*d = &crashingDriver{Driver: tbl.Driver()}
			tbl = store.NewTable(*d, url)
		}
		return tbl
	}
	start := func(tbl *store.Table, cfg Config) *Service {
		s, err := New(ctx, tbl, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	var dyingWriter *crashingDriver
	if proxies {
		wcfg := cfg
		wcfg.Tick = -1
		writers := []*Service{start(table(nil), wcfg), start(table(&dyingWriter), wcfg)}
		start(table(nil), cfg) // the heartbeat's work
		cfg.Waker = newUnruly(t, writers...)
	}
	var servers []*Service
	var dying *crashingDriver
	for i := range 3 {
		if i == 2 {
			servers = append(servers, start(table(&dying), cfg))
		} else {
			servers = append(servers, start(table(nil), cfg))
		}
	}
	root := anyone(t, servers[0])
	for _, p := range []string{"/k", "/e"} {
		if _, _, err := servers[0].Write(ctx, root, Op{Kind: OpCreate, Path: p, ACL: OpenACLUnsafe}); err != nil {
			t.Fatal(err)
		}
	}
	// The session that expires: two ephemerals, then silence.
	mortal, _, _, err := servers[0].OpenSession(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/e/x", "/e/y"} {
		if _, _, err := servers[0].Write(ctx, Caller{Session: mortal}, Op{Kind: OpCreate, Path: p, ACL: OpenACLUnsafe, Mode: Ephemeral}); err != nil {
			t.Fatal(err)
		}
	}

	const clients, ops = 4, 60
	var all []*zClient
	for i := range clients {
		id, passwd, _, err := servers[0].OpenSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c := &zClient{name: fmt.Sprintf("c%d", i), id: id, passwd: passwd, watches: map[string]bool{}, armed: map[string]int{}, fired: map[string]int{}}
		if err := c.attach(ctx, servers[i%3]); err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		failMu.Lock()
		defer failMu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	for i, c := range all {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := range ops {
				if i == 0 && n == ops/3 {
					dying.mu.Lock()
					dying.at = dying.ops + 1 // server 2's store access dies now
					dying.mu.Unlock()
				}
				if i == 1 && n == ops/2 && dyingWriter != nil {
					dyingWriter.mu.Lock()
					dyingWriter.at = dyingWriter.ops + 1 // so does a writer's
					dyingWriter.mu.Unlock()
				}
				key := fmt.Sprintf("/k/%d", rng.IntN(3))
				start := time.Now()
				var err error
				switch r := rng.IntN(10); {
				case r < 4:
					var zxid int64
					_, zxid, err = c.srv.Write(ctx, c.caller(), Op{Kind: OpSetData, Path: key, Data: []byte(fmt.Sprint(n)), Version: -1})
					if CodeOf(err) == NoNode {
						_, zxid, err = c.srv.Write(ctx, c.caller(), Op{Kind: OpCreate, Path: key, ACL: OpenACLUnsafe})
					}
					if err == nil {
						c.reply(start, zxid, "write "+key, true)
					}
				case r < 8:
					c.srv.View(func(v View) {
						watch := rng.IntN(2) == 0
						_, _, gerr := v.Get(c.caller(), key, watch)
						if gerr == nil && watch {
							c.mu.Lock()
							if !c.watches[key] {
								c.armed[key]++
							}
							c.watches[key] = true
							c.mu.Unlock()
						}
						kids, _, kerr := v.Children(c.caller(), "/e", false)
						if kerr == nil && slices.Contains(kids, "x") != slices.Contains(kids, "y") {
							fail("%s read /e with half of an expired session's ephemerals: %v", c.name, kids)
						}
						c.reply(start, v.Zxid(), "read "+key, false)
					})
				default:
					_, err = c.srv.Sync(ctx)
					if err == nil {
						c.reply(start, c.srv.LastZxid(), "sync", false)
					}
				}
				if err != nil && !errors.Is(err, store.ErrUnavailable) && CodeOf(err) == OK {
					fail("%s: %v", c.name, err)
				}
				// A failed store, or now and then by choice: reconnect to another server.
				if err != nil || rng.IntN(8) == 0 {
					for k := 1; k <= 3; k++ {
						next := servers[(slices.Index(servers, c.srv)+k)%3]
						if next == servers[2] && dying.dead() {
							continue
						}
						if aerr := c.attach(ctx, next); aerr == nil {
							break
						} else if k == 3 {
							fail("%s cannot reconnect: %v", c.name, aerr)
						}
					}
				}
				_ = c.srv.Touch(ctx, c.id)
			}
		})
	}
	wg.Wait()
	// The mortal session expired meanwhile, and its ephemerals went together.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var kids []string
		servers[0].View(func(v View) { kids, _, _ = v.Children(root, "/e", false) })
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the silent session's ephemerals are still there: %v", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, f := range failures {
		t.Error(f)
	}
	var writes []delivery
	for _, c := range all {
		var lastReply, lastWrite int64
		for i, d := range c.got {
			switch {
			case d.event && d.zxid <= lastReply:
				t.Errorf("Z4: %s got %s at zxid %d after a reply showing zxid %d; its deliveries:\n%s", c.name, d.what, d.zxid, lastReply, c.history())
			case !d.event && d.zxid < lastReply:
				t.Errorf("Z1/Z3: %s was answered at zxid %d after zxid %d (delivery %d: %s); its deliveries:\n%s", c.name, d.zxid, lastReply, i, d.what, c.history())
			case d.write && d.zxid <= lastWrite:
				t.Errorf("Z1: %s's write got zxid %d after its write at %d", c.name, d.zxid, lastWrite)
			}
			if !d.event {
				lastReply = max(lastReply, d.zxid)
			}
			if d.write {
				lastWrite = d.zxid
				writes = append(writes, d)
			}
		}
		for p, n := range c.fired {
			if n > c.armed[p] {
				t.Errorf("%s: data watches on %s fired %d times, set %d times: a watch fired twice", c.name, p, n, c.armed[p])
			}
		}
	}
	for _, a := range writes {
		for _, b := range writes {
			if a.end.Before(b.start) && a.zxid >= b.zxid {
				t.Errorf("Z2: %s (zxid %d) finished before %s (zxid %d) began", a.what, a.zxid, b.what, b.zxid)
			}
		}
	}
	if len(writes) < clients*ops/4 {
		t.Fatalf("only %d writes succeeded", len(writes))
	}
	t.Logf("%d writes, %d deliveries checked", len(writes), func() (n int) {
		for _, c := range all {
			n += len(c.got)
		}
		return
	}())
}
