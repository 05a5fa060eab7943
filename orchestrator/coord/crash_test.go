package coord

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
)

// crashingDriver is a server process that dies at its k-th store operation: before the
// operation takes effect, or after it did with its reply lost. Every later operation fails too.
type crashingDriver struct {
	store.Driver
	mu    sync.Mutex
	ops   int
	at    int // 0: never
	after bool
}

var errDied = fmt.Errorf("%w: the process died here", store.ErrUnavailable)

func (d *crashingDriver) do(op func() error) error {
	d.mu.Lock()
	d.ops++
	n, at, after := d.ops, d.at, d.after
	d.mu.Unlock()
	switch {
	case at == 0 || n < at:
		return op()
	case n == at && after:
		op()
		return errDied
	}
	return errDied
}

// dead reports whether the process has died (or is set to die at its next operation).
func (d *crashingDriver) dead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at != 0 && d.ops+1 >= d.at
}

func (d *crashingDriver) Get(ctx context.Context, k store.Key) (a store.Attrs, found bool, err error) {
	err = d.do(func() (e error) { a, found, e = d.Driver.Get(ctx, k); return })
	return
}

func (d *crashingDriver) Update(ctx context.Context, k store.Key, c store.Cond, u store.Update) (r store.UpdateResult, err error) {
	err = d.do(func() (e error) { r, e = d.Driver.Update(ctx, k, c, u); return })
	return
}

func (d *crashingDriver) Scan(ctx context.Context, p string, o store.ScanOptions) (rows []store.Row, err error) {
	err = d.do(func() (e error) { rows, e = d.Driver.Scan(ctx, p, o); return })
	return
}

func (d *crashingDriver) Delete(ctx context.Context, k store.Key, c store.Cond) (ok bool, err error) {
	err = d.do(func() (e error) { ok, e = d.Driver.Delete(ctx, k, c); return })
	return
}

// crashingBlobs is the same process's bucket: its operations are crash points too, counted with
// the store's.
type crashingBlobs struct {
	Blobs
	d *crashingDriver
}

func (b crashingBlobs) Put(ctx context.Context, k string, data []byte) error {
	return b.d.do(func() error { return b.Blobs.Put(ctx, k, data) })
}

func (b crashingBlobs) Get(ctx context.Context, k string) (data []byte, err error) {
	err = b.d.do(func() (e error) { data, e = b.Blobs.Get(ctx, k); return })
	return
}

func (b crashingBlobs) Delete(ctx context.Context, k string) error {
	return b.d.do(func() error { return b.Blobs.Delete(ctx, k) })
}

func (b crashingBlobs) List(ctx context.Context, prefix string, fn func(string) error) error {
	return b.d.do(func() error { return b.Blobs.List(ctx, prefix, fn) })
}

func memBucket(t *testing.T) *coordblob.Bucket {
	b, err := coordblob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// crashStores are the stores the crash enumeration runs on, each with large entries split across
// rows and in a bucket: under -race sqlite takes about a minute, so the default run takes mem and
// `make test-long` both.
var crashStores = flag.String("coord.crash.stores", "mem", "stores (mem,sqlite) TestServerCrashAtEveryStoreOperation runs on")

// The script's steps: every kind of write, a session's life, and an entry split across rows.
type crashStep struct {
	name string
	run  func(ctx context.Context, s *Service, c *Caller) error
}

func writeStep(name string, ops ...Op) crashStep {
	return crashStep{name, func(ctx context.Context, s *Service, c *Caller) error {
		if len(ops) == 1 {
			_, _, err := s.Write(ctx, *c, ops[0])
			return err
		}
		_, _, err := s.Multi(ctx, *c, ops)
		return err
	}}
}

var crashScript = []crashStep{
	{"open session", func(ctx context.Context, s *Service, c *Caller) error {
		id, _, _, err := s.OpenSession(ctx, time.Hour)
		c.Session = id
		return err
	}},
	writeStep("create", Op{Kind: OpCreate, Path: "/a", Data: []byte("1"), ACL: OpenACLUnsafe}),
	writeStep("create ephemeral", Op{Kind: OpCreate, Path: "/a/e", Data: []byte("e"), ACL: OpenACLUnsafe, Mode: Ephemeral}),
	writeStep("create sequential", Op{Kind: OpCreate, Path: "/a/s-", ACL: OpenACLUnsafe, Mode: PersistentSequential}),
	writeStep("set", Op{Kind: OpSetData, Path: "/a", Data: []byte("2"), Version: 0}),
	writeStep("multi", Op{Kind: OpCreate, Path: "/a/b", ACL: OpenACLUnsafe}, Op{Kind: OpSetData, Path: "/a", Data: []byte("3"), Version: 1}),
	// Over one row once encoded: the entry is split across rows, or is an object in the bucket
	// (TestLargeDataSpansRows and TestLargeDataInBucket have 1 MB).
	writeStep("create large", Op{Kind: OpCreate, Path: "/big", Data: bytes.Repeat([]byte("x"), store.PortableMaxRowBytes), ACL: OpenACLUnsafe}),
	writeStep("delete", Op{Kind: OpDelete, Path: "/a/b", Version: -1}),
	writeStep("delete split", Op{Kind: OpDelete, Path: "/big", Version: -1}), // keeps the snapshot small
	// Neither changes the state: a crash in either must leave a table a server starts on.
	{"snapshot", func(ctx context.Context, s *Service, _ *Caller) error {
		_, err := s.Snapshot(ctx)
		return err
	}},
	{"compact", func(ctx context.Context, s *Service, _ *Caller) error {
		_, err := s.Compact(ctx, 1)
		return err
	}},
	writeStep("set after the snapshot", Op{Kind: OpSetData, Path: "/a", Data: []byte("4"), Version: -1}),
	{"close session", func(ctx context.Context, s *Service, c *Caller) error {
		return s.CloseSession(ctx, c.Session)
	}},
}

// normalize drops from a dump what differs between two runs of the script: times and the
// random session id.
var runSpecific = regexp.MustCompile(`Ctime:\d+ Mtime:\d+|EphemeralOwner:[1-9]\d*`)

func normalized(s *Service) string {
	return runSpecific.ReplaceAllStringFunc(dump(s), func(m string) string {
		if m[0] == 'E' {
			return "EphemeralOwner:SESSION"
		}
		return "TIMES"
	})
}

// crashRun runs the script on a Service whose process dies at store operation at (0: never),
// then starts a fresh Service on the table, as a restarted or another server would, and returns
// it with the index of the step that failed (len(crashScript) if none did).
// With bucket set, the Services keep large entries in it; bucket outlives the crashed process.
func crashRun(t *testing.T, url string, at int, after bool, bucket Blobs) (*Service, int, int) {
	ctx := context.Background()
	base, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	d := &crashingDriver{Driver: base.Driver(), at: at, after: after}
	// The tick is an hour: the script's operations are the only ones, so crash points repeat.
	cfg := Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: time.Hour, SnapshotEvery: -1}
	crashCfg := cfg
	if bucket != nil {
		cfg.Blobs, crashCfg.Blobs = bucket, crashingBlobs{bucket, d}
	}
	s, err := New(ctx, store.NewTable(d, url), crashCfg)
	failed := len(crashScript)
	if err == nil {
		var c Caller
		for i, step := range crashScript {
			if err := step.run(ctx, s, &c); err != nil {
				if !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("crash at op %d (after=%v): step %q failed with %v, not the crash", at, after, step.name, err)
				}
				failed = i
				break
			}
		}
		s.Close()
	} else if !errors.Is(err, store.ErrUnavailable) {
		t.Fatal(err)
	} else {
		failed = 0
	}
	next, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	recovered, err := New(ctx, next, cfg)
	if err != nil {
		t.Fatalf("crash at op %d (after=%v): a new server cannot start on the table: %v", at, after, err)
	}
	t.Cleanup(recovered.Close)
	return recovered, failed, d.ops
}

// A server dying at any store operation of any write leaves the table in the state before that
// write or after it, never between, and a new server (including its expirer, which finishes a
// fenced session's close) takes over from there: the log stays whole, no write is half
// applied, the session's ephemerals go with its close.
func TestServerCrashAtEveryStoreOperation(t *testing.T) {
	dir := t.TempDir()
	for _, backend := range []struct {
		name, url string
		blobs     bool
	}{
		{"mem", "mem://coord-crash-%d-%v", false},
		{"mem", "mem://coord-crash-blobs-%d-%v", true},
		{"sqlite", "sqlite://" + filepath.Join(dir, "crash-%d-%v.db"), false},
		{"sqlite", "sqlite://" + filepath.Join(dir, "crash-blobs-%d-%v.db"), true},
	} {
		if !slices.Contains(strings.Split(*crashStores, ","), backend.name) {
			continue
		}
		name := backend.name + "/rows"
		if backend.blobs {
			name = backend.name + "/bucket"
		}
		t.Run(name, func(t *testing.T) {
			// The clean run: the state after each step.
			ctx := context.Background()
			tbl, err := store.Open(ctx, fmt.Sprintf(backend.url, 0, "clean"))
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			d := &crashingDriver{Driver: tbl.Driver()}
			cfg := Config{MinSessionTimeout: time.Hour, MaxSessionTimeout: 2 * time.Hour, Tick: time.Hour, SnapshotEvery: -1}
			if backend.blobs {
				cfg.Blobs = crashingBlobs{memBucket(t), d}
			}
			s, err := New(ctx, store.NewTable(d, "clean"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			states := []string{normalized(s)}
			var c Caller
			for _, step := range crashScript {
				if err := step.run(ctx, s, &c); err != nil {
					t.Fatalf("clean run: %s: %v", step.name, err)
				}
				states = append(states, normalized(s))
			}
			s.Close()
			total := d.ops
			for at := 1; at <= total; at++ {
				for _, after := range []bool{false, true} {
					var bucket *coordblob.Bucket
					if backend.blobs {
						bucket = memBucket(t)
					}
					var blobs Blobs
					if bucket != nil {
						blobs = bucket
					}
					s, failed, _ := crashRun(t, fmt.Sprintf(backend.url, at, after), at, after, blobs)
					if err := s.expire(ctx); err != nil {
						t.Fatalf("crash at op %d (after=%v): the new server's expirer: %v", at, after, err)
					}
					got := normalized(s)
					if !slices.Contains(states[failed:min(failed+2, len(states))], got) {
						t.Fatalf("crash at op %d (after=%v) in step %q: the new server's state is neither before nor after it:\n%s\nbefore:\n%s",
							at, after, crashScript[min(failed, len(crashScript)-1)].name, got, states[failed])
					}
					// No session the log holds open has been fenced: a fenced one's close is done.
					rows, err := s.tbl.Scan(ctx, sessionPartition, store.ScanOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for id := range s.t.sessions {
						i := slices.IndexFunc(rows, func(r store.Row) bool { return r.Key == sessionKey(id) })
						if i < 0 {
							t.Fatalf("crash at op %d (after=%v): session %#x is open in the log without its heartbeat row", at, after, id)
						}
						if dead, _ := rows[i].Attrs["dead"].(bool); dead {
							t.Fatalf("crash at op %d (after=%v): session %#x was fenced but is still open after the expirer ran", at, after, id)
						}
					}
					if bucket != nil {
						// The sweep deletes the crashed append's object, if any, unless its zxid is
						// still free, and no object the log names. A server started from a
						// snapshot leaves the objects up to it to compaction, which deletes them
						// below the snapshot (an orphan of the snapshot's own zxid waits for the
						// next one).
						if _, err := s.sweep(ctx); err != nil {
							t.Fatalf("crash at op %d (after=%v): sweep: %v", at, after, err)
						}
						if s.base > 0 {
							if _, err := s.Compact(ctx, 0); err != nil {
								t.Fatalf("crash at op %d (after=%v): compact: %v", at, after, err)
							}
						}
						for _, key := range objects(t, bucket) {
							zxid, _ := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(key, s.objPrefix), "-", 2)[0], 10, 64)
							if !s.named[key] && zxid <= s.LastZxid() && zxid != s.base {
								t.Fatalf("crash at op %d (after=%v): object %s of a lost append outlived the sweep and the compaction", at, after, key)
							}
						}
					}
					// A fresh replica of the same table agrees.
					if again := normalized(newServiceWith(t, s.tbl, Config{Blobs: blobs})); again != got {
						t.Fatalf("crash at op %d (after=%v): two replicas of the table differ:\n%s\n%s", at, after, got, again)
					}
				}
			}
			t.Logf("%d store operations, each crashed before and after its effect", total)
		})
	}
}
