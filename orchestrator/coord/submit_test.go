package coord

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func createOp(p string, mode Mode) Op {
	return Op{Kind: OpCreate, Path: p, ACL: OpenACLUnsafe, Mode: mode}
}

// A sequenced request is decided once: a redelivery, on any server, gets the first answer (a
// failure included, whatever the state has become), a request ahead of its predecessor waits,
// and a snapshot keeps the answers.
func TestSubmitDecidesOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		s1, s2 := newServer(t, open(), Config{}), newServer(t, open(), Config{})
		c := newSession(t, s1, time.Hour)
		first, err := s1.Submit(ctx, c, 1, "r1", []Op{createOp("/a", Persistent)})
		if err != nil || first.Code != OK || first.Results[0].Path != "/a" {
			t.Fatalf("request 1: %+v, %v", first, err)
		}
		z := s1.LastZxid()
		for _, s := range []*Service{s1, s2} {
			again, err := s.Submit(ctx, c, 1, "r1", []Op{createOp("/a", Persistent)})
			if err != nil || !reflect.DeepEqual(again, first) {
				t.Fatalf("request 1 again: %+v, %v; want %+v", again, err, first)
			}
		}
		if s1.LastZxid() != z {
			t.Fatalf("a redelivery took zxid %d", s1.LastZxid())
		}
		if _, err := s1.Submit(ctx, c, 3, "r3", []Op{createOp("/c", Persistent)}); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("request 3 before 2: %v, want ErrOutOfOrder", err)
		}
		bad, err := s2.Submit(ctx, c, 2, "r2", []Op{{Kind: OpSetData, Path: "/a", Data: []byte("x"), Version: 5}})
		if err != nil || bad.Code != BadVersion || bad.Zxid == 0 {
			t.Fatalf("request 2: %+v, %v; want a logged BadVersion", bad, err)
		}
		// The state changes so the same request would now apply: its answer stays the failure.
		for range 5 {
			mustCreate(t, s1, Caller{}, "/a/x-", "", PersistentSequential)
			if _, _, err := s1.Write(ctx, Caller{}, Op{Kind: OpSetData, Path: "/a", Data: []byte("y"), Version: -1}); err != nil {
				t.Fatal(err)
			}
		}
		if again, err := s1.Submit(ctx, c, 2, "r2", []Op{{Kind: OpSetData, Path: "/a", Data: []byte("x"), Version: 5}}); err != nil || !reflect.DeepEqual(again, bad) {
			t.Fatalf("request 2 again: %+v, %v; want %+v", again, err, bad)
		}
		if out, err := s1.Submit(ctx, c, 3, "r3", []Op{createOp("/c", Persistent)}); err != nil || out.Code != OK {
			t.Fatalf("request 3: %+v, %v", out, err)
		}
		if _, err := s1.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s1.Compact(ctx, 0); err != nil {
			t.Fatal(err)
		}
		s3 := newServer(t, open(), Config{})
		if again, err := s3.Submit(ctx, c, 2, "r2", nil); err == nil || CodeOf(err) != BadArguments {
			t.Fatalf("a request without ops: %v", err)
		} else if again, err = s3.Submit(ctx, c, 2, "r2", []Op{createOp("/z", Persistent)}); err != nil || !reflect.DeepEqual(again, bad) {
			t.Fatalf("request 2 on a server started from the snapshot: %+v, %v; want %+v", again, err, bad)
		}
	})
}

// Deliveries of one session's requests racing on two servers, each request delivered four
// times, out of order and concurrently: every request applies exactly once, in order, and
// every delivery of it gets the same answer.
func TestSubmitUnderDuplicatedDeliveries(t *testing.T) {
	ctx := context.Background()
	url := "mem://coord-submit-" + randomHex(4)
	var servers []*Service
	open := opener(t, url)
	for range 2 {
		servers = append(servers, newServer(t, open(), Config{}))
	}
	c := newSession(t, servers[0], time.Hour)
	mustCreate(t, servers[0], Caller{}, "/q", "", Persistent)
	const requests, copies = 20, 4
	answers := make([][]Outcome, requests+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for d := range copies {
		wg.Go(func() {
			for seq := int64(1); seq <= requests; seq++ {
				srv := servers[(d+int(seq))%2]
				for {
					out, err := srv.Submit(ctx, c, seq, fmt.Sprint("r", seq), []Op{createOp("/q/r-", PersistentSequential), {Kind: OpCheck, Path: "/q", Version: -1}})
					if errors.Is(err, ErrOutOfOrder) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("request %d: %v", seq, err)
						return
					}
					mu.Lock()
					answers[seq] = append(answers[seq], out)
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	var kids []string
	if _, err := servers[1].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	servers[1].View(func(v View) { kids, _, _ = v.Children(Caller{}, "/q", false) })
	if len(kids) != requests {
		t.Fatalf("%d nodes created by %d requests delivered %d times each: %v", len(kids), requests, copies, kids)
	}
	for seq := 1; seq <= requests; seq++ {
		want := fmt.Sprintf("/q/r-%010d", seq-1)
		for _, a := range answers[seq] {
			if !reflect.DeepEqual(a, answers[seq][0]) || a.Results[0].Path != want {
				t.Fatalf("request %d: answers %+v, want all %s", seq, answers[seq], want)
			}
		}
	}
}

// A writer that dies at any store operation of a sequenced request leaves it decided or not;
// submitting it again on another server applies it exactly once.
func TestSubmitRetriedAfterACrashAppliesOnce(t *testing.T) {
	ctx := context.Background()
	cfg := Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: time.Hour, SnapshotEvery: -1}
	req := []Op{createOp("/q/r-", PersistentSequential)}
	for at := 1; ; at++ {
		reached := false
		for _, after := range []bool{false, true} {
			url := fmt.Sprintf("mem://coord-submit-crash-%d-%v-%s", at, after, randomHex(4))
			base, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			d := &crashingDriver{Driver: base.Driver()}
			writer, err := New(ctx, store.NewTable(d, url), cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newSession(t, writer, time.Hour)
			mustCreate(t, writer, Caller{}, "/q", "", Persistent)
			d.mu.Lock()
			d.at, d.after = d.ops+at, after // the process dies at the request's at-th operation
			d.mu.Unlock()
			_, err = writer.Submit(ctx, c, 1, "r1", req)
			writer.Close()
			d.mu.Lock()
			reached = reached || d.ops >= d.at
			d.mu.Unlock()
			retry, err := New(ctx, base, cfg)
			if err != nil {
				t.Fatalf("crash at op %d (after=%v): a new server cannot start: %v", at, after, err)
			}
			out, err := retry.Submit(ctx, c, 1, "r1", req)
			var kids []string
			retry.View(func(v View) { kids, _, _ = v.Children(Caller{}, "/q", false) })
			retry.Close()
			if err != nil || out.Code != OK || len(kids) != 1 || out.Results[0].Path != "/q/"+kids[0] {
				t.Fatalf("crash at op %d (after=%v), submitted again: %+v, %v; children %v", at, after, out, err, kids)
			}
		}
		if !reached {
			t.Logf("a sequenced request's %d store operations, each crashed before and after its effect", at-1)
			return
		}
	}
}
