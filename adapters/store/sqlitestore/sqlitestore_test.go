package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		d, err := sqlitestore.New(filepath.Join(t.TempDir(), "conformance.db"), sqlitestore.DefaultTable, sqlitestore.DefaultMaxRowBytes)
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func BenchmarkDriver(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) store.Driver {
		d, err := sqlitestore.New(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.DefaultTable, sqlitestore.DefaultMaxRowBytes)
		if err != nil {
			b.Fatal(err)
		}
		return d
	})
}

func sqliteURL(path string, query ...string) string {
	u := "sqlite://" + path
	if len(query) > 0 {
		u += "?" + strings.Join(query, "&")
	}
	return u
}

func mustOpen(t *testing.T, rawURL string) *store.Table {
	t.Helper()
	tbl, err := store.Open(t.Context(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// A new file gets 16 KB pages, in which a row of a few kilobytes stays in its b-tree page; a file
// made with other pages keeps them, and its rows.
func TestPageSize(t *testing.T) {
	ctx := context.Background()
	pageSize := func(path string) int {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	row := store.Update{store.SetAttr(store.Attr("v"), int64(1))}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	d, err := sqlitestore.New(fresh, sqlitestore.DefaultTable, sqlitestore.DefaultMaxRowBytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Update(ctx, store.Key{Partition: "p", Sort: "s"}, store.Always(), row); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if got := pageSize(fresh); got != 16384 {
		t.Errorf("a new file has %d-byte pages, want 16384", got)
	}

	old := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", old)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`PRAGMA page_size = 4096`, `PRAGMA journal_mode = WAL`, `CREATE TABLE other (x)`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	d, err = sqlitestore.New(old, sqlitestore.DefaultTable, sqlitestore.DefaultMaxRowBytes)
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{Partition: "p", Sort: "s"}
	if _, err := d.Update(ctx, key, store.Always(), row); err != nil {
		t.Fatal(err)
	}
	if a, found, err := d.Get(ctx, key); err != nil || !found || a["v"] != int64(1) {
		t.Fatalf("a row in a file with 4 KB pages: %v %v %v", a, found, err)
	}
	d.Close()
	if got := pageSize(old); got != 4096 {
		t.Errorf("a file made with 4096-byte pages has %d-byte pages after the driver opened it", got)
	}
}

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	tbl := mustOpen(t, sqliteURL(filepath.Join(dir, "a.db"), "table=orders", "max_row_bytes=1000"))
	if got := tbl.Limits().MaxRowBytes; got != 1000 {
		t.Errorf("max_row_bytes=1000 gave MaxRowBytes %d", got)
	}
	if got := mustOpen(t, sqliteURL(filepath.Join(dir, "b.db"))).Limits().MaxRowBytes; got != sqlitestore.DefaultMaxRowBytes {
		t.Errorf("default MaxRowBytes = %d, want %d", got, sqlitestore.DefaultMaxRowBytes)
	}
	// SQL keywords are fine as table names, and odd characters in the path are not URL syntax.
	odd := filepath.Join(dir, "with space #1?.db")
	d, err := sqlitestore.New(odd, "select", 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Update(t.Context(), store.Key{Partition: "p"}, store.Always(), store.Update{store.AddInt(store.Attr("n"), 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("database file not created at %q: %v", odd, err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.db")
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		want string
		is   error
	}{
		{"sqlite://./rel.db", "relative paths are not supported; write an absolute path as sqlite:///absolute/path/to/file.db", store.ErrInvalid},
		{"sqlite://host/x.db", `sqlite URL has host "host"; write the path after three slashes`, store.ErrInvalid},
		{"sqlite://", "sqlite URL names no file; want sqlite:///absolute/path/to/file.db", store.ErrInvalid},
		{"sqlite:rel.db", "must be written sqlite://", nil},
		{"sqlite:///", `database path "/" names a directory`, store.ErrInvalid},
		{sqliteURL(dir + "/"), "names a directory", store.ErrInvalid},
		{sqliteURL(dir), "is a directory, not a file", store.ErrInvalid},
		{sqliteURL(filepath.Join(dir, "missing", "sub", "x.db")), "directory " + filepath.Join(dir, "missing", "sub") + " for database x.db does not exist; create it first", fs.ErrNotExist},
		{sqliteURL(filepath.Join(notDir, "x.db")), notDir + " is not a directory", store.ErrInvalid},
		{sqliteURL(file, "table=1bad"), `table name "1bad" must be letters, digits and underscores`, store.ErrInvalid},
		{sqliteURL(file, "table=a-b"), `table name "a-b"`, store.ErrInvalid},
		{sqliteURL(file, "table="), `table name ""`, store.ErrInvalid},
		{sqliteURL(file, "tabel=t"), `unknown parameter "tabel" in sqlite URL (known: table, max_row_bytes)`, store.ErrInvalid},
		{sqliteURL(file, "max_row_bytes=big"), `max_row_bytes="big" must be an integer from 256`, store.ErrInvalid},
		{sqliteURL(file, "max_row_bytes=10"), `max_row_bytes="10" must be an integer from 256`, store.ErrInvalid},
		{sqliteURL(file, "max_row_bytes="), `max_row_bytes="" must be an integer from 256`, store.ErrInvalid},
	}
	for _, tt := range tests {
		tbl, err := store.Open(t.Context(), tt.url)
		if err == nil {
			tbl.Close()
			t.Errorf("Open(%q) succeeded, want an error containing %q", tt.url, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) error = %q, want it to contain %q", tt.url, err, tt.want)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("Open(%q) error = %q, want it to wrap %v", tt.url, err, tt.is)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created the missing directory (stat: %v)", err)
	}
	if _, err := sqlitestore.New("rel.db", "t", 1000); err == nil || !strings.Contains(err.Error(), `database path "rel.db" is not absolute`) {
		t.Errorf("New with a relative path: err = %v", err)
	}
	if _, err := sqlitestore.New(file, "t", 100); err == nil || !strings.Contains(err.Error(), "maxRowBytes 100 must be at least 256") {
		t.Errorf("New with a tiny limit: err = %v", err)
	}
}

func TestNotADatabase(t *testing.T) {
	file := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(file, []byte(strings.Repeat("this is not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitestore.New(file, "t", 1000)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("opening a non-database file: err = %v, want an error naming the file", err)
	}
}

func TestUnavailable(t *testing.T) {
	// A symlink loop cannot be opened, even by root.
	file := filepath.Join(t.TempDir(), "loop.db")
	if err := os.Symlink(file, file); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitestore.New(file, "t", 1000)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), file) {
		t.Errorf("opening an unopenable file: err = %v, want store.ErrUnavailable naming the file", err)
	}
}

func TestSharedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shared.db")
	a := mustOpen(t, sqliteURL(file))
	b := mustOpen(t, sqliteURL(file))
	other := mustOpen(t, sqliteURL(file, "table=other"))
	k := store.Key{Partition: "p", Sort: "s"}
	if err := a.Put(t.Context(), k, store.Attrs{"v": "from a"}); err != nil {
		t.Fatal(err)
	}
	got, found, err := b.Get(t.Context(), k)
	if err != nil || !found || got["v"] != "from a" {
		t.Fatalf("second handle read %v, %v, %v; want the first handle's write", got, found, err)
	}
	if _, found, _ := other.Get(t.Context(), k); found {
		t.Error("a different table in the same file sees the row")
	}
	// Closing one handle leaves the others working.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(t.Context(), k, store.Always(), store.Update{store.SetAttr(store.Attr("v"), "from b")}); err != nil {
		t.Fatalf("Update after another handle closed: %v", err)
	}
	if _, _, err := a.Get(t.Context(), k); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get on a closed table: err = %v, want store.ErrClosed", err)
	}
}

// Drop deletes its table, whatever its name (one of SQL's keywords, like the travel app's
// "order"), and no other table of the file.
func TestDrop(t *testing.T) {
	file := filepath.Join(t.TempDir(), "drop.db")
	k := store.Key{Partition: "p", Sort: "s"}
	for _, table := range []string{"order", "other"} {
		if err := mustOpen(t, sqliteURL(file, "table="+table)).Put(t.Context(), k, store.Attrs{"v": table}); err != nil {
			t.Fatal(err)
		}
	}
	order := mustOpen(t, sqliteURL(file, "table=order"))
	if err := order.Driver().(store.Dropper).Drop(t.Context()); err != nil {
		t.Fatalf("Drop of table order: %v", err)
	}
	if _, found, err := mustOpen(t, sqliteURL(file, "table=order")).Get(t.Context(), k); err != nil || found {
		t.Errorf("after Drop, table order has the row (%v, %v)", found, err)
	}
	if got, found, err := mustOpen(t, sqliteURL(file, "table=other")).Get(t.Context(), k); err != nil || !found || got["v"] != "other" {
		t.Errorf("Drop of order lost table other's row: %v, %v, %v", got, found, err)
	}
}

func TestClosedDriver(t *testing.T) {
	d, err := sqlitestore.New(filepath.Join(t.TempDir(), "c.db"), "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	k := store.Key{Partition: "p"}
	if _, _, err := d.Get(t.Context(), k); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := d.Update(t.Context(), k, store.Always(), nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	if _, err := d.Scan(t.Context(), "p", store.ScanOptions{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Scan after Close: %v", err)
	}
	if _, err := d.Delete(t.Context(), k, store.Always()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	file := filepath.Join(t.TempDir(), "persist.db")
	rows := map[store.Key]store.Attrs{
		{Partition: "p", Sort: "a"}:          {"n": int64(-1), "b": []byte{0, 1}, "m": map[string]any{"k": true}},
		{Partition: "p", Sort: "b\x00c"}:     {"s": "nul in key"},
		{Partition: "p\xff", Sort: "\xfe"}:   {"s": "invalid UTF-8 in keys"},
		{Partition: "q", Sort: ""}:           {},
		{Partition: "日本", Sort: "ключ"}:      {"s": "unicode keys"},
		{Partition: "p", Sort: "z" + "\x00"}: {"s": "trailing nul"},
	}
	d, err := sqlitestore.New(file, "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range rows {
		upd := store.Update{}
		for name, v := range a {
			upd = append(upd, store.SetAttr(store.Attr(name), v))
		}
		if _, err := d.Update(t.Context(), k, store.Always(), upd); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = sqlitestore.New(file, "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for k, want := range rows {
		got, found, err := d.Get(t.Context(), k)
		if err != nil || !found || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after reopening, Get%s = %v, %v, %v; want %v", k, got, found, err, want)
		}
	}
	scanned, err := d.Scan(t.Context(), "p", store.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sorts []string
	for _, r := range scanned {
		sorts = append(sorts, r.Key.Sort)
	}
	if want := []string{"a", "b\x00c", "z\x00"}; fmt.Sprintf("%q", sorts) != fmt.Sprintf("%q", want) {
		t.Errorf("Scan after reopening gave sort keys %q, want %q", sorts, want)
	}
}

func TestCancelledContext(t *testing.T) {
	d, err := sqlitestore.New(filepath.Join(t.TempDir(), "ctx.db"), "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Update(ctx, store.Key{Partition: "p"}, store.Always(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a cancelled context: err = %v, want context.Canceled", err)
	}
	if _, found, err := d.Get(t.Context(), store.Key{Partition: "p"}); err != nil || found {
		t.Errorf("the cancelled Update wrote a row (found=%v, err=%v)", found, err)
	}
}

// Separate processes share a file through SQLite's locks. The test re-runs its own binary as
// helper processes that, together with this process, race CAS increments on one counter.
const (
	helperEnv = "SQLITESTORE_HELPER"
	// perProcess is how many increments each process must get applied.
	perProcess = 100
)

var counterKey = store.Key{Partition: "p", Sort: "counter"}

func TestHelperProcess(t *testing.T) {
	file, id, ok := strings.Cut(os.Getenv(helperEnv), "|")
	if !ok {
		t.Skip("helper for TestMultiProcess")
	}
	d, err := sqlitestore.New(file, "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Report readiness, then wait for the start signal so every process contends at once.
	ctx := t.Context()
	if _, err := d.Update(ctx, store.Key{Partition: "ready", Sort: id}, store.Always(), nil); err != nil {
		t.Fatal(err)
	}
	for {
		_, found, err := d.Get(ctx, store.Key{Partition: "start"})
		if err != nil {
			t.Fatal(err)
		}
		if found {
			break
		}
		time.Sleep(time.Millisecond)
	}
	failed, err := casIncrements(ctx, d, perProcess)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("failed=%d\n", failed)
}

func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	file := filepath.Join(t.TempDir(), "multi.db")
	d, err := sqlitestore.New(file, "t", 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := d.Update(ctx, counterKey, store.Always(), store.Update{store.SetAttr(store.Attr("n"), int64(0))}); err != nil {
		t.Fatal(err)
	}

	const helpers = 2
	var wg sync.WaitGroup
	outs := make([][]byte, helpers)
	errs := make([]error, helpers)
	for i := range helpers {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d", helperEnv, file, i))
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	defer wg.Wait()
	for {
		ready, err := d.Scan(ctx, "ready", store.ScanOptions{})
		if err != nil {
			t.Fatalf("waiting for helpers: %v", err)
		}
		if len(ready) == helpers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := d.Update(ctx, store.Key{Partition: "start"}, store.Always(), nil); err != nil {
		t.Fatal(err)
	}
	failed, err := casIncrements(ctx, d, perProcess)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range helpers {
		if errs[i] != nil {
			t.Fatalf("helper %d: %v\n%s", i, errs[i], outs[i])
		}
		_, after, ok := strings.Cut(string(outs[i]), "failed=")
		n, err := strconv.Atoi(strings.Fields(after + " ")[0])
		if !ok || err != nil {
			t.Fatalf("helper %d printed no failure count:\n%s", i, outs[i])
		}
		failed += n
	}
	a, _, err := d.Get(ctx, counterKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64((helpers + 1) * perProcess); a["n"] != want {
		t.Errorf("counter = %v, want %d: %d processes each applied %d increments", a["n"], want, helpers+1, perProcess)
	}
	t.Logf("%d CAS attempts lost a race", failed)
}

// casIncrements applies n compare-and-swap increments of the shared counter, retrying lost
// races, and returns how many attempts lost.
func casIncrements(ctx context.Context, d store.Driver, n int) (failed int, err error) {
	a, _, err := d.Get(ctx, counterKey)
	if err != nil {
		return 0, err
	}
	for applied := 0; applied < n; {
		old, _ := a["n"].(int64)
		r, err := d.Update(ctx, counterKey, store.Equal(store.Attr("n"), old), store.Update{store.AddInt(store.Attr("n"), 1)})
		if err != nil {
			return failed, err
		}
		if r.Applied {
			applied++
		} else {
			failed++
		}
		a = r.Attrs
	}
	return failed, nil
}
