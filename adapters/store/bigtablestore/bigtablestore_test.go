package bigtablestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		return testtables.Bigtable(t, "conf").Driver()
	})
}

func open(t *testing.T, url string) (*store.Table, error) {
	tbl, err := store.Open(context.Background(), url)
	if err == nil {
		t.Cleanup(func() { tbl.Close() })
	}
	return tbl, err
}

func TestOpenInvalid(t *testing.T) {
	emu := testtables.BigtableEmulator(t)
	good := "bigtable://ssfkit-test/ssfkit-test/t?emulator=" + emu
	for _, bad := range []string{
		"bigtable://ssfkit-test/ssfkit-test?emulator=" + emu,     // no table
		"bigtable://ssfkit-test/ssfkit-test/t/x?emulator=" + emu, // extra segment
		"bigtable://ssfkit-test/?emulator=" + emu,                // no instance
		"bigtable://Bad_Project/ssfkit-test/t?emulator=" + emu,   // project ID
		"bigtable://ssfkit-test/in/t?emulator=" + emu,            // instance ID too short
		"bigtable://ssfkit-test/ssfkit-test/bad%20name?emulator=" + emu,
		"bigtable://ssfkit-test/ssfkit-test/" + strings.Repeat("t", 51) + "?emulator=" + emu,
		good + "&app_profile=no/slash",
		good + "&creat=true",
		good + "&create=yes",
		good + "&check_routing=maybe",
		good + "&max_row_bytes=1",
		good + "&max_row_bytes=1000000000",
		"bigtable://ssfkit-test/ssfkit-test/t?emulator=nohostport",
	} {
		if _, err := open(t, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want an error wrapping store.ErrInvalid", bad, err)
		}
	}
	if _, err := open(t, good+"&create=true"); err != nil {
		t.Errorf("Open(%q): %v", good, err)
	}
}

func TestMissingTable(t *testing.T) {
	url := "bigtable://ssfkit-test/ssfkit-test/" + testtables.Name("missing") + "?emulator=" + testtables.BigtableEmulator(t)
	_, err := open(t, url)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "create=true") {
		t.Fatalf("Open of a missing table without create=true = %v, want an error saying it does not exist and naming create=true", err)
	}
	if _, err := open(t, url+"&create=true"); err != nil {
		t.Fatalf("Open with create=true: %v", err)
	}
	if _, err := open(t, url); err != nil {
		t.Errorf("Open after the table was created: %v", err)
	}
}

// A table created without the driver's column family (by hand, say) is refused, and create=true
// adds the family.
func TestMissingFamily(t *testing.T) {
	emu := testtables.BigtableEmulator(t)
	conn, err := grpc.NewClient("passthrough:///"+emu, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := bigtable.NewAdminClient(t.Context(), "ssfkit-test", "ssfkit-test", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := testtables.Name("nofamily")
	if err := admin.CreateTable(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	url := "bigtable://ssfkit-test/ssfkit-test/" + name + "?emulator=" + emu
	if _, err := open(t, url); err == nil || !strings.Contains(err.Error(), "column family") {
		t.Fatalf("Open of a table without the column family = %v, want an error naming the column family", err)
	}
	tbl, err := open(t, url+"&create=true")
	if err != nil {
		t.Fatalf("Open with create=true: %v", err)
	}
	key := store.Key{Partition: "p", Sort: "s"}
	if err := tbl.Put(t.Context(), key, store.Attrs{"x": int64(1)}); err != nil {
		t.Fatalf("Put after the family was added: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	// Port 1 on loopback: nothing listens there, so the connection is refused at once.
	_, err := open(t, "bigtable://ssfkit-test/ssfkit-test/t?emulator=127.0.0.1:1")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open of an unreachable emulator = %v, want an error wrapping store.ErrUnavailable", err)
	}
}

func TestMissingCredentials(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/no-such-key.json")
	_, err := open(t, "bigtable://ssfkit-test/ssfkit-test/t")
	if err == nil || !strings.Contains(err.Error(), "no-such-key.json") {
		t.Errorf("Open without credentials = %v, want an error naming the credentials file", err)
	}
}

func TestKeyTooLong(t *testing.T) {
	tbl := testtables.Bigtable(t, "keys")
	long := strings.Repeat("k", 4096)
	if _, _, err := tbl.Get(t.Context(), store.Key{Partition: "p", Sort: long}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Get with a %d-byte sort key = %v, want store.ErrInvalid", len(long), err)
	}
	if _, err := tbl.Update(t.Context(), store.Key{Partition: long, Sort: "s"}, store.Always(), store.Update{store.SetAttr(store.Attr("x"), int64(1))}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Update with a %d-byte partition = %v, want store.ErrInvalid", len(long), err)
	}
	if _, err := tbl.Scan(t.Context(), long+long, store.ScanOptions{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Scan of a %d-byte partition = %v, want store.ErrInvalid", 2*len(long), err)
	}
}

// Partitions that are prefixes of each other, or differ only in the bytes the key encoding
// escapes, stay apart.
func TestEscapedPartitions(t *testing.T) {
	tbl := testtables.Bigtable(t, "escape")
	parts := []string{"p", "p\x00", "p\x00\x01", "p\x00\xff", "p\x01", "p\xff", "\x00", "\x00\x00"}
	for _, p := range parts {
		for _, s := range []string{"", "\x00", "\x01x", "s"} {
			if err := tbl.Put(t.Context(), store.Key{Partition: p, Sort: s}, store.Attrs{"p": p, "s": s}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range parts {
		for _, reverse := range []bool{false, true} {
			rows, err := tbl.Scan(t.Context(), p, store.ScanOptions{Reverse: reverse})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"", "\x00", "\x01x", "s"}
			if reverse {
				want = []string{"s", "\x01x", "\x00", ""}
			}
			if len(rows) != len(want) {
				t.Fatalf("Scan(%q, reverse=%v) returned %d rows, want %d", p, reverse, len(rows), len(want))
			}
			for i, r := range rows {
				if r.Key.Sort != want[i] || r.Attrs["p"] != p || r.Attrs["s"] != want[i] {
					t.Errorf("Scan(%q, reverse=%v) row %d = %v %v, want sort key %q", p, reverse, i, r.Key, r.Attrs, want[i])
				}
			}
		}
	}
}

func TestDrop(t *testing.T) {
	url := testtables.BigtableURL(t, testtables.Name("drop"))
	tbl, err := open(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(t.Context(), store.Key{Partition: "p", Sort: "s"}, store.Attrs{"x": int64(1)}); err != nil {
		t.Fatal(err)
	}
	dr := tbl.Driver().(store.Dropper)
	if err := dr.Drop(t.Context()); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if err := dr.Drop(t.Context()); err != nil {
		t.Errorf("Drop of a dropped table: %v", err)
	}
	if _, err := open(t, strings.Replace(url, "create=true&", "", 1)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open after Drop = %v, want an error saying the table does not exist", err)
	}
}

// emulator= in the URL wins over BIGTABLE_EMULATOR_HOST; without it the library's variable is
// honoured (and the app profile check, which emulators cannot answer, is skipped).
func TestEmulatorEnv(t *testing.T) {
	emu := testtables.BigtableEmulator(t)
	name := testtables.Name("env")
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1") // nothing listens there
	if _, err := open(t, "bigtable://ssfkit-test/ssfkit-test/"+name+"?create=true&emulator="+emu); err != nil {
		t.Fatalf("Open with emulator= and a different BIGTABLE_EMULATOR_HOST: %v", err)
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", emu)
	tbl, err := open(t, "bigtable://ssfkit-test/ssfkit-test/"+name)
	if err != nil {
		t.Fatalf("Open with BIGTABLE_EMULATOR_HOST: %v", err)
	}
	if err := tbl.Put(t.Context(), store.Key{Partition: "p", Sort: "s"}, store.Attrs{"x": int64(1)}); err != nil {
		t.Fatal(err)
	}
}
