package coord

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// buckets open a fresh bucket of each kind per test: in memory and in a directory always, on S3
// (moto) and Azure Blob Storage (Azurite) with -short off.
func buckets(t *testing.T) map[string]func(t *testing.T) *coordblob.Bucket {
	open := func(t *testing.T, u string) *coordblob.Bucket {
		t.Helper()
		b, err := coordblob.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + randomHex(3)
	m := map[string]func(t *testing.T) *coordblob.Bucket{
		"mem":  func(t *testing.T) *coordblob.Bucket { return open(t, "mem://") },
		"file": func(t *testing.T) *coordblob.Bucket { return open(t, "file://"+filepath.ToSlash(t.TempDir())) },
	}
	if testing.Short() {
		return m
	}
	m["s3"] = func(t *testing.T) *coordblob.Bucket {
		ctx := context.Background()
		u, create := testservers.MotoS3(t, name)
		// A bucket that does not exist is refused at open, with a hint.
		if _, err := coordblob.Open(ctx, u); err == nil || !strings.Contains(err.Error(), "no such bucket") {
			t.Fatalf("opening a bucket that does not exist: %v", err)
		}
		create()
		return open(t, u)
	}
	m["azblob"] = func(t *testing.T) *coordblob.Bucket {
		ctx := context.Background()
		ep, err := url.Parse(testservers.AzuriteAddrs(t).Blob)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("AZURE_STORAGE_ACCOUNT", testservers.AzuriteAccount)
		t.Setenv("AZURE_STORAGE_KEY", testservers.AzuriteKey)
		u := "azblob://" + name + "?protocol=http&localemu=true&domain=" + ep.Host
		raw, err := blob.OpenBucket(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		var c *container.Client
		if !raw.As(&c) {
			t.Fatal("azureblob bucket without a container client")
		}
		if _, err := c.Create(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return open(t, u)
	}
	return m
}

func objects(t *testing.T, b Blobs) []string {
	t.Helper()
	var keys []string
	if err := b.List(context.Background(), "", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestLargeDataSpansRows with a bucket: the entry is one object the log row names, not parts.
func TestLargeDataInBucket(t *testing.T) {
	for name, bucket := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := bucket(t)
			url := "mem://" + strings.ReplaceAll(t.Name(), "/", "-") + randomHex(4)
			open := opener(t, url)
			tbl := open()
			s := newServiceWith(t, tbl, Config{Blobs: b})
			big := bytes.Repeat([]byte("0123456789abcdef"), MaxData/16)
			big[7] = 'X'
			c := anyone(t, s)
			r := mustCreate(t, s, c, "/small", "s", Persistent)
			if _, _, err := s.Write(ctx, c, Op{Kind: OpCreate, Path: "/big", Data: big, ACL: OpenACLUnsafe}); err != nil {
				t.Fatal(err)
			}
			_, _, err := s.Write(ctx, c, Op{Kind: OpCreate, Path: "/bigger", Data: append(big, 0), ACL: OpenACLUnsafe})
			wantCode(t, err, BadArguments)
			// A replica built from the log alone reads the entry back from its object.
			s2 := newServiceWith(t, open(), Config{Blobs: b})
			data, st, err := get(s2, Caller{}, "/big")
			if err != nil || !bytes.Equal(data, big) || st.DataLength != MaxData {
				t.Fatalf("read back %d bytes (%v), want %d", len(data), err, len(big))
			}
			if parts, err := tbl.Scan(ctx, blobPartition, store.ScanOptions{}); err != nil || len(parts) != 0 {
				t.Fatalf("%d parts in the table with a bucket (%v)", len(parts), err)
			}
			objs := objects(t, b)
			if len(objs) != 1 || !strings.HasPrefix(objs[0], s.objPrefix) || s2.objPrefix != s.objPrefix {
				t.Fatalf("objects %v, want one under %s", objs, s.objPrefix)
			}
			row, _, err := tbl.Get(ctx, txnKey(r.Stat.Czxid+1))
			if err != nil || row["obj"] != objs[0] || len(row["sha256"].(string)) != 64 || row["t"] != nil {
				t.Fatalf("log row %v (%v), want the object's name and hash", row, err)
			}
			// An append that loses its zxid deletes its object.
			won, err := s.appendTxn(ctx, 1, &txn{Nonce: "loser", Ops: []Op{{Kind: OpSetData, Path: "/big", Data: big, Version: -1}}})
			if err != nil || won {
				t.Fatalf("appending at a taken zxid: won=%v %v", won, err)
			}
			if after := objects(t, b); !slices.Equal(after, objs) {
				t.Fatalf("objects %v after a lost append, %v before", after, objs)
			}
			// Without the bucket, a server refuses the log rather than serve without the entry.
			if _, err := New(ctx, open(), fast); err == nil || !strings.Contains(err.Error(), "no bucket") {
				t.Fatalf("a server without the bucket: %v", err)
			}
		})
	}
}

// A log entry whose object is missing or not the one logged stops a new server from starting,
// and a running one from serving.
func TestBucketObjectDamaged(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []struct {
		name, want string
		do         func(b Blobs, key string) error
	}{
		{"missing", "is missing from the bucket", func(b Blobs, key string) error { return b.Delete(ctx, key) }},
		{"changed", "is not the one logged", func(b Blobs, key string) error {
			data, err := b.Get(ctx, key)
			if err != nil {
				return err
			}
			data[len(data)/2] ^= 1
			return b.Put(ctx, key, data)
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			b := memBucket(t)
			tbl, err := store.Open(ctx, "mem://coord-damaged-"+damage.name+randomHex(4))
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			s := newServer(t, tbl, Config{Blobs: b})
			mustCreate(t, s, Caller{}, "/a", "", Persistent)
			// A replica that has not read it yet (its tick is an hour).
			live, err := New(ctx, tbl, Config{Blobs: b, Tick: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()
			if _, _, err := s.Write(ctx, Caller{}, Op{Kind: OpCreate, Path: "/big", Data: make([]byte, MaxData), ACL: OpenACLUnsafe}); err != nil {
				t.Fatal(err)
			}
			objs := objects(t, b)
			if len(objs) != 1 {
				t.Fatalf("objects %v", objs)
			}
			if err := damage.do(b, objs[0]); err != nil {
				t.Fatal(err)
			}
			_, err = New(ctx, tbl, Config{Blobs: b})
			if err == nil || !strings.Contains(err.Error(), damage.want) || !strings.Contains(err.Error(), "refusing to serve") {
				t.Fatalf("a new server on a damaged log: %v, want %q", err, damage.want)
			}
			if _, err := live.Sync(ctx); err == nil || !strings.Contains(err.Error(), damage.want) {
				t.Fatalf("a running replica reaching the damaged entry: %v", err)
			}
			var gerr error
			live.View(func(v View) { _, _, gerr = v.Get(Caller{}, "/a", false) })
			if gerr == nil {
				t.Fatal("the replica still serves reads past a damaged entry")
			}
		})
	}
}

// The sweep deletes objects of appends that lost their zxid (left by a crash or an ambiguous
// failure) and keeps the log's objects and those of zxids not yet taken; the tick runs it.
func TestBucketSweep(t *testing.T) {
	ctx := context.Background()
	b, tbl := bucketAndTable(t)
	s := newServer(t, tbl, Config{Blobs: b, BlobSweep: -1})
	if _, _, err := s.Write(ctx, Caller{}, Op{Kind: OpCreate, Path: "/big", Data: make([]byte, MaxData), ACL: OpenACLUnsafe}); err != nil {
		t.Fatal(err)
	}
	logged := objects(t, b)
	lost := s.objectKey(1, "crashed")   // zxid 1 is /big's: this can never be named
	future := s.objectKey(9, "pending") // zxid 9 is free: its append may yet win
	other := "zk/another-table/" + fmt.Sprintf("%020d-x", 1)
	for _, k := range []string{lost, future, other} {
		if err := b.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want 1", n, err)
	}
	want := append([]string{other}, logged...)
	want = append(want, future)
	slices.Sort(want)
	if got := objects(t, b); !slices.Equal(got, want) {
		t.Fatalf("after the sweep: %v, want %v", got, want)
	}
	// Once the log passes zxid 9 with another entry, the tick's sweep deletes the pending one.
	ticked := newServer(t, tbl, Config{Blobs: b, BlobSweep: time.Millisecond})
	for i := 0; ticked.LastZxid() < 9; i++ {
		mustCreate(t, ticked, Caller{}, fmt.Sprintf("/n%d", i), "", Persistent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(objects(t, b), future) {
		if time.Now().After(deadline) {
			t.Fatalf("the tick did not sweep %s: %v", future, objects(t, b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := objects(t, b); !slices.Contains(got, other) || !slices.Contains(got, logged[0]) {
		t.Fatalf("the tick's sweep deleted too much: %v", got)
	}
	// The log still reads back whole.
	newServiceWith(t, tbl, Config{Blobs: b})
}

// The writer of a large entry applies it without reading it back: its object must count as
// named all the same, or the writer's own sweep deletes a live entry's object, and every replica
// that reads the entry later finds it missing. No tick runs here, so no catch-up reads it.
func TestSweepKeepsTheWritersOwnObject(t *testing.T) {
	ctx := context.Background()
	b, tbl := bucketAndTable(t)
	s, err := New(ctx, tbl, Config{Blobs: b, BlobSweep: -1, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, _, err := s.Write(ctx, Caller{}, Op{Kind: OpCreate, Path: "/big", Data: make([]byte, MaxData), ACL: OpenACLUnsafe}); err != nil {
		t.Fatal(err)
	}
	logged := objects(t, b)
	if n, err := s.sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep deleted %d (%v) of %v, want none: the entry names its object", n, err, logged)
	}
	if got := objects(t, b); !slices.Equal(got, logged) {
		t.Fatalf("objects after the sweep: %v, want %v", got, logged)
	}
}

// bucketAndTable is an in-memory bucket and a fresh in-memory table, closed after the test.
func bucketAndTable(t *testing.T) (*coordblob.Bucket, *store.Table) {
	t.Helper()
	tbl, err := store.Open(context.Background(), "mem://coord-blobs-"+randomHex(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return memBucket(t), tbl
}
