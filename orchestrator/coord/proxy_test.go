package coord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// unruly is a queue at its worst, between proxies and writers: every wake-up is delivered one to
// three times, each copy after its own random delay, to a random writer, concurrently, so
// copies overtake one another and the wake-ups of later requests arrive first; a copy whose
// writer fails is delivered again to another.
type unruly struct {
	t       *testing.T
	writers []*Service
	mu      sync.Mutex
	rng     *rand.Rand
	wg      sync.WaitGroup
	errs    chan error
}

func (u *unruly) Wake(_ context.Context, session int64) error {
	u.mu.Lock()
	copies := 1 + u.rng.IntN(3)
	type delivery struct {
		w     *Service
		delay time.Duration
	}
	ds := make([]delivery, copies)
	for i := range ds {
		ds[i] = delivery{u.writers[u.rng.IntN(len(u.writers))], time.Duration(u.rng.IntN(4000)) * time.Microsecond}
	}
	u.mu.Unlock()
	for _, d := range ds {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			time.Sleep(d.delay)
			// A failed delivery is delivered again, to any writer, as a queue does after the
			// message's lease: a writer whose store died fails every time, the others decide.
			w, err := d.w, error(nil)
			for range 50 {
				if err = w.Decide(context.Background(), session); err == nil {
					return
				}
				time.Sleep(time.Millisecond)
				u.mu.Lock()
				w = u.writers[u.rng.IntN(len(u.writers))]
				u.mu.Unlock()
			}
			select {
			case u.errs <- err:
			default:
			}
		}()
	}
	return nil
}

func newUnruly(t *testing.T, writers ...*Service) *unruly {
	u := &unruly{t: t, writers: writers, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)), errs: make(chan error, 1)}
	t.Cleanup(func() {
		u.wg.Wait()
		select {
		case err := <-u.errs:
			t.Errorf("a writer failed: %v", err)
		default:
		}
	})
	return u
}

// newProxy is a proxy on tbl whose writes two writers on tbl decide through an unruly queue.
func newProxy(t *testing.T, tbl *store.Table, cfg Config) *Service {
	t.Helper()
	wcfg := cfg
	wcfg.Tick = -1 // writers run only when woken, as functions do
	var writers []*Service
	for range 2 {
		w, err := New(context.Background(), tbl, wcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		writers = append(writers, w)
	}
	cfg.Waker = newUnruly(t, writers...)
	p, err := New(context.Background(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Two proxies serving one session (a client that moved, its old connection not yet gone) take
// request numbers from one another; every request still applies exactly once and each gets its
// own answer, never the other's.
func TestProxiesShareASession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		proxies := []*Service{newProxy(t, open(), fast), newProxy(t, open(), fast)}
		c := newSession(t, proxies[0], time.Minute)
		mustCreate(t, proxies[0], c, "/shared", "", Persistent)
		const each = 15
		var wg sync.WaitGroup
		for i, p := range proxies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range each {
					path := fmt.Sprintf("/shared/p%d-%02d", i, k)
					res, _, err := p.Write(ctx, c, Op{Kind: OpCreate, Path: path, Data: []byte(path), ACL: OpenACLUnsafe})
					if err != nil || res.Path != path {
						t.Errorf("proxy %d, create %s: %+v, %v", i, path, res, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		var kids []string
		if _, err := proxies[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		proxies[1].View(func(v View) { kids, _, _ = v.Children(Caller{}, "/shared", false) })
		if len(kids) != 2*each {
			t.Fatalf("%d children, want %d: %v", len(kids), 2*each, kids)
		}
		// Every decided request's row goes: nothing is decided twice, nothing is left over. A
		// writer deletes a row after the decision the proxy answered from, so the last ones may
		// still be going when the creates return.
		if left := awaitRequestRowsGone(t, open(), c.Session, openRequest); len(left) != 0 {
			t.Errorf("request rows %v left 10 s after their decisions", left)
		}
		// The close is answered once the log has it; the writer drops the session's rows after.
		if err := proxies[1].CloseSession(ctx, c.Session); err != nil {
			t.Fatal(err)
		}
		if left := awaitRequestRowsGone(t, open(), c.Session, ""); len(left) != 0 {
			t.Errorf("request rows %v left 10 s after the close", left)
		}
	})
}

// awaitRequestRowsGone waits up to 10 s for a session's request rows (but the one sorted under
// keep) to be deleted, and returns the sort keys of those left.
func awaitRequestRowsGone(t *testing.T, tbl *store.Table, session int64, keep string) []string {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rows, err := tbl.Scan(context.Background(), requestPartition(session), store.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, r := range rows {
			if r.Key.Sort != keep {
				left = append(left, r.Key.Sort)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// A writer that dies at any store operation of Decide leaves the request decided or not; the
// queue's redelivery to another writer applies it exactly once and the proxy gets its answer.
func TestDecideRetriedAfterACrashAppliesOnce(t *testing.T) {
	ctx := context.Background()
	cfg := Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: -1, SnapshotEvery: -1}
	for at := 1; ; at++ {
		reached := false
		for _, after := range []bool{false, true} {
			url := fmt.Sprintf("mem://coord-decide-crash-%d-%v-%s", at, after, randomHex(4))
			base, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			d := &crashingDriver{Driver: base.Driver()}
			crashing, err := New(ctx, store.NewTable(d, url), cfg)
			if err != nil {
				t.Fatal(err)
			}
			retry, err := New(ctx, base, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Each wake-up goes to the writer that crashes, its redelivery to the other.
			waker := wakerFunc(func(ctx context.Context, session int64) error {
				if err := crashing.Decide(ctx, session); err == nil {
					return nil
				}
				return retry.Decide(ctx, session)
			})
			pcfg := cfg
			pcfg.Tick, pcfg.Waker, pcfg.DecideTimeout = time.Hour, waker, 10*time.Second
			p, err := New(ctx, base, pcfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newSession(t, p, time.Hour)
			mustCreate(t, p, c, "/q", "", Persistent)
			d.mu.Lock()
			d.at, d.after = d.ops+at, after // the writer dies at its at-th operation from here
			d.mu.Unlock()
			res, _, err := p.Write(ctx, c, createOp("/q/r-", PersistentSequential))
			d.mu.Lock()
			reached = reached || d.ops >= d.at
			d.mu.Unlock()
			var kids []string
			p.View(func(v View) { kids, _, _ = v.Children(Caller{}, "/q", false) })
			p.Close()
			crashing.Close()
			retry.Close()
			if err != nil || len(kids) != 1 || res.Path != "/q/"+kids[0] {
				t.Fatalf("writer crashed at op %d (after=%v), woken again: %+v, %v; children %v", at, after, res, err, kids)
			}
		}
		if !reached {
			t.Logf("Decide's %d store operations, each crashed before and after its effect", at-1)
			return
		}
	}
}

// manualWriter is a writer that runs only when a test's waker calls it, and the config of a
// proxy for it whose tick never comes: the test drives every step.
func manualWriter(t *testing.T, tbl *store.Table, decideTimeout time.Duration) (*Service, Config) {
	t.Helper()
	cfg := Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: -1, SnapshotEvery: -1}
	w, err := New(context.Background(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	cfg.Tick, cfg.DecideTimeout = time.Hour, decideTimeout
	return w, cfg
}

type wakerFunc func(ctx context.Context, session int64) error

func (f wakerFunc) Wake(ctx context.Context, session int64) error { return f(ctx, session) }

// A session that expires while its request waits in the queue: the request never applies,
// whichever writer sees it and whenever, the proxy answers SessionExpired, and nothing of the
// session is left in the table.
func TestSessionExpiresWithARequestQueued(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		writer, pcfg := manualWriter(t, open(), 5*time.Second)
		expireFirst := false
		pcfg.Waker = wakerFunc(func(ctx context.Context, session int64) error {
			if expireFirst {
				// The expirer (here: a close) wins the race with the request's wake-up.
				if err := writer.CloseSession(ctx, session); err != nil {
					return err
				}
			}
			go writer.Decide(context.Background(), session) // late, and again below
			return nil
		})
		p, err := New(ctx, open(), pcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		c := newSession(t, p, time.Hour)
		mustCreate(t, p, c, "/q", "", Persistent)
		expireFirst = true
		_, _, err = p.Write(ctx, c, createOp("/q/late", Persistent))
		wantCode(t, err, SessionExpired)
		if err := writer.Decide(ctx, c.Session); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var kids []string
		p.View(func(v View) { kids, _, _ = v.Children(Caller{}, "/q", false) })
		if len(kids) != 0 {
			t.Fatalf("the expired session's request applied: %v", kids)
		}
		tbl := open()
		for _, partition := range []string{requestPartition(c.Session), sessionPartition} {
			if rows, err := tbl.Scan(ctx, partition, store.ScanOptions{}); err != nil || len(rows) != 0 {
				t.Fatalf("%s after the expiry: %d rows (%v), want none", partition, len(rows), err)
			}
		}
	})
}

// A request whose proxy died before waking a writer is decided before its session is served
// again: the client, reconnected to another proxy, never reads a state without it and then sees
// it apply.
func TestReattachDecidesWhatTheDeadProxyStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		writer, pcfg := manualWriter(t, open(), 200*time.Millisecond)
		dead := false
		pcfg.Waker = wakerFunc(func(ctx context.Context, session int64) error {
			if dead {
				return errors.New("the proxy died before its wake-up left")
			}
			return writer.Decide(ctx, session)
		})
		dying, err := New(ctx, open(), pcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer dying.Close()
		id, passwd, _, err := dying.OpenSession(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, dying, Caller{Session: id}, "/q", "", Persistent)
		dead = true
		if _, _, err := dying.Write(ctx, Caller{Session: id}, createOp("/q/stored", Persistent)); err == nil {
			t.Fatal("the write succeeded without a wake-up")
		}
		pcfg.Waker = wakerFunc(writer.Decide)
		next, err := New(ctx, open(), pcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		if _, _, err := next.Attach(ctx, id, passwd, 0, func(Event) {}, func() {}); err != nil {
			t.Fatal(err)
		}
		var kids []string
		next.View(func(v View) { kids, _, _ = v.Children(Caller{}, "/q", false) })
		if len(kids) != 1 || kids[0] != "stored" {
			t.Fatalf("after re-attaching: children %v, want the request the dead proxy stored", kids)
		}
	})
}

// A proxy with a bucket starts on a fresh table without writing the table's meta row (its
// identity may not write there): only writers choose the objects' prefix, and the proxy reads a
// large entry's object by the name its log row gives.
func TestProxyWithABucketWritesNoMetaRow(t *testing.T) {
	ctx := context.Background()
	b := buckets(t)["mem"](t)
	url := "mem://coord-proxy-meta-" + randomHex(4)
	tbl, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	cfg := Config{Blobs: b, Tick: -1, SnapshotEvery: -1, BlobSweep: -1}
	pcfg := cfg
	var writer *Service
	pcfg.Tick, pcfg.Waker = time.Hour, wakerFunc(func(ctx context.Context, session int64) error { return writer.Decide(ctx, session) })
	p, err := New(ctx, tbl, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, found, err := tbl.Get(ctx, store.Key{Partition: metaPartition, Sort: "blobs"}); err != nil || found {
		t.Fatalf("the proxy wrote the meta row (found=%v, %v)", found, err)
	}
	if writer, err = New(ctx, tbl, cfg); err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	c := newSession(t, p, time.Hour)
	big := make([]byte, MaxData)
	big[1] = 7
	if _, _, err := p.Write(ctx, c, Op{Kind: OpCreate, Path: "/big", Data: big, ACL: OpenACLUnsafe}); err != nil {
		t.Fatal(err)
	}
	if data, _, err := get(p, c, "/big"); err != nil || len(data) != MaxData || data[1] != 7 {
		t.Fatalf("the proxy reads back %d bytes, %v", len(data), err)
	}
	if objs := objects(t, b); len(objs) != 1 || !strings.HasPrefix(objs[0], writer.objPrefix) {
		t.Fatalf("objects %v, want the writer's one under %s", objs, writer.objPrefix)
	}
}

// Requests too large for a row, from two proxies racing for one session's numbers: a proxy that
// loses a number deletes the parts it wrote for it, so once every request is decided no part is
// left in the table.
func TestLostNumbersLeaveNoParts(t *testing.T) {
	ctx := context.Background()
	url := "mem://coord-lost-parts-" + randomHex(4) + "?max_row_bytes=16384"
	open := opener(t, url)
	proxies := []*Service{newProxy(t, open(), fast), newProxy(t, open(), fast)}
	c := newSession(t, proxies[0], time.Minute)
	mustCreate(t, proxies[0], c, "/big", "", Persistent)
	data := make([]byte, 20<<10) // two parts of a 12 KiB row room
	var wg sync.WaitGroup
	for i, p := range proxies {
		wg.Go(func() {
			for k := range 10 {
				if _, _, err := p.Write(ctx, c, Op{Kind: OpCreate, Path: fmt.Sprintf("/big/p%d-%d", i, k), Data: data, ACL: OpenACLUnsafe}); err != nil {
					t.Errorf("proxy %d, create %d: %v", i, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// A writer deletes a decided request's parts after the decision its proxy returns on.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rows, err := open().Scan(ctx, requestParts, store.ScanOptions{})
		if err == nil && len(rows) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, r := range rows {
				t.Log(r.Key.Sort)
			}
			t.Fatalf("%d request parts left after every request was decided (%v)", len(rows), err)
		}
	}
}

// A writer paused across a session's whole life decides its open after its close: the log has
// the session open again, without a heartbeat row. The expirer closes such an orphan, ephemerals
// and stored requests included, and drops nothing of a live session.
func TestExpirerClosesOrphanedSessions(t *testing.T) {
	ctx := context.Background()
	tbl, err := store.Open(ctx, "mem://coord-orphan-"+randomHex(4))
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	s, err := New(ctx, tbl, Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: -1, SnapshotEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	live := newSession(t, s, time.Hour)
	closed := newSession(t, s, time.Hour)
	if err := s.CloseSession(ctx, closed.Session); err != nil {
		t.Fatal(err)
	}
	// The paused writer's open, decided now.
	if _, _, _, err := s.write(ctx, &txn{Session: closed.Session, Open: &openTxn{Passwd: []byte("p"), TimeoutMs: 3600000}}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, closed, "/orphan-eph", "", Ephemeral)
	if err := s.Tend(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	orphanOpen, liveOpen := s.t.sessions[closed.Session] != nil, s.t.sessions[live.Session] != nil
	s.mu.RUnlock()
	if orphanOpen || !liveOpen {
		t.Fatalf("after the expirer: orphan open %v (want false), live session open %v (want true)", orphanOpen, liveOpen)
	}
	if _, _, err := get(s, live, "/orphan-eph"); CodeOf(err) != NoNode {
		t.Fatalf("the orphan's ephemeral: %v, want NoNode", err)
	}
}
