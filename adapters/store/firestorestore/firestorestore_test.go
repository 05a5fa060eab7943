package firestorestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ssfkit/ssfkit/adapters/store"
	fs "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func open(t *testing.T, url string) store.Driver {
	t.Helper()
	tbl, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl.Driver()
}

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		tbl, err := store.Open(context.Background(), testtables.FirestoreURL(t, testtables.Name("conf")))
		if err != nil {
			t.Fatal(err)
		}
		return tbl.Driver()
	})
}

// randomKey draws keys around the boundaries of the ID encoding (escaped low bytes, the
// characters kept as they are, escaped high bytes, the escape characters themselves, "/", ".")
// and anywhere else, including invalid UTF-8.
func randomKey(rng *rand.Rand) string {
	edges := []byte{0, 1, ' ', '!', '.', '/', '0', '9', 'A', '_', 'k', '|', '}', '~', 0x7f, 0x80, 0xc3, 0xff}
	b := make([]byte, rng.Intn(8))
	for i := range b {
		if rng.Intn(2) == 0 {
			b[i] = edges[rng.Intn(len(edges))]
		} else {
			b[i] = byte(rng.Intn(256))
		}
	}
	return string(b)
}

// Document IDs decode to their keys, follow Firestore's ID rules, and sort like the keys.
func TestIDsPreserveOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(crashkit.Seed(t)))
	for range 20000 {
		a, b := randomKey(rng), randomKey(rng)
		ida, err := fs.EncodeID(a)
		if err != nil {
			t.Fatal(err)
		}
		idb, _ := fs.EncodeID(b)
		if got, err := fs.DecodeID(ida); err != nil || got != a {
			t.Fatalf("DecodeID(EncodeID(%q)) = %q, %v", a, got, err)
		}
		if strings.Compare(a, b) != strings.Compare(ida, idb) {
			t.Fatalf("keys %q, %q compare %d; their IDs %q, %q compare %d", a, b, strings.Compare(a, b), ida, idb, strings.Compare(ida, idb))
		}
		for i := 0; i < len(ida); i++ {
			if ida[i] < '!' || ida[i] > '~' || ida[i] == '/' {
				t.Fatalf("ID %q of %q has byte %#x outside printable ASCII or a slash", ida, a, ida[i])
			}
		}
		if ida == "." || ida == ".." || strings.HasPrefix(ida, "__") {
			t.Fatalf("ID %q of %q is reserved", ida, a)
		}
	}
}

// Only what EncodeID produces decodes, so no two IDs name one key.
func TestDecodeIDRejectsForeignIDs(t *testing.T) {
	for _, id := range []string{"", "x", "k!", "k!3", "k!41", "k~20", "k~7D", "k!G0", "k!2f", "k/", "k ", "k\u00e9"} {
		if key, err := fs.DecodeID(id); err == nil {
			t.Errorf("DecodeID(%q) = %q, want an error", id, key)
		}
	}
}

func TestIDLengthLimit(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{strings.Repeat("a", 1499), true},
		{strings.Repeat("a", 1500), false},
		{strings.Repeat("\xff", 499), true},
		{strings.Repeat("\xff", 500), false},
	} {
		_, err := fs.EncodeID(tc.key)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, store.ErrInvalid)) {
			t.Errorf("EncodeID of %d bytes %q...: %v", len(tc.key), tc.key[:1], err)
		}
	}
	d := open(t, testtables.FirestoreURL(t, testtables.Name("long")))
	_, err := d.Update(t.Context(), store.Key{Partition: "p", Sort: strings.Repeat("/", 500)}, store.Always(), store.Update{store.SetAttr(store.Attr("x"), true)})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Update with a sort key too long for a document ID: %v, want store.ErrInvalid", err)
	}
}

// The emulator returns a partition's rows in sort-key order, forwards and backwards.
func TestScanOrderOnEmulator(t *testing.T) {
	d := open(t, testtables.FirestoreURL(t, testtables.Name("order")))
	rng := rand.New(rand.NewSource(crashkit.Seed(t)))
	var sorts []string
	var ups []store.BatchUpdate
	for range 300 {
		s := randomKey(rng)
		if !slices.Contains(sorts, s) {
			sorts = append(sorts, s)
			ups = append(ups, store.BatchUpdate{Key: store.Key{Partition: "p", Sort: s}, Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("s"), s)}})
		}
	}
	if _, err := store.UpdateBatch(t.Context(), d, ups); err != nil {
		t.Fatal(err)
	}
	slices.Sort(sorts)
	for _, reverse := range []bool{false, true} {
		rows, err := d.Scan(t.Context(), "p", store.ScanOptions{Reverse: reverse})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			if r.Attrs["s"] != r.Key.Sort {
				t.Fatalf("row %q holds %q", r.Key.Sort, r.Attrs["s"])
			}
			got = append(got, r.Key.Sort)
		}
		if reverse {
			slices.Reverse(got)
		}
		if !slices.Equal(got, sorts) {
			t.Errorf("Scan(Reverse: %v) order differs from byte order:\n got %q\nwant %q", reverse, got, sorts)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	emu := testservers.Firestore.Addr(t)
	t.Setenv(fs.EmulatorHostEnv, "")
	for _, url := range []string{
		"firestore://proj",
		"firestore:///coll?emulator=" + emu,
		"firestore://proj/a/b?emulator=" + emu,
		"firestore://proj/__c__?emulator=" + emu,
		"firestore://proj/..?emulator=" + emu,
		"firestore://proj/c?emulator=" + emu + "&table=x",
		"firestore://proj/c?emulator=" + emu + "&database=Bad_Name",
		"firestore://proj/c?emulator=localhost",
		"firestore://proj/c?emulator=" + emu + "&max_row_bytes=1",
		"firestore://proj/c?emulator=" + emu + fmt.Sprintf("&max_row_bytes=%d", fs.MaxRowBytesLimit+1),
		"firestore://proj/c?emulator=" + emu + "&max_row_bytes=lots",
	} {
		if _, err := store.Open(t.Context(), url); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want store.ErrInvalid", url, err)
		}
	}

	t.Run("Unreachable", func(t *testing.T) {
		port, err := testservers.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = store.Open(ctx, fmt.Sprintf("firestore://proj/c?emulator=127.0.0.1:%d", port))
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
			t.Errorf("Open of an emulator that is not running = %v, want store.ErrUnavailable", err)
		}
	})
	t.Run("NoCredentials", func(t *testing.T) {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing.json")
		_, err := store.Open(t.Context(), "firestore://proj/c")
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "Application Default Credentials") {
			t.Errorf("Open without credentials = %v, want store.ErrInvalid saying how to provide them", err)
		}
	})
	t.Run("EmulatorConflict", func(t *testing.T) {
		t.Setenv(fs.EmulatorHostEnv, "127.0.0.1:1")
		_, err := store.Open(t.Context(), "firestore://proj/c?emulator="+emu)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), fs.EmulatorHostEnv) {
			t.Errorf("Open with emulator= and a different %s = %v, want store.ErrInvalid", fs.EmulatorHostEnv, err)
		}
	})
}

// Without the emulator the tests fail, saying how to install it.
func TestMissingEmulatorSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := testservers.Firestore.Start()
	if err == nil || !strings.Contains(err.Error(), "gcloud components install cloud-firestore-emulator") {
		t.Fatalf("starting the emulator with nothing on PATH: %v", err)
	}
}

// Like every Google client library, the driver talks to the emulator FIRESTORE_EMULATOR_HOST
// names when the URL names none.
func TestEmulatorFromEnvironment(t *testing.T) {
	emu := testservers.Firestore.Addr(t)
	url := "firestore://ssfkit-env/" + testtables.Name("env")
	k := store.Key{Partition: "p", Sort: "s"}
	t.Setenv(fs.EmulatorHostEnv, emu)
	fromEnv, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fromEnv.Update(t.Context(), k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "env")}); err != nil {
		t.Fatal(err)
	}
	fromEnv.Close() // the last table on its client: the next open dials anew
	t.Setenv(fs.EmulatorHostEnv, "")
	explicit := open(t, url+"?emulator="+emu)
	if a, found, err := explicit.Get(t.Context(), k); err != nil || a["v"] != "env" {
		t.Errorf("row written through %s, read with emulator=: %v %v %v", fs.EmulatorHostEnv, a, found, err)
	}
}

// max_row_bytes is checked before anything is sent, and rows up to the largest accepted value
// fit in a Firestore document whatever their keys.
func TestMaxRowBytes(t *testing.T) {
	small := open(t, testtables.FirestoreURL(t, testtables.Name("small"))+"&max_row_bytes=1000")
	if got := small.Limits().MaxRowBytes; got != 1000 {
		t.Fatalf("Limits().MaxRowBytes = %d, want 1000", got)
	}
	_, err := small.Update(t.Context(), store.Key{Partition: "p", Sort: "s"}, store.Always(), store.Update{store.SetAttr(store.Attr("b"), make([]byte, 1000))})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("1000-byte value with max_row_bytes=1000: %v, want store.ErrTooLarge", err)
	}

	big := open(t, testtables.FirestoreURL(t, testtables.Name("big"))+fmt.Sprintf("&max_row_bytes=%d", fs.MaxRowBytesLimit))
	// Keys whose IDs are as long as Firestore allows, and a row as large as the limit allows.
	key := store.Key{Partition: strings.Repeat("\xff", 499), Sort: strings.Repeat("\x00", 499)}
	overhead := len(store.EncodeAttrs(store.Attrs{"b": []byte{}})) + 2 // the value's length takes 3 bytes, not 1
	value := bytes.Repeat([]byte{'x'}, fs.MaxRowBytesLimit-len(key.Partition)-len(key.Sort)-overhead)
	r, err := big.Update(t.Context(), key, store.Always(), store.Update{store.SetAttr(store.Attr("b"), value)})
	if err != nil || !r.Applied {
		t.Fatalf("row of max_row_bytes=%d with maximal keys: %+v, %v", fs.MaxRowBytesLimit, r.Applied, err)
	}
	a, _, err := big.Get(t.Context(), key)
	if got, _ := a["b"].([]byte); err != nil || !bytes.Equal(got, value) {
		t.Errorf("reading the largest row back: %d bytes, %v", len(got), err)
	}
}

// loseResponses is a client interceptor that, while armed, lets a Commit reach the emulator and
// then reports it lost, running between (when set) as if another writer got in before the
// client library retries.
type loseResponses struct {
	armed   atomic.Int32
	between func()
}

func (l *loseResponses) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && strings.HasSuffix(method, "/Commit") && l.armed.Add(-1) == 0 {
		if l.between != nil {
			l.between()
		}
		return status.Error(codes.Unavailable, "response lost (test)")
	}
	return err
}

// A write whose response is lost is retried by the client library; the retry fails its
// precondition, and the driver must tell its own write from another writer's.
func TestLostResponses(t *testing.T) {
	lose := &loseResponses{}
	fs.SetTestInterceptor(lose.intercept)
	defer fs.SetTestInterceptor(nil)
	// A project of its own gets a client of its own, with the interceptor.
	d := open(t, fmt.Sprintf("firestore://ssfkit-faults/%s?emulator=%s", testtables.Name("lost"), testservers.Firestore.Addr(t)))
	ctx := t.Context()
	k := store.Key{Partition: "p", Sort: "n"}
	add := store.Update{store.AddInt(store.Attr("n"), 1)}
	expect := func(want int64) {
		t.Helper()
		if a, _, err := d.Get(ctx, k); err != nil || a["n"] != want {
			t.Fatalf("n = %v (%v), want %d", a["n"], err, want)
		}
	}

	lose.armed.Store(1)
	if r, err := d.Update(ctx, k, store.RowAbsent(), add); err != nil || !r.Applied || r.Attrs["n"] != int64(1) {
		t.Fatalf("create whose response was lost: %+v, %v; want applied with n=1", r, err)
	}
	expect(1)
	lose.armed.Store(1)
	if r, err := d.Update(ctx, k, store.Equal(store.Attr("n"), int64(1)), add); err != nil || !r.Applied || r.Attrs["n"] != int64(2) {
		t.Fatalf("CAS whose response was lost: %+v, %v; want applied with n=2", r, err)
	}
	expect(2)

	// Another writer changes the row before the retry: whether the lost write applied is then
	// unknown, which must be said rather than guessed (guessing "not applied" would apply the
	// addition twice).
	lose.between = func() {
		if _, err := d.Update(context.Background(), k, store.Always(), add); err != nil {
			t.Error(err)
		}
	}
	lose.armed.Store(1)
	if r, err := d.Update(ctx, k, store.Always(), add); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("update overwritten after its response was lost: %+v, %v; want store.ErrUnavailable", r, err)
	}
	expect(4)

	lose.between = nil
	lose.armed.Store(1)
	if ok, err := d.Delete(ctx, k, store.Always()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("delete whose response was lost: %v, %v; want store.ErrUnavailable", ok, err)
	}
	if _, found, _ := d.Get(ctx, k); found {
		t.Fatal("the delete did not apply")
	}
}

func TestDrop(t *testing.T) {
	url := testtables.FirestoreURL(t, testtables.Name("drop"))
	d := open(t, url)
	for _, p := range []string{"a", "b/c", "d"} {
		for _, s := range []string{"", "1", "2"} {
			if _, err := d.Update(t.Context(), store.Key{Partition: p, Sort: s}, store.Always(), store.Update{store.SetAttr(store.Attr("x"), true)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.(store.Dropper).Drop(t.Context()); err != nil {
		t.Fatal(err)
	}
	again := open(t, url)
	for _, p := range []string{"a", "b/c", "d"} {
		if rows, err := again.Scan(t.Context(), p, store.ScanOptions{}); err != nil || len(rows) != 0 {
			t.Errorf("partition %q after Drop: %v, %v", p, rows, err)
		}
	}
}
