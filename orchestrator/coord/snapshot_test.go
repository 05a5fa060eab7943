package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// A server lagging behind a compaction jumps to the snapshot: it ends with the same state as
// the others, its watches (one-time, persistent and recursive) fire as the skipped transactions
// would have fired them, writes go on
// from there, and a new server starts from the snapshot without replaying what it covers.
func TestSnapshotAndCompaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		manual := Config{MinSessionTimeout: 50 * time.Millisecond, Tick: time.Hour, SnapshotEvery: -1}
		s1, err := New(ctx, open(), manual)
		if err != nil {
			t.Fatal(err)
		}
		defer s1.Close()
		lagging, err := New(ctx, open(), manual)
		if err != nil {
			t.Fatal(err)
		}
		defer lagging.Close()
		for _, p := range []string{"/a", "/c", "/p"} {
			mustCreate(t, s1, Caller{}, p, "0", Persistent)
		}
		big := strings.Repeat("x", store.PortableMaxRowBytes) // a split entry, compacted too
		mustCreate(t, s1, Caller{}, "/big", big, Persistent)
		if _, err := lagging.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		sess := newSession(t, lagging, time.Hour)
		c, ws, _ := attach(t, lagging, sess)
		persistent, pws, _ := attach(t, lagging, newSession(t, lagging, time.Hour))
		if err := lagging.AddWatch(persistent, "/", PersistentRecursiveWatch); err != nil {
			t.Fatal(err)
		}
		if err := lagging.AddWatch(persistent, "/p", PersistentWatch); err != nil {
			t.Fatal(err)
		}
		lagging.View(func(v View) {
			for _, p := range []string{"/a", "/c"} {
				if _, _, err := v.Get(c, p, true); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := v.Exists(c, "/b", true); CodeOf(err) != NoNode {
				t.Fatalf("exists /b: %v", err)
			}
			if _, _, err := v.Children(c, "/p", true); err != nil {
				t.Fatal(err)
			}
		})
		// The lagging server reads nothing more while these are written, snapshotted and compacted.
		for _, op := range []Op{
			{Kind: OpSetData, Path: "/a", Data: []byte("1"), Version: -1},
			{Kind: OpCreate, Path: "/b", ACL: OpenACLUnsafe},
			{Kind: OpDelete, Path: "/c", Version: -1},
			{Kind: OpCreate, Path: "/p/k", ACL: OpenACLUnsafe},
		} {
			if _, _, err := s1.Write(ctx, Caller{}, op); err != nil {
				t.Fatal(err)
			}
		}
		z, err := s1.Snapshot(ctx)
		if err != nil || z != s1.LastZxid() {
			t.Fatalf("snapshot at %d (%v), want %d", z, err, s1.LastZxid())
		}
		n, err := s1.Compact(ctx, 0)
		if err != nil || n != int(z)-1 {
			t.Fatalf("compacted %d entries (%v), want %d", n, err, z-1)
		}
		if parts, _ := s1.tbl.Scan(ctx, blobPartition, store.ScanOptions{}); len(parts) != 0 {
			t.Fatalf("%d parts of compacted entries left", len(parts))
		}
		if _, err := lagging.Sync(ctx); err != nil {
			t.Fatalf("the lagging server could not catch up: %v", err)
		}
		if got, want := dump(lagging), dump(s1); got != want {
			t.Fatalf("after the jump:\n%s\nwant\n%s", got, want)
		}
		want := []string{"1 /b", "2 /c", "3 /a", "4 /p"}
		if got := ws.events(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("watch events %v, want %v", got, want)
		}
		want = []string{"1 /b", "1 /p/k", "2 /c", "3 /a", "4 /p"}
		if got := pws.events(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("persistent watches' events %v, want %v", got, want)
		}
		// Writes go on through it, past the snapshot.
		if _, zx, err := lagging.Write(ctx, c, Op{Kind: OpSetData, Path: "/a", Data: []byte("2"), Version: 1}); err != nil || zx != z+1 {
			t.Fatalf("write after the jump: zxid %d, %v; want %d", zx, err, z+1)
		}
		// A new server starts from the snapshot: it reads none of the compacted entries.
		d := &crashingDriver{Driver: open().Driver()}
		fresh, err := New(ctx, store.NewTable(d, "fresh"), manual)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		if _, err := s1.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := dump(fresh), dump(s1); got != want {
			t.Fatalf("a server started from the snapshot:\n%s\nwant\n%s", got, want)
		}
		if d.ops > 8 {
			t.Fatalf("starting took %d store reads; the snapshot covers all but one entry", d.ops)
		}
		// A snapshot that does not match its checksum is refused.
		name := snapName(z)
		if err := s1.tbl.Put(ctx, snapKey(name+"/000000"), store.Attrs{"b": []byte(`{"z":1}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := New(ctx, open(), manual); err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("a corrupt snapshot: %v, want a refusal naming the checksum", err)
		}
	})
}

// With a bucket, compaction deletes the objects of the entries it stubs, and a server started
// from the snapshot never sweeps the objects of entries it did not read but others may still
// replay (those the compaction kept).
func TestSnapshotWithABucket(t *testing.T) {
	ctx := context.Background()
	bucket := memBucket(t)
	url := "mem://coord-snap-bucket-" + randomHex(4)
	open := opener(t, url)
	cfg := Config{MinSessionTimeout: 50 * time.Millisecond, Tick: time.Hour, SnapshotEvery: -1, BlobSweep: -1, Blobs: bucket}
	start := func() *Service {
		s, err := New(ctx, open(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	objects := func(s *Service) (n int) {
		if err := bucket.List(ctx, s.objPrefix, func(string) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	big := strings.Repeat("y", store.PortableMaxRowBytes)
	s1, lagging := start(), start()
	for i := range 4 {
		mustCreate(t, s1, Caller{}, fmt.Sprintf("/b%d", i), big, Persistent)
		if i == 1 {
			if _, err := lagging.Sync(ctx); err != nil { // it stops at zxid 2
				t.Fatal(err)
			}
		}
	}
	if n := objects(s1); n != 4 {
		t.Fatalf("%d objects for 4 large entries", n)
	}
	if _, err := s1.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s1.Compact(ctx, 2); err != nil || n != 1 {
		t.Fatalf("compacted %d (%v), want entry 1 only", n, err)
	}
	if n := objects(s1); n != 3 {
		t.Fatalf("%d objects after compacting one entry, want 3", n)
	}
	fresh := start() // from the snapshot: it reads none of entries 1-4
	if n, err := fresh.sweep(ctx); err != nil || n != 0 {
		t.Fatalf("the fresh server's sweep deleted %d objects (%v), want none", n, err)
	}
	if _, err := lagging.Sync(ctx); err != nil {
		t.Fatalf("the lagging server replays entries 3 and 4 from their objects: %v", err)
	}
	if got, want := dump(lagging), dump(s1); got != want {
		t.Fatalf("lagging server:\n%s\nwant\n%s", got, want)
	}
}
