package aztablestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver {
		return testtables.AzureTables(t, "conf").Driver()
	})
}

func BenchmarkDriver(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) store.Driver {
		return testtables.AzureTables(b, "bench").Driver()
	})
}

// noAmbientCredentials clears the environment the driver reads credentials from.
func noAmbientCredentials(t *testing.T) {
	for _, v := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"} {
		t.Setenv(v, "")
	}
}

func TestOpenErrors(t *testing.T) {
	noAmbientCredentials(t)
	endpoint := testservers.AzuriteAddrs(t).Table
	missing := testtables.AzureTableName("missing")
	for _, tc := range []struct {
		url  string
		want string // in the message
		is   error  // wrapped sentinel, if any
	}{
		{testtables.AzuriteURL(t, "a_b"), "table name", store.ErrInvalid},
		{testtables.AzuriteURL(t, "ab"), "table name", store.ErrInvalid},
		{testtables.AzuriteURL(t, "Tables"), "table name", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "tabel=x"), `unknown parameter "tabel"`, store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "create=yes"), "create", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "cosmos=maybe"), "cosmos", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "max_row_bytes=255"), "max_row_bytes", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", fmt.Sprintf("max_row_bytes=%d", aztablestore.MaxRowBytes+1)), "max_row_bytes", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "endpoint=ftp://x"), "endpoint", store.ErrInvalid},
		{testtables.AzuriteURL(t, "orders", "endpoint="+endpoint+"?sig=secret"), "SAS", store.ErrInvalid},
		{"aztables://x:y@orders/more?endpoint=" + endpoint, "path", store.ErrInvalid},
		{"aztables://devstoreaccount1@orders?endpoint=" + endpoint, "ACCOUNT:KEY@", store.ErrInvalid},
		{"aztables://devstoreaccount1:not%2Fbase64!@orders?endpoint=" + endpoint, "credentials", store.ErrInvalid},
		// No credentials anywhere.
		{"aztables://orders", "no Azure endpoint or credentials", store.ErrInvalid},
		{"aztables://orders?endpoint=" + endpoint, "https", store.ErrInvalid},
		// A table that is not there, and an endpoint where nothing listens.
		{testtables.AzuriteURL(t, missing), "create=true", nil},
		{testtables.AzuriteURL(t, "orders", "endpoint=http://127.0.0.1:1/x"), "unavailable", store.ErrUnavailable},
		// A wrong key: the service refuses.
		{strings.Replace(testtables.AzuriteURL(t, "orders"), url.UserPassword("", testservers.AzuriteKey).String()[1:], "c2VjcmV0", 1), "AuthorizationFailure", nil},
	} {
		_, err := store.Open(t.Context(), tc.url)
		if err == nil {
			t.Errorf("Open(%s) succeeded", tc.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Open(%s) = %v\nwant an error mentioning %q (wrapping %v)", tc.url, err, tc.want, tc.is)
		}
		for _, secret := range []string{testservers.AzuriteKey, url.QueryEscape(testservers.AzuriteKey), "c2VjcmV0"} {
			if strings.Contains(msg, secret) {
				t.Errorf("Open(%s): the error shows a secret: %v", tc.url, err)
			}
		}
	}
	if _, err := store.Open(t.Context(), testtables.AzuriteURL(t, missing)); err == nil {
		t.Error("a failed Open without create=true created the table")
	}
}

func TestCredentialsFromEnvironment(t *testing.T) {
	noAmbientCredentials(t)
	endpoint := testservers.AzuriteAddrs(t).Table
	table := testtables.AzureTableName("env")
	check := func(rawURL string) {
		t.Helper()
		tbl, err := store.Open(t.Context(), rawURL)
		if err != nil {
			t.Fatalf("Open(%s): %v", rawURL, err)
		}
		defer tbl.Close()
		if _, err := tbl.Update(t.Context(), store.Key{Partition: "p", Sort: rawURL}, store.Always(), store.Update{store.SetAttr(store.Attr("ok"), true)}); err != nil {
			t.Fatal(err)
		}
	}

	t.Setenv("AZURE_STORAGE_ACCOUNT", testservers.AzuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", testservers.AzuriteKey)
	check("aztables://" + table + "?create=true&endpoint=" + url.QueryEscape(endpoint))

	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", fmt.Sprintf("AccountName=%s;AccountKey=%s;TableEndpoint=%s", testservers.AzuriteAccount, testservers.AzuriteKey, endpoint))
	check("aztables://" + table)
	if _, err := store.Open(t.Context(), "aztables://"+table+"?endpoint="+url.QueryEscape(endpoint)); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("endpoint= with a connection string: err = %v, want a conflict", err)
	}
	// The URL's own key comes first.
	check(testtables.AzuriteURL(t, table))

	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	if _, err := store.Open(t.Context(), "aztables://"+table+"?endpoint="+url.QueryEscape(endpoint)); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "AZURE_STORAGE_ACCOUNT") {
		t.Errorf("AZURE_STORAGE_KEY without AZURE_STORAGE_ACCOUNT: err = %v", err)
	}
}

func TestRedactedName(t *testing.T) {
	tbl := testtables.AzureTables(t, "redact")
	if name := tbl.Name(); strings.Contains(name, testservers.AzuriteKey) || strings.Contains(name, url.QueryEscape(testservers.AzuriteKey)) || !strings.Contains(name, testservers.AzuriteAccount) {
		t.Errorf("table name %q shows the key or hides the account", name)
	}
}

// Random sort keys, heavy in the characters Azure forbids or orders differently, come back
// from Azure intact and in byte order.
func TestEscapedKeysOnAzure(t *testing.T) {
	d := testtables.AzureTables(t, "keys").Driver()
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"", "/", "\\", "#", "?", "'", "%", "+", " ", "\x00", "\x1f", "\x7f", "\u0085", "é", "\U0001F600", "\uffff", "a", "Z", "0", "|", "~", "!", "[", ">", "."}
	partition := "p/#?\\'é"
	var want []string
	for len(want) < 60 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		k := b.String()
		if slices.Contains(want, k) {
			continue
		}
		want = append(want, k)
		if _, err := d.Update(t.Context(), store.Key{Partition: partition, Sort: k}, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("k"), k)}); err != nil {
			t.Fatalf("creating row %q: %v", k, err)
		}
	}
	slices.Sort(want)
	rows, err := d.Scan(t.Context(), partition, store.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range rows {
		got = append(got, row.Key.Sort)
		if row.Key.Partition != partition || row.Attrs["k"] != row.Key.Sort {
			t.Errorf("row %v holds %v", row.Key, row.Attrs)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("scan order\n got %q\nwant %q", got, want)
	}
	for _, k := range want[:5] {
		if a, found, err := d.Get(t.Context(), store.Key{Partition: partition, Sort: k}); err != nil || !found || a["k"] != k {
			t.Errorf("Get(%q) = %v, %v, %v", k, a, found, err)
		}
	}
}

// On Cosmos DB the driver sorts scans itself and reads whole partitions; Azurite stands in.
func TestUnorderedBackend(t *testing.T) {
	tbl := testtables.Open(t, testtables.AzuriteURL(t, testtables.AzureTableName("cosmos"), "create=true", "cosmos=true"))
	d := tbl.Driver()
	for _, s := range []string{"c", "a", "d", "b"} {
		if _, err := d.Update(t.Context(), store.Key{Partition: "p", Sort: s}, store.Always(), store.Update{store.SetAttr(store.Attr("s"), s)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		opts store.ScanOptions
		want []string
	}{
		{store.ScanOptions{Limit: 2}, []string{"a", "b"}},
		{store.ScanOptions{Reverse: true, Limit: 1}, []string{"d"}},
		{store.ScanOptions{Projection: []store.Path{}}, []string{"a", "b", "c", "d"}},
	} {
		rows, err := d.Scan(t.Context(), "p", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Key.Sort)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Scan(%+v) = %q, want %q", tc.opts, got, tc.want)
		}
	}
}

// Creates in one partition go in one transaction, and each still behaves as Update when some
// row exists already.
func TestCreateGroup(t *testing.T) {
	d := testtables.AzureTables(t, "group").Driver()
	create := func(sorts ...string) []store.UpdateResult {
		t.Helper()
		var ups []store.BatchUpdate
		for _, s := range sorts {
			ups = append(ups, store.BatchUpdate{Key: store.Key{Partition: "i|1", Sort: s}, Cond: store.RowAbsent(),
				Update: store.Update{store.SetAttr(store.Attr("v"), s+"@"+strings.Join(sorts, ","))}})
		}
		rs, err := store.UpdateBatch(t.Context(), d, ups)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	check := func(rs []store.UpdateResult, applied []bool, values []string) {
		t.Helper()
		for i, r := range rs {
			if r.Applied != applied[i] || r.Attrs["v"] != values[i] {
				t.Errorf("result %d = %+v, want applied=%v v=%q", i, r, applied[i], values[i])
			}
		}
	}
	check(create("r1", "r2", "r3"), []bool{true, true, true}, []string{"r1@r1,r2,r3", "r2@r1,r2,r3", "r3@r1,r2,r3"})
	check(create("r0", "r2", "r4"), []bool{true, false, true}, []string{"r0@r0,r2,r4", "r2@r1,r2,r3", "r4@r0,r2,r4"})
	rows, err := d.Scan(t.Context(), "i|1", store.ScanOptions{})
	if err != nil || len(rows) != 5 {
		t.Fatalf("Scan = %v, %v; want 5 rows", rows, err)
	}
	// The same key twice: the second sees the first, as in a sequence of Updates.
	rs, err := store.UpdateBatch(t.Context(), d, []store.BatchUpdate{
		{Key: store.Key{Partition: "i|2", Sort: "x"}, Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "first")}},
		{Key: store.Key{Partition: "i|2", Sort: "x"}, Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "second")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(rs, []bool{true, false}, []string{"first", "first"})
}

// The largest row the driver accepts (15 chunks) round-trips; one byte more is refused.
func TestLargestRow(t *testing.T) {
	tbl := testtables.Open(t, testtables.AzuriteURL(t, testtables.AzureTableName("big"), "create=true", fmt.Sprintf("max_row_bytes=%d", aztablestore.MaxRowBytes)))
	d := tbl.Driver()
	k := store.Key{Partition: "p", Sort: "big"}
	size := func(b []byte) int {
		return len(k.Partition) + len(k.Sort) + len(store.EncodeAttrs(store.Attrs{"b": b}))
	}
	big := bytes.Repeat([]byte{7}, aztablestore.MaxRowBytes)
	big = big[:2*len(big)-size(big)] // less the overhead of the keys and the encoding
	if n := size(big); n != aztablestore.MaxRowBytes {
		t.Fatalf("test row is %d bytes, want %d", n, aztablestore.MaxRowBytes)
	}
	if _, err := d.Update(t.Context(), k, store.Always(), store.Update{store.SetAttr(store.Attr("b"), append(big, 0))}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a row one byte over the limit: err = %v, want store.ErrTooLarge", err)
	}
	if _, err := d.Update(t.Context(), k, store.Always(), store.Update{store.SetAttr(store.Attr("b"), big)}); err != nil {
		t.Fatal(err)
	}
	if a, _, err := d.Get(t.Context(), k); err != nil || !bytes.Equal(a["b"].([]byte), big) {
		t.Errorf("the largest row did not round-trip: %v", err)
	}
}

func TestClosed(t *testing.T) {
	d := testtables.AzureTables(t, "closed").Driver()
	d.Close()
	ctx := context.Background()
	if _, _, err := d.Get(ctx, store.Key{Partition: "p", Sort: "s"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := d.Scan(ctx, "p", store.ScanOptions{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Scan after Close: %v", err)
	}
	if _, err := store.UpdateBatch(ctx, d, []store.BatchUpdate{{Key: store.Key{Partition: "p", Sort: "a"}, Cond: store.RowAbsent()}, {Key: store.Key{Partition: "p", Sort: "b"}, Cond: store.RowAbsent()}}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("UpdateBatch after Close: %v", err)
	}
}

func TestDrop(t *testing.T) {
	name := testtables.AzureTableName("drop")
	tbl := testtables.Open(t, testtables.AzuriteURL(t, name, "create=true"))
	if _, err := tbl.Update(t.Context(), store.Key{Partition: "p", Sort: "s"}, store.Always(), store.Update{store.SetAttr(store.Attr("x"), true)}); err != nil {
		t.Fatal(err)
	}
	dr := tbl.Driver().(store.Dropper)
	for range 2 { // dropping a dropped table is not an error
		if err := dr.Drop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Open(t.Context(), testtables.AzuriteURL(t, name)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open after Drop: %v, want the table to be gone", err)
	}
}

// Another writer changes rows this driver has cached, and the partition tail it has hinted:
// updates and reverse scans still see the rows as they are.
func TestStaleCaches(t *testing.T) {
	url := testtables.AzuriteURL(t, testtables.AzureTableName("stale"), "create=true")
	d1, d2 := testtables.Open(t, url).Driver(), testtables.Open(t, url).Driver()
	ctx := t.Context()
	k := store.Key{Partition: "p", Sort: "n"}
	update := func(d store.Driver, k store.Key, c store.Cond, m store.Mutation) store.UpdateResult {
		t.Helper()
		r, err := d.Update(ctx, k, c, store.Update{m})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	update(d1, k, store.Always(), store.SetAttr(store.Attr("n"), int64(1)))
	update(d2, k, store.Always(), store.AddInt(store.Attr("n"), 1))
	if r := update(d1, k, store.Equal(store.Attr("n"), int64(1)), store.AddInt(store.Attr("n"), 10)); r.Applied || r.Attrs["n"] != int64(2) {
		t.Errorf("CAS from a stale n=1 = %+v, want not applied with n=2", r)
	}
	update(d2, k, store.Always(), store.AddInt(store.Attr("n"), 1))
	if r := update(d1, k, store.Always(), store.AddInt(store.Attr("n"), 1)); !r.Applied || r.Attrs["n"] != int64(4) {
		t.Errorf("add over a stale cached row = %+v, want n=4", r)
	}
	if ok, err := d2.Delete(ctx, k, store.Always()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if r := update(d1, k, store.Exists(store.Attr("n")), store.AddInt(store.Attr("n"), 1)); r.Applied || r.Attrs != nil {
		t.Errorf("update of a row deleted elsewhere = %+v, want not applied, no row", r)
	}

	last := func() string {
		t.Helper()
		rows, err := d1.Scan(ctx, "q", store.ScanOptions{Reverse: true, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			return ""
		}
		return rows[0].Key.Sort
	}
	put := func(sorts ...string) {
		for _, s := range sorts {
			update(d2, store.Key{Partition: "q", Sort: s}, store.Always(), store.SetAttr(store.Attr("x"), true))
		}
	}
	del := func(sorts ...string) {
		for _, s := range sorts {
			if _, err := d2.Delete(ctx, store.Key{Partition: "q", Sort: s}, store.Always()); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("a", "b", "c")
	for _, step := range []struct {
		change func()
		want   string
	}{
		{func() {}, "c"},
		{func() { put("d") }, "d"},
		{func() { del("d") }, "c"},
		{func() { del("c", "b") }, "a"},
		{func() { del("a") }, ""},
		{func() { put("0") }, "0"},
	} {
		step.change()
		if got := last(); got != step.want {
			t.Errorf("last row = %q, want %q", got, step.want)
		}
	}
}

// Create-if-absent inserts without reading first; on an existing row it must still report the
// failed condition, even when its value would not fit.
func TestCreateIfAbsentOnExistingRow(t *testing.T) {
	d := testtables.AzureTables(t, "exists").Driver()
	k := store.Key{Partition: "p", Sort: "k"}
	if _, err := d.Update(t.Context(), k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "first")}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{"second", bytes.Repeat([]byte{1}, d.Limits().MaxRowBytes)} {
		r, err := d.Update(t.Context(), k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), v)})
		if err != nil || r.Applied || r.Attrs["v"] != "first" {
			t.Errorf("create-if-absent of an existing row = %+v, %v; want not applied, v=first", r, err)
		}
	}
}
