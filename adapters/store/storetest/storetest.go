// Package storetest is the conformance suite every store.Driver must pass, in the style of the
// Go CDK's drivertest packages. A driver's test wires it up with a harness that returns a fresh,
// empty driver:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunConformanceTests(t, func(t *testing.T) store.Driver { return mydriver.New(...) })
//	}
//
// The suite uses only the public store API (the Driver interface, conditions, updates and the
// sentinel errors), so every backend runs it unchanged. It pins down the contract Beldi relies
// on: conditional updates that evaluate and apply atomically and report the row they saw,
// exact value types, partition scans ordered by sort key, and size limits that write nothing.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/suite"
)

// RunConformanceTests runs the suite under go test. newHarness must return a fresh, empty
// driver on each call; the suite closes it when the subtest ends.
func RunConformanceTests(t *testing.T, newHarness func(t *testing.T) store.Driver) {
	Suite(t, func(t suite.T) store.Driver { return newHarness(t.(*testing.T)) })
}

// Suite runs the conformance tests as subtests of t, under go test or from `ssfkit
// conformance` against a live backend.
func Suite(t suite.T, newHarness func(t suite.T) store.Driver) {
	type test struct {
		name string
		fn   func(suite.T, store.Driver)
	}
	tests := []test{
		{"GetMissing", testGetMissing},
		{"UpdateCreatesRow", testUpdateCreatesRow},
		{"CreateIfAbsent", testCreateIfAbsent},
		{"FailedConditionChangesNothing", testFailedCondition},
		{"AppliedReturnsNewAttrs", testAppliedReturnsNewAttrs},
		{"Conditions", testConditions},
		{"ConditionsOnMissingRow", testConditionsOnMissingRow},
		{"Mutations", testMutations},
		{"FailedMutationChangesNothing", testFailedMutation},
		{"ValueTypesRoundTrip", testValueTypes},
		{"ScanOrder", testScanOrder},
		{"ScanReverseLimit", testScanReverseLimit},
		{"UpdateBatch", testUpdateBatch},
		{"ScanPartitionIsolation", testScanIsolation},
		{"ScanProjection", testScanProjection},
		{"ScanEmptyPartition", testScanEmpty},
		{"Delete", testDelete},
		{"TooLarge", testTooLarge},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ConcurrentAdd", testConcurrentAdd},
		{"ConcurrentCreateIfAbsent", testConcurrentCreate},
		{"ConcurrentConditionalDelete", testConcurrentConditionalDelete},
		{"PresumptionsAreOnlyHints", testPresumptions},
		{"GetProjected", testGetProjected},
	}
	// Optional interfaces get their own tests when the driver has them.
	var transactor, sqlTransactor, atomicBatcher bool
	suite.Run(t, "Capabilities", func(t suite.T) {
		d := newHarness(t)
		defer d.Close()
		_, batcher := d.(store.Batcher)
		_, transactor = d.(store.Transactor)
		_, sqlTransactor = d.(store.SQLTransactor)
		_, atomicBatcher = d.(store.AtomicBatcher)
		_, dropper := d.(store.Dropper)
		t.Logf("Batcher %v, AtomicBatcher %v, Transactor %v, SQLTransactor %v, Dropper %v; MaxRowBytes %d", batcher, atomicBatcher, transactor, sqlTransactor, dropper, d.Limits().MaxRowBytes)
	})
	if atomicBatcher {
		tests = append(tests, test{"AtomicBatchAllOrNothing", testAtomicBatch})
	}
	if transactor {
		tests = append(tests,
			test{"TransactCommits", testTransactCommits},
			test{"TransactRollsBack", testTransactRollsBack},
			test{"ConcurrentTransactions", testConcurrentTransactions})
	}
	if sqlTransactor {
		for _, s := range sqlTests() {
			tests = append(tests, test{s.name, s.fn})
		}
	}
	for _, tc := range tests {
		suite.Run(t, tc.name, func(t suite.T) {
			d := newHarness(t)
			t.Cleanup(func() {
				if err := d.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, d)
		})
	}
}

// h wraps a driver with helpers that fail the test on unexpected errors.
type h struct {
	t suite.T
	d store.Driver
}

func (h h) get(key store.Key) (store.Attrs, bool) {
	h.t.Helper()
	a, found, err := h.d.Get(h.t.Context(), key)
	if err != nil {
		h.t.Fatalf("Get%s: %v", key, err)
	}
	return a, found
}

// mustGet returns a row that must exist.
func (h h) mustGet(key store.Key) store.Attrs {
	h.t.Helper()
	a, found := h.get(key)
	if !found {
		h.t.Fatalf("Get%s: row not found", key)
	}
	return a
}

func (h h) update(key store.Key, cond store.Cond, muts ...store.Mutation) store.UpdateResult {
	h.t.Helper()
	r, err := h.d.Update(h.t.Context(), key, cond, muts)
	if err != nil {
		h.t.Fatalf("Update%s if %s: %v", key, cond, err)
	}
	return r
}

// put creates a row holding attrs.
func (h h) put(key store.Key, attrs store.Attrs) {
	h.t.Helper()
	if r := h.update(key, store.RowAbsent(), sets(attrs)...); !r.Applied {
		h.t.Fatalf("creating row %s: it already exists as %s", key, show(r.Attrs))
	}
}

func (h h) scan(partition string, projection ...store.Path) []store.Row {
	h.t.Helper()
	rows, err := h.d.Scan(h.t.Context(), partition, store.ScanOptions{Projection: projection})
	if err != nil {
		h.t.Fatalf("Scan(%q): %v", partition, err)
	}
	return rows
}

func (h h) delete(key store.Key, cond store.Cond) bool {
	h.t.Helper()
	ok, err := h.d.Delete(h.t.Context(), key, cond)
	if err != nil {
		h.t.Fatalf("Delete%s if %s: %v", key, cond, err)
	}
	return ok
}

// expectRow fails unless the row holds exactly want (nil: the row must not exist).
func (h h) expectRow(key store.Key, want store.Attrs) {
	h.t.Helper()
	got, found := h.get(key)
	switch {
	case want == nil && found:
		h.t.Errorf("Get%s = %v, want no row", key, got)
	case want != nil && !found:
		h.t.Errorf("Get%s: no row, want %v", key, want)
	case want != nil && !equalAttrs(got, want):
		h.t.Errorf("Get%s = %s\nwant %s", key, show(got), show(want))
	}
}

func sets(a store.Attrs) store.Update {
	var u store.Update
	for _, k := range sortedKeys(a) {
		u = append(u, store.SetAttr(store.Attr(k), a[k]))
	}
	return u
}

func key(sort string) store.Key { return store.Key{Partition: "p", Sort: sort} }

func testGetMissing(t suite.T, d store.Driver) {
	h := h{t, d}
	a, found := h.get(key("missing"))
	if found || a != nil {
		t.Errorf("Get of a missing row = %v, %v; want nil, false", a, found)
	}
}

func testUpdateCreatesRow(t suite.T, d store.Driver) {
	h := h{t, d}
	r := h.update(key("a"), store.Always(), store.SetAttr(store.Attr("x"), int64(1)))
	if !r.Applied || !equalAttrs(r.Attrs, store.Attrs{"x": int64(1)}) {
		t.Errorf("Update if true on a missing row = %+v, want applied with x=1", r)
	}
	h.expectRow(key("a"), store.Attrs{"x": int64(1)})

	r = h.update(key("b"), store.NotExists(store.Attr("x")), store.AddInt(store.Attr("n"), 5))
	if !r.Applied {
		t.Errorf("Update if not_exists(x) on a missing row was not applied")
	}
	h.expectRow(key("b"), store.Attrs{"n": int64(5)})

	r = h.update(key("c"), store.RowExists(), store.SetAttr(store.Attr("x"), int64(1)))
	if r.Applied || r.Attrs != nil {
		t.Errorf("Update if row_exists() on a missing row = %+v, want not applied and nil Attrs", r)
	}
	h.expectRow(key("c"), nil)
}

func testCreateIfAbsent(t suite.T, d store.Driver) {
	h := h{t, d}
	r := h.update(key("a"), store.RowAbsent(), store.SetAttr(store.Attr("owner"), "first"))
	if !r.Applied {
		t.Fatalf("first create-if-absent was not applied: %+v", r)
	}
	r = h.update(key("a"), store.RowAbsent(), store.SetAttr(store.Attr("owner"), "second"), store.SetAttr(store.Attr("extra"), true))
	if r.Applied {
		t.Fatal("second create-if-absent was applied")
	}
	if !equalAttrs(r.Attrs, store.Attrs{"owner": "first"}) {
		t.Errorf("failed create-if-absent returned %s, want the existing row owner=\"first\"", show(r.Attrs))
	}
	h.expectRow(key("a"), store.Attrs{"owner": "first"})
}

func testFailedCondition(t suite.T, d store.Driver) {
	h := h{t, d}
	row := store.Attrs{"n": int64(3), "s": "v", "m": map[string]any{"k": int64(1)}}
	h.put(key("a"), row)
	r := h.update(key("a"), store.Equal(store.Attr("n"), int64(4)),
		store.SetAttr(store.Attr("n"), int64(5)), store.RemoveAttr(store.Attr("s")), store.AddInt(store.Attr("m").Entry("k"), 1))
	if r.Applied {
		t.Fatal("update whose condition fails was applied")
	}
	if !equalAttrs(r.Attrs, row) {
		t.Errorf("failed update returned %s, want the current row %s", show(r.Attrs), show(row))
	}
	h.expectRow(key("a"), row)
}

func testAppliedReturnsNewAttrs(t suite.T, d store.Driver) {
	h := h{t, d}
	h.put(key("a"), store.Attrs{"n": int64(1), "gone": "x", "keep": "k"})
	r := h.update(key("a"), store.Equal(store.Attr("n"), int64(1)),
		store.AddInt(store.Attr("n"), 1), store.RemoveAttr(store.Attr("gone")), store.SetAttr(store.Attr("m").Entry("e"), "v"))
	want := store.Attrs{"n": int64(2), "keep": "k", "m": map[string]any{"e": "v"}}
	if !r.Applied || !equalAttrs(r.Attrs, want) {
		t.Errorf("applied update returned %+v, want applied with %s", r, show(want))
	}
	h.expectRow(key("a"), want)
}

// condRow holds one value of every type, so conditions can be checked against each.
var condRow = store.Attrs{
	"i":     int64(5),
	"neg":   int64(-3),
	"max":   int64(math.MaxInt64),
	"min":   int64(math.MinInt64),
	"s":     "abc",
	"empty": "",
	"b":     []byte{1, 2},
	"t":     true,
	"f":     false,
	"m":     map[string]any{"k": int64(1), "s": "x", "b": []byte{9}, "t": true},
}

func testConditions(t suite.T, d store.Driver) {
	h := h{t, d}
	k := key("row")
	h.put(k, condRow)
	var (
		attr           = store.Attr
		entry          = func(m, e string) store.Path { return store.Attr(m).Entry(e) }
		cmp            = store.Compare
		T, F           = store.Always(), store.Never()
		eq             = store.Equal
		and, or, not   = store.And, store.Or, store.Not
		exists, absent = store.Exists, store.NotExists
	)
	tests := []struct {
		c    store.Cond
		want bool
	}{
		{T, true},
		{F, false},
		{store.RowExists(), true},
		{store.RowAbsent(), false},
		{and(T, T), true},
		{and(T, F), false},
		{and(F, T), false},
		{and(T, T, F), false},
		{or(F, F), false},
		{or(F, T), true},
		{or(F, F, T), true},
		{not(T), false},
		{not(F), true},
		{not(not(T)), true},
		{and(or(F, T), not(F)), true},
		{or(and(T, F), not(T)), false},

		{exists(attr("i")), true},
		{exists(attr("empty")), true},
		{exists(attr("f")), true},
		{exists(attr("zz")), false},
		{exists(entry("m", "k")), true},
		{exists(entry("m", "zz")), false},
		{exists(entry("zz", "k")), false},
		{exists(entry("i", "k")), false},
		{absent(attr("zz")), true},
		{absent(attr("i")), false},
		{absent(entry("m", "zz")), true},
		{absent(entry("m", "k")), false},

		{eq(attr("i"), int64(5)), true},
		{eq(attr("i"), int64(6)), false},
		{cmp(attr("i"), store.Ne, int64(6)), true},
		{cmp(attr("i"), store.Ne, int64(5)), false},
		{cmp(attr("i"), store.Lt, int64(6)), true},
		{cmp(attr("i"), store.Lt, int64(5)), false},
		{cmp(attr("i"), store.Le, int64(5)), true},
		{cmp(attr("i"), store.Le, int64(4)), false},
		{cmp(attr("i"), store.Gt, int64(4)), true},
		{cmp(attr("i"), store.Gt, int64(5)), false},
		{cmp(attr("i"), store.Ge, int64(5)), true},
		{cmp(attr("i"), store.Ge, int64(6)), false},
		{cmp(attr("neg"), store.Lt, int64(0)), true},
		{cmp(attr("neg"), store.Gt, int64(-4)), true},
		{eq(attr("max"), int64(math.MaxInt64)), true},
		{cmp(attr("max"), store.Gt, int64(math.MaxInt64-1)), true},
		{eq(attr("min"), int64(math.MinInt64)), true},
		{cmp(attr("min"), store.Lt, int64(math.MinInt64+1)), true},

		{eq(attr("s"), "abc"), true},
		{eq(attr("s"), "ABC"), false},
		{cmp(attr("s"), store.Ne, "abd"), true},
		{cmp(attr("s"), store.Lt, "abd"), true},
		{cmp(attr("s"), store.Lt, "ab"), false},
		{cmp(attr("s"), store.Gt, "ab"), true},
		{cmp(attr("s"), store.Ge, "abc"), true},
		{cmp(attr("s"), store.Le, "abc"), true},
		{eq(attr("empty"), ""), true},
		{cmp(attr("empty"), store.Lt, "a"), true},

		{eq(attr("b"), []byte{1, 2}), true},
		{eq(attr("b"), []byte{1}), false},
		{cmp(attr("b"), store.Ne, []byte{1, 3}), true},
		{cmp(attr("b"), store.Lt, []byte{1, 3}), true},
		{cmp(attr("b"), store.Gt, []byte{1}), true},
		{cmp(attr("b"), store.Ge, []byte{1, 2}), true},
		{cmp(attr("b"), store.Le, []byte{1, 1, 9}), false},

		{eq(attr("t"), true), true},
		{eq(attr("t"), false), false},
		{cmp(attr("t"), store.Ne, false), true},
		{eq(attr("f"), false), true},
		{cmp(attr("f"), store.Ne, false), false},

		{eq(entry("m", "k"), int64(1)), true},
		{cmp(entry("m", "k"), store.Gt, int64(0)), true},
		{cmp(entry("m", "k"), store.Lt, int64(1)), false},
		{eq(entry("m", "s"), "x"), true},
		{cmp(entry("m", "s"), store.Gt, "w"), true},
		{eq(entry("m", "b"), []byte{9}), true},
		{eq(entry("m", "t"), true), true},

		// A comparison with a missing path is false, whatever the operator.
		{eq(attr("zz"), int64(0)), false},
		{cmp(attr("zz"), store.Ne, int64(0)), false},
		{cmp(attr("zz"), store.Lt, int64(1)), false},
		{eq(entry("m", "zz"), int64(1)), false},
		{cmp(entry("m", "zz"), store.Ne, int64(1)), false},
		{cmp(entry("zz", "k"), store.Ne, int64(1)), false},
		{not(eq(attr("zz"), int64(0))), true},

		// So is a comparison between different types, even !=.
		{eq(attr("i"), "5"), false},
		{cmp(attr("i"), store.Ne, "5"), false},
		{cmp(attr("s"), store.Gt, int64(0)), false},
		{eq(attr("b"), "\x01\x02"), false},
		{cmp(attr("b"), store.Ne, "x"), false},
		{eq(attr("s"), []byte("abc")), false},
		{eq(attr("t"), int64(1)), false},
		{cmp(attr("t"), store.Ne, int64(0)), false},
		{eq(attr("i"), true), false},
		{eq(entry("m", "k"), "1"), false},
		{eq(attr("m"), "x"), false},
	}
	for i, tt := range tests {
		r, err := d.Update(t.Context(), k, tt.c, store.Update{store.SetAttr(store.Attr("probe"), int64(i))})
		if err != nil {
			t.Errorf("Update if %s: %v", tt.c, err)
			continue
		}
		if r.Applied != tt.want {
			t.Errorf("Update if %s: Applied = %v, want %v", tt.c, r.Applied, tt.want)
		}
	}
	// Deletes evaluate the same conditions.
	h.put(key("del"), condRow)
	if h.delete(key("del"), cmp(attr("i"), store.Ne, "5")) {
		t.Error("Delete if i != \"5\" (type mismatch) deleted the row")
	}
	if !h.delete(key("del"), and(eq(entry("m", "s"), "x"), absent(attr("zz")))) {
		t.Error("Delete if m.s == \"x\" and not_exists(zz) did not delete the row")
	}
}

func testConditionsOnMissingRow(t suite.T, d store.Driver) {
	tests := []struct {
		c    store.Cond
		want bool
	}{
		{store.Always(), true},
		{store.Never(), false},
		{store.RowExists(), false},
		{store.RowAbsent(), true},
		{store.Exists(store.Attr("x")), false},
		{store.NotExists(store.Attr("x")), true},
		{store.NotExists(store.Attr("m").Entry("k")), true},
		{store.Equal(store.Attr("x"), int64(0)), false},
		{store.Compare(store.Attr("x"), store.Ne, int64(0)), false},
		{store.Compare(store.Attr("x"), store.Lt, "z"), false},
		{store.Not(store.Equal(store.Attr("x"), int64(0))), true},
		{store.Or(store.RowExists(), store.NotExists(store.Attr("x"))), true},
	}
	h := h{t, d}
	for i, tt := range tests {
		k := key(fmt.Sprintf("missing%02d", i))
		r := h.update(k, tt.c, store.SetAttr(store.Attr("created"), true))
		if r.Applied != tt.want {
			t.Errorf("Update of a missing row if %s: Applied = %v, want %v", tt.c, r.Applied, tt.want)
		}
		if !r.Applied && r.Attrs != nil {
			t.Errorf("Update of a missing row if %s: not applied but returned Attrs %v, want nil", tt.c, r.Attrs)
		}
		want := store.Attrs(nil)
		if tt.want {
			want = store.Attrs{"created": true}
		}
		h.expectRow(k, want)
	}
}

func testMutations(t suite.T, d store.Driver) {
	base := store.Attrs{"i": int64(10), "s": "x", "m": map[string]any{"a": int64(1), "b": "y"}}
	attr := store.Attr
	entry := func(m, e string) store.Path { return store.Attr(m).Entry(e) }
	tests := []struct {
		name string
		upd  store.Update
		want store.Attrs
	}{
		{"SetTopLevel", store.Update{store.SetAttr(attr("new"), []byte("v"))},
			store.Attrs{"i": int64(10), "s": "x", "m": base["m"], "new": []byte("v")}},
		{"SetOverwritesOtherType", store.Update{store.SetAttr(attr("i"), "ten")},
			store.Attrs{"i": "ten", "s": "x", "m": base["m"]}},
		{"SetWholeMap", store.Update{store.SetAttr(attr("m"), map[string]any{"z": false})},
			store.Attrs{"i": int64(10), "s": "x", "m": map[string]any{"z": false}}},
		{"SetMapEntry", store.Update{store.SetAttr(entry("m", "a"), int64(7)), store.SetAttr(entry("m", "c"), true)},
			store.Attrs{"i": int64(10), "s": "x", "m": map[string]any{"a": int64(7), "b": "y", "c": true}}},
		{"SetEntryCreatesMap", store.Update{store.SetAttr(entry("n", "k"), "v")},
			store.Attrs{"i": int64(10), "s": "x", "m": base["m"], "n": map[string]any{"k": "v"}}},
		{"RemoveAttr", store.Update{store.RemoveAttr(attr("s"))},
			store.Attrs{"i": int64(10), "m": base["m"]}},
		{"RemoveMap", store.Update{store.RemoveAttr(attr("m"))},
			store.Attrs{"i": int64(10), "s": "x"}},
		{"RemoveEntry", store.Update{store.RemoveAttr(entry("m", "a"))},
			store.Attrs{"i": int64(10), "s": "x", "m": map[string]any{"b": "y"}}},
		{"RemoveMissing", store.Update{store.RemoveAttr(attr("zz")), store.RemoveAttr(entry("m", "zz")), store.RemoveAttr(entry("zz", "k"))},
			base},
		{"AddToMissing", store.Update{store.AddInt(attr("c"), -2)},
			store.Attrs{"i": int64(10), "s": "x", "m": base["m"], "c": int64(-2)}},
		{"AddToExisting", store.Update{store.AddInt(attr("i"), 5)},
			store.Attrs{"i": int64(15), "s": "x", "m": base["m"]}},
		{"AddNegative", store.Update{store.AddInt(attr("i"), -15)},
			store.Attrs{"i": int64(-5), "s": "x", "m": base["m"]}},
		{"AddToEntry", store.Update{store.AddInt(entry("m", "a"), 2), store.AddInt(entry("m", "new"), 3)},
			store.Attrs{"i": int64(10), "s": "x", "m": map[string]any{"a": int64(3), "b": "y", "new": int64(3)}}},
		{"AppliedInOrder", store.Update{store.SetAttr(attr("c"), int64(1)), store.AddInt(attr("c"), 2), store.RemoveAttr(attr("s")), store.SetAttr(attr("s"), "again")},
			store.Attrs{"i": int64(10), "s": "again", "m": base["m"], "c": int64(3)}},
	}
	for i, tt := range tests {
		suite.Run(t, tt.name, func(t suite.T) {
			h := h{t, d}
			k := key(fmt.Sprintf("mut%02d", i))
			h.put(k, base)
			r := h.update(k, store.RowExists(), tt.upd...)
			if !r.Applied || !equalAttrs(r.Attrs, tt.want) {
				t.Errorf("Update(%v) = %+v, want applied with %s", tt.upd, r, show(tt.want))
			}
			h.expectRow(k, tt.want)
		})
	}
}

func testFailedMutation(t suite.T, d store.Driver) {
	row := store.Attrs{"s": "x", "b": []byte{1}, "m": map[string]any{"e": "y"}, "n": int64(1)}
	for i, upd := range []store.Update{
		{store.AddInt(store.Attr("s"), 1)},
		{store.AddInt(store.Attr("b"), 1)},
		{store.AddInt(store.Attr("m"), 1)},
		{store.AddInt(store.Attr("m").Entry("e"), 1)},
		{store.SetAttr(store.Attr("s").Entry("k"), int64(1))},
		// Earlier mutations in a failing update must not take effect either.
		{store.AddInt(store.Attr("n"), 1), store.SetAttr(store.Attr("new"), true), store.AddInt(store.Attr("s"), 1)},
	} {
		h := h{t, d}
		k := key(fmt.Sprintf("bad%02d", i))
		h.put(k, row)
		r, err := d.Update(t.Context(), k, store.Always(), upd)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Update(%v) = %+v, %v; want an error wrapping store.ErrInvalid", upd, r, err)
		}
		h.expectRow(k, row)
	}
}

func testValueTypes(t suite.T, d store.Driver) {
	h := h{t, d}
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	row := store.Attrs{
		"zero":    int64(0),
		"one":     int64(1),
		"neg":     int64(-1),
		"max":     int64(math.MaxInt64),
		"min":     int64(math.MinInt64),
		"beyond":  int64(1<<53 + 1), // not representable as float64
		"str":     "hello, 世界",
		"nul":     "a\x00b",
		"empty":   "",
		"bytes":   binary,
		"nobytes": []byte{},
		"true":    true,
		"false":   false,
		"map": map[string]any{
			"i": int64(math.MinInt64), "s": "", "b": []byte{0, 255}, "e": []byte{}, "t": true, "f": false, "text": "1",
		},
		"emptymap": map[string]any{},
		"digits":   "123", // a string that looks like a number stays a string
	}
	h.put(key("types"), row)
	h.expectRow(key("types"), row)
	rows := h.scan("p")
	if len(rows) != 1 || !equalAttrs(rows[0].Attrs, row) {
		t.Errorf("Scan returned %v, want one row %s", rows, show(row))
	}
	// A value overwritten by one of another type comes back with the new type.
	r := h.update(key("types"), store.Always(), store.SetAttr(store.Attr("one"), "1"), store.SetAttr(store.Attr("digits"), int64(123)))
	if got := r.Attrs["one"]; got != "1" {
		t.Errorf("after setting one=\"1\" got %#v", got)
	}
	if got := h.mustGet(key("types"))["digits"]; got != int64(123) {
		t.Errorf("after setting digits=123 got %#v", got)
	}
	// Returned values must not alias the store.
	a := h.mustGet(key("types"))
	a["bytes"].([]byte)[0] = 99
	a["map"].(map[string]any)["i"] = int64(7)
	h.update(key("types"), store.Always(), store.SetAttr(store.Attr("one"), int64(1)), store.SetAttr(store.Attr("digits"), "123"))
	h.expectRow(key("types"), row)
}

func testScanOrder(t suite.T, d store.Driver) {
	h := h{t, d}
	sorts := []string{"b", "a", "c", "a0", "B", "10", "9", "aa", "a_", "z\u00e9", "z~"}
	for i, s := range sorts {
		h.put(store.Key{Partition: "p", Sort: s}, store.Attrs{"i": int64(i)})
	}
	want := slices.Clone(sorts)
	slices.Sort(want) // byte-wise order, which is UTF-8 code point order
	rows := h.scan("p")
	var got []string
	for _, r := range rows {
		got = append(got, r.Key.Sort)
		if r.Key.Partition != "p" {
			t.Errorf("Scan(\"p\") returned a row with partition %q", r.Key.Partition)
		}
		if i := slices.Index(sorts, r.Key.Sort); i < 0 || !equalAttrs(r.Attrs, store.Attrs{"i": int64(i)}) {
			t.Errorf("Scan row %q has attrs %v", r.Key.Sort, r.Attrs)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Scan order = %q, want %q", got, want)
	}
}

func testScanReverseLimit(t suite.T, d store.Driver) {
	h := h{t, d}
	for _, s := range []string{"01", "03", "02", "10"} {
		h.put(store.Key{Partition: "p", Sort: s}, store.Attrs{"s": s, "big": []byte("xxxxxxxx")})
	}
	h.put(store.Key{Partition: "q", Sort: "99"}, store.Attrs{"s": "other"})
	for _, tc := range []struct {
		name string
		opts store.ScanOptions
		want []string
	}{
		{"Limit", store.ScanOptions{Limit: 2}, []string{"01", "02"}},
		{"Reverse", store.ScanOptions{Reverse: true}, []string{"10", "03", "02", "01"}},
		{"ReverseLimit1", store.ScanOptions{Reverse: true, Limit: 1}, []string{"10"}},
		{"ReverseLimit2", store.ScanOptions{Reverse: true, Limit: 2}, []string{"10", "03"}}, // a DAAL write's last two rows
		{"LimitAboveSize", store.ScanOptions{Limit: 10}, []string{"01", "02", "03", "10"}},
		{"ReverseLimitProjected", store.ScanOptions{Reverse: true, Limit: 1, Projection: []store.Path{store.Attr("s")}}, []string{"10"}},
	} {
		rows, err := d.Scan(t.Context(), "p", tc.opts)
		if err != nil {
			t.Fatalf("%s: Scan: %v", tc.name, err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Key.Sort)
			if r.Attrs["s"] != r.Key.Sort {
				t.Errorf("%s: row %s has attrs %v", tc.name, r.Key.Sort, r.Attrs)
			}
			if _, ok := r.Attrs["big"]; ok && tc.opts.Projection != nil {
				t.Errorf("%s: projection not applied: %v", tc.name, r.Attrs)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: sort keys = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Inside Transact, reads see the transaction's own writes, conditions keep their meaning, and
// everything lands at the commit.
// A projected get (store.GetProjected, with the driver's ProjectedGetter if it has one) returns
// what a projected scan of the row would.
func testGetProjected(t suite.T, d store.Driver) {
	h := h{t, d}
	k := key("projected")
	h.put(k, store.Attrs{"a": "kept", "b": []byte("dropped"), "m": map[string]any{"x": int64(1), "y": int64(2)}})
	proj := []store.Path{store.Attr("a"), store.Attr("m").Entry("x"), store.Attr("absent")}
	a, found, err := store.GetProjected(t.Context(), d, k, proj)
	if err != nil || !found || !reflect.DeepEqual(a, store.Attrs{"a": "kept", "m": map[string]any{"x": int64(1)}}) {
		t.Fatalf("GetProjected: %v %v %v", a, found, err)
	}
	if rows := h.scan(k.Partition, proj...); len(rows) != 1 || !reflect.DeepEqual(rows[0].Attrs, a) {
		t.Fatalf("a projected scan returns %+v, the get %v", rows, a)
	}
	if a, found, err := store.GetProjected(t.Context(), d, key("missing"), proj); err != nil || found || a != nil {
		t.Fatalf("GetProjected of a missing row: %v %v %v", a, found, err)
	}
}

// An update after a presumption (store.Presumer, on the driver or a transaction's driver) is
// decided on the row as the store holds it, whatever was presumed: exactly, a row that changed
// since, attributes on which the condition comes out the other way, a row that is gone.
func testPresumptions(t suite.T, d store.Driver) {
	h := h{t, d}
	ways := map[string]func(fn func(store.Driver) error) error{}
	if _, ok := d.(store.Presumer); ok {
		ways["driver"] = func(fn func(store.Driver) error) error { return fn(d) }
	}
	if tr, ok := d.(store.Transactor); ok {
		ways["transaction"] = func(fn func(store.Driver) error) error { return tr.Transact(t.Context(), fn) }
	}
	if _, ok := d.(store.Presumer); ok {
		if _, ok := d.(store.Batcher); ok {
			ways["batch"] = func(fn func(store.Driver) error) error { return fn(batchOfOne{d}) }
		}
		if _, ok := d.(store.AtomicBatcher); ok {
			ways["atomic batch"] = func(fn func(store.Driver) error) error { return fn(atomicBatchOfOne{d}) }
		}
	}
	n := store.Attr("n")
	for way, via := range ways {
		k := key("presumed-" + way)
		seen := h.update(k, store.Always(), store.SetAttr(n, int64(1))).Attrs
		try := func(what string, presumed store.Attrs, cond store.Cond, upd store.Update, check func(store.UpdateResult) bool) {
			t.Helper()
			var r store.UpdateResult
			err := via(func(tx store.Driver) error {
				if !store.Presume(tx, k, presumed) {
					return fmt.Errorf("the %s is a Presumer that refused a presumption", way)
				}
				var err error
				r, err = tx.Update(t.Context(), k, cond, upd)
				return err
			})
			if err != nil || !check(r) {
				t.Fatalf("%s, %s: %+v, %v", way, what, r, err)
			}
		}
		try("presumed exactly", seen, store.Equal(n, int64(1)), store.Update{store.AddInt(n, 1)}, func(r store.UpdateResult) bool {
			seen = r.Attrs
			return r.Applied && r.Attrs["n"] == int64(2)
		})
		h.update(k, store.Always(), store.SetAttr(store.Attr("x"), "other"))
		try("the row changed since", seen, store.Always(), store.Update{store.AddInt(n, 1)}, func(r store.UpdateResult) bool {
			return r.Applied && r.Attrs["n"] == int64(3) && r.Attrs["x"] == "other"
		})
		try("false on the presumption, true on the row", store.Attrs{"n": int64(99)}, store.Equal(n, int64(3)),
			store.Update{store.SetAttr(store.Attr("y"), "yes")}, func(r store.UpdateResult) bool { return r.Applied })
		try("true on the presumption, false on the row", store.Attrs{"n": int64(99)}, store.Equal(n, int64(99)),
			store.Update{store.SetAttr(store.Attr("z"), "no")}, func(r store.UpdateResult) bool { return !r.Applied && r.Attrs["n"] == int64(3) })
		h.expectRow(k, store.Attrs{"n": int64(3), "x": "other", "y": "yes"})
		h.delete(k, store.Always())
		try("the row is gone", seen, store.RowExists(), store.Update{store.SetAttr(n, int64(5))}, func(r store.UpdateResult) bool {
			return !r.Applied && r.Attrs == nil
		})
		h.expectRow(k, nil)
	}
}

// batchOfOne sends each update as a batch of one (store.Batcher), keeping the driver's
// presumptions: a batch must take them as an update does.
type batchOfOne struct{ store.Driver }

func (b batchOfOne) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, err := b.Driver.(store.Batcher).UpdateBatch(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

func (b batchOfOne) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(b.Driver, key, attrs)
}

// atomicBatchOfOne sends each update as an all-or-nothing batch of one (store.AtomicBatcher); a
// refused batch answers as a refused update, with the row as it is.
type atomicBatchOfOne struct{ store.Driver }

func (b atomicBatchOfOne) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, applied, err := b.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil || applied {
		if err != nil {
			return store.UpdateResult{}, err
		}
		return rs[0], nil
	}
	a, _, err := b.Driver.Get(ctx, key)
	return store.UpdateResult{Attrs: a}, err
}

func (b atomicBatchOfOne) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(b.Driver, key, attrs)
}

func testTransactCommits(t suite.T, d store.Driver) {
	h := h{t, d}
	h.put(key("taken"), store.Attrs{"v": "first"})
	err := d.(store.Transactor).Transact(t.Context(), func(tx store.Driver) error {
		if r, err := tx.Update(t.Context(), key("new"), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "a")}); err != nil || !r.Applied {
			return fmt.Errorf("create: %+v, %v", r, err)
		}
		if r, err := tx.Update(t.Context(), key("taken"), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("v"), "b")}); err != nil || r.Applied || r.Attrs["v"] != "first" {
			return fmt.Errorf("create over an existing row: %+v, %v", r, err)
		}
		if a, found, err := tx.Get(t.Context(), key("new")); err != nil || !found || a["v"] != "a" {
			return fmt.Errorf("read own write: %v %v %v", a, found, err)
		}
		rows, err := tx.Scan(t.Context(), key("").Partition, store.ScanOptions{Reverse: true, Limit: 1})
		if err != nil || len(rows) != 1 || rows[0].Key != key("taken") {
			return fmt.Errorf("scan: %+v, %v", rows, err)
		}
		if ok, err := tx.Delete(t.Context(), key("taken"), store.Always()); err != nil || !ok {
			return fmt.Errorf("delete: %v %v", ok, err)
		}
		_, err = store.UpdateBatch(t.Context(), tx, []store.BatchUpdate{{Key: key("n"), Cond: store.Always(), Update: store.Update{store.AddInt(store.Attr("n"), 3)}}})
		return err
	})
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	h.expectRow(key("new"), store.Attrs{"v": "a"})
	h.expectRow(key("taken"), nil)
	h.expectRow(key("n"), store.Attrs{"n": int64(3)})
}

// A function that fails leaves nothing behind, and its error comes back.
func testTransactRollsBack(t suite.T, d store.Driver) {
	h := h{t, d}
	h.put(key("kept"), store.Attrs{"v": "old"})
	boom := errors.New("boom")
	err := d.(store.Transactor).Transact(t.Context(), func(tx store.Driver) error {
		for _, k := range []string{"kept", "new"} {
			if _, err := tx.Update(t.Context(), key(k), store.Always(), store.Update{store.SetAttr(store.Attr("v"), "changed")}); err != nil {
				return err
			}
		}
		return fmt.Errorf("stop: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Transact = %v, want the function's error", err)
	}
	h.expectRow(key("kept"), store.Attrs{"v": "old"})
	h.expectRow(key("new"), nil)
}

// Concurrent transactions that read a counter and write it back plus one, through a
// conditional update pinned to the value read, lose no increment.
func testConcurrentTransactions(t suite.T, d store.Driver) {
	h := h{t, d}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				for {
					var applied bool
					err := d.(store.Transactor).Transact(t.Context(), func(tx store.Driver) error {
						a, _, err := tx.Get(t.Context(), key("c"))
						if err != nil {
							return err
						}
						n, _ := a["n"].(int64)
						cond := store.Not(store.Exists(store.Attr("n")))
						if n > 0 {
							cond = store.Equal(store.Attr("n"), n)
						}
						r, err := tx.Update(t.Context(), key("c"), cond, store.Update{store.SetAttr(store.Attr("n"), n+1)})
						applied = r.Applied
						return err
					})
					if err != nil {
						t.Errorf("Transact: %v", err)
						return
					}
					if applied {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	h.expectRow(key("c"), store.Attrs{"n": int64(workers * each)})
}

// testUpdateBatch runs through store.UpdateBatch, so it covers drivers with and without the
// optional Batcher interface: each update behaves as Update, results in order.
func testUpdateBatch(t suite.T, d store.Driver) {
	h := h{t, d}
	h.put(key("taken"), store.Attrs{"v": "first"})
	rs, err := store.UpdateBatch(t.Context(), d, []store.BatchUpdate{
		{Key: key("new"), Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "a")}},
		{Key: key("taken"), Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "b")}},
		{Key: key("other"), Cond: store.Always(), Update: store.Update{store.AddInt(store.Attr("n"), 2)}},
	})
	if err != nil {
		t.Fatalf("UpdateBatch: %v", err)
	}
	if len(rs) != 3 || !rs[0].Applied || rs[1].Applied || !rs[2].Applied {
		t.Fatalf("UpdateBatch results %+v, want applied, not applied, applied", rs)
	}
	if rs[1].Attrs["v"] != "first" {
		t.Errorf("failed update returned %v, want the current row", rs[1].Attrs)
	}
	h.expectRow(key("new"), store.Attrs{"v": "a"})
	h.expectRow(key("taken"), store.Attrs{"v": "first"})
	h.expectRow(key("other"), store.Attrs{"n": int64(2)})
}

func testScanIsolation(t suite.T, d store.Driver) {
	h := h{t, d}
	for _, p := range []string{"p", "p1", "p10", "q", "P"} {
		for _, s := range []string{"x", "y"} {
			h.put(store.Key{Partition: p, Sort: s}, store.Attrs{"p": p})
		}
	}
	h.delete(store.Key{Partition: "p1", Sort: "y"}, store.Always())
	for p, want := range map[string][]string{"p": {"x", "y"}, "p1": {"x"}, "p10": {"x", "y"}, "P": {"x", "y"}} {
		rows := h.scan(p)
		var got []string
		for _, r := range rows {
			got = append(got, r.Key.Sort)
			if r.Key.Partition != p || r.Attrs["p"] != p {
				t.Errorf("Scan(%q) returned row %v %v from another partition", p, r.Key, r.Attrs)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Scan(%q) sort keys = %q, want %q", p, got, want)
		}
	}
}

func testScanProjection(t suite.T, d store.Driver) {
	h := h{t, d}
	full := store.Attrs{"a": int64(1), "b": "two", "m": map[string]any{"k": []byte{3}, "j": true}}
	h.put(key("1"), full)
	h.put(key("2"), store.Attrs{"a": int64(2)})
	attr := store.Attr
	tests := []struct {
		name  string
		paths []store.Path
		want  []store.Attrs
	}{
		{"All", nil, []store.Attrs{full, {"a": int64(2)}}},
		{"Attribute", []store.Path{attr("b")}, []store.Attrs{{"b": "two"}, {}}},
		{"Attributes", []store.Path{attr("a"), attr("b"), attr("missing")}, []store.Attrs{{"a": int64(1), "b": "two"}, {"a": int64(2)}}},
		{"Map", []store.Path{attr("m")}, []store.Attrs{{"m": full["m"]}, {}}},
		{"MapEntry", []store.Path{attr("m").Entry("k")}, []store.Attrs{{"m": map[string]any{"k": []byte{3}}}, {}}},
		{"MissingMapEntry", []store.Path{attr("m").Entry("zz")}, []store.Attrs{{}, {}}},
		{"EntryAndAttribute", []store.Path{attr("m").Entry("j"), attr("a")}, []store.Attrs{{"a": int64(1), "m": map[string]any{"j": true}}, {"a": int64(2)}}},
	}
	for _, tt := range tests {
		rows := h.scan("p", tt.paths...)
		if len(rows) != len(tt.want) {
			t.Errorf("%s: Scan returned %d rows, want %d", tt.name, len(rows), len(tt.want))
			continue
		}
		for i, r := range rows {
			if !equalAttrs(r.Attrs, tt.want[i]) {
				t.Errorf("%s: Scan with projection %v: row %q = %s, want %s", tt.name, tt.paths, r.Key.Sort, show(r.Attrs), show(tt.want[i]))
			}
		}
	}
}

func testScanEmpty(t suite.T, d store.Driver) {
	h := h{t, d}
	if rows := h.scan("nothing-here"); len(rows) != 0 {
		t.Errorf("Scan of an empty partition = %v, want no rows", rows)
	}
	h.put(key("a"), store.Attrs{"x": int64(1)})
	h.delete(key("a"), store.Always())
	if rows := h.scan("p"); len(rows) != 0 {
		t.Errorf("Scan of a partition whose only row was deleted = %v, want no rows", rows)
	}
}

func testDelete(t suite.T, d store.Driver) {
	h := h{t, d}
	row := store.Attrs{"v": int64(1)}
	h.put(key("a"), row)
	if !h.delete(key("a"), store.Always()) {
		t.Error("unconditional Delete of an existing row reported nothing deleted")
	}
	h.expectRow(key("a"), nil)

	h.put(key("b"), row)
	if h.delete(key("b"), store.Equal(store.Attr("v"), int64(2))) {
		t.Error("Delete whose condition fails reported a deletion")
	}
	h.expectRow(key("b"), row)
	if !h.delete(key("b"), store.And(store.RowExists(), store.Equal(store.Attr("v"), int64(1)))) {
		t.Error("Delete whose condition holds reported nothing deleted")
	}
	h.expectRow(key("b"), nil)

	for _, c := range []store.Cond{store.Always(), store.RowExists(), store.RowAbsent(), store.NotExists(store.Attr("v"))} {
		if h.delete(key("missing"), c) {
			t.Errorf("Delete of a missing row if %s reported a deletion", c)
		}
	}
	h.expectRow(key("missing"), nil)

	// A deleted row can be created again.
	if r := h.update(key("a"), store.RowAbsent(), store.SetAttr(store.Attr("v"), int64(2))); !r.Applied {
		t.Error("create-if-absent of a deleted row was not applied")
	}
	h.expectRow(key("a"), store.Attrs{"v": int64(2)})
}

func testTooLarge(t suite.T, d store.Driver) {
	h := h{t, d}
	limit := d.Limits().MaxRowBytes
	if limit <= 0 {
		t.Fatalf("Limits().MaxRowBytes = %d, want a positive limit", limit)
	}
	if limit > 64<<20 {
		t.Fatalf("Limits().MaxRowBytes = %d: declare a limit of at most 64 MiB, the largest row the runtime should write", limit)
	}
	big := bytes.Repeat([]byte{'x'}, limit)
	r, err := d.Update(t.Context(), key("new"), store.Always(), store.Update{store.SetAttr(store.Attr("blob"), big)})
	if !errors.Is(err, store.ErrTooLarge) || r.Applied {
		t.Errorf("creating a row with a %d-byte value (limit %d) = %+v, %v; want store.ErrTooLarge", len(big), limit, r, err)
	}
	h.expectRow(key("new"), nil)

	row := store.Attrs{"small": "s", "n": int64(1)}
	h.put(key("old"), row)
	_, err = d.Update(t.Context(), key("old"), store.Always(), store.Update{store.AddInt(store.Attr("n"), 1), store.SetAttr(store.Attr("m").Entry("blob"), big)})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("growing a row past the limit: err = %v, want store.ErrTooLarge", err)
	}
	h.expectRow(key("old"), row)

	half := store.Attrs{"blob": big[:limit/2]}
	h.put(key("half"), half)
	h.expectRow(key("half"), half)
}

// casWorkers × casAttempts compare-and-swap increments race on one counter.
const casWorkers, casAttempts = 8, 50

func testConcurrentCAS(t suite.T, d store.Driver) {
	k := key("counter")
	h := h{t, d}
	h.put(k, store.Attrs{"n": int64(0)})
	var succeeded atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, casWorkers)
	for range casWorkers {
		wg.Go(func() {
			a, _, err := d.Get(t.Context(), k)
			if err != nil {
				errs <- err
				return
			}
			for range casAttempts {
				old, ok := a["n"].(int64)
				if !ok {
					errs <- fmt.Errorf("counter row has n=%#v", a["n"])
					return
				}
				r, err := d.Update(t.Context(), k, store.Equal(store.Attr("n"), old), store.Update{store.AddInt(store.Attr("n"), 1)})
				if err != nil {
					errs <- err
					return
				}
				if r.Applied {
					succeeded.Add(1)
					if r.Attrs["n"] != old+1 {
						errs <- fmt.Errorf("applied CAS from %d returned n=%#v", old, r.Attrs["n"])
						return
					}
				} else if r.Attrs["n"] == old {
					errs <- fmt.Errorf("CAS from n=%d failed but returned the same n", old)
					return
				}
				a = r.Attrs // the row as it is now, whether or not the CAS applied
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := h.mustGet(k)["n"]
	if got != succeeded.Load() || succeeded.Load() < casAttempts {
		t.Errorf("after %d successful CAS increments the counter is %#v", succeeded.Load(), got)
	}
}

func testConcurrentAdd(t suite.T, d store.Driver) {
	k := key("adder")
	var wg sync.WaitGroup
	for range casWorkers {
		wg.Go(func() {
			for range casAttempts / 2 {
				if _, err := d.Update(t.Context(), k, store.Always(), store.Update{store.AddInt(store.Attr("n"), 1), store.AddInt(store.Attr("m").Entry("n"), 2)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := int64(casWorkers * (casAttempts / 2))
	h{t, d}.expectRow(k, store.Attrs{"n": want, "m": map[string]any{"n": 2 * want}})
}

// Compare-and-swap increments race with a deleter that, whenever it reads an odd count, deletes
// the row on that count and creates it again one higher. A delete applied to a count other than
// the one its condition named would lose an increment: the final count must equal the
// increments that reported success, the deleter's included.
func testConcurrentConditionalDelete(t suite.T, d store.Driver) {
	ctx := t.Context()
	k := key("recycled")
	h{t, d}.put(k, store.Attrs{"n": int64(0)})
	var increments atomic.Int64
	var workers sync.WaitGroup
	done := make(chan struct{})
	for range casWorkers / 2 {
		workers.Go(func() {
			for range casAttempts / 2 {
				for {
					a, found, err := d.Get(ctx, k)
					if err != nil {
						t.Error(err)
						return
					}
					if !found {
						continue // between the deleter's delete and its creation
					}
					old, _ := a["n"].(int64)
					r, err := d.Update(ctx, k, store.Equal(store.Attr("n"), old), store.Update{store.SetAttr(store.Attr("n"), old+1)})
					if err != nil {
						t.Error(err)
						return
					}
					if r.Applied {
						increments.Add(1)
						break
					}
				}
			}
		})
	}
	deleter := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				deleter <- nil
				return
			default:
			}
			a, found, err := d.Get(ctx, k)
			if err != nil || !found {
				deleter <- fmt.Errorf("the deleter's read: found %v, %v", found, err)
				return
			}
			old, _ := a["n"].(int64)
			if old%2 == 0 {
				continue
			}
			deleted, err := d.Delete(ctx, k, store.Equal(store.Attr("n"), old))
			if err != nil || !deleted {
				if err != nil {
					deleter <- err
					return
				}
				continue
			}
			r, err := d.Update(ctx, k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("n"), old+1)})
			if err != nil || !r.Applied {
				deleter <- fmt.Errorf("re-creating the row deleted at n=%d: %+v, %v (only the deleter creates it)", old, r, err)
				return
			}
			increments.Add(1)
		}
	}()
	workers.Wait()
	close(done)
	if err := <-deleter; err != nil {
		t.Fatal(err)
	}
	if got := (h{t, d}).mustGet(k)["n"]; got != increments.Load() {
		t.Errorf("after %d increments that applied (the deleter's re-creations included) the count is %#v", increments.Load(), got)
	}
}

func testConcurrentCreate(t suite.T, d store.Driver) {
	k := key("contended")
	var winners atomic.Int64
	results := make([]store.UpdateResult, casWorkers)
	var wg sync.WaitGroup
	for i := range casWorkers {
		wg.Go(func() {
			r, err := d.Update(t.Context(), k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("owner"), int64(i))})
			if err != nil {
				t.Error(err)
				return
			}
			if r.Applied {
				winners.Add(1)
			}
			results[i] = r
		})
	}
	wg.Wait()
	if winners.Load() != 1 {
		t.Fatalf("%d concurrent create-if-absent calls succeeded, want exactly 1", winners.Load())
	}
	owner := h{t, d}.mustGet(k)["owner"]
	for i, r := range results {
		if r.Applied && owner != int64(i) {
			t.Errorf("winner %d did not write the row: owner = %#v", i, owner)
		}
		if !r.Applied && r.Attrs["owner"] != owner {
			t.Errorf("loser %d saw owner=%#v, want the winner's %#v", i, r.Attrs["owner"], owner)
		}
	}
}

// equalAttrs compares attributes by value and exact type; a nil []byte equals an empty one,
// since backends need not distinguish them.
func equalAttrs(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !equalValue(av, bv) {
			return false
		}
	}
	return true
}

func equalValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && equalAttrs(x, y)
	case int64, string, bool:
		return a == b
	}
	return false
}

// show prints attrs with their types, in key order, so failures show type mismatches.
func show(a map[string]any) string {
	if a == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString("{")
	for i, k := range sortedKeys(a) {
		if i > 0 {
			b.WriteString(", ")
		}
		if m, ok := a[k].(map[string]any); ok {
			fmt.Fprintf(&b, "%q: %s", k, show(m))
			continue
		}
		fmt.Fprintf(&b, "%q: %T(%#v)", k, a[k], a[k])
	}
	return b.String() + "}"
}

func sortedKeys[M ~map[string]any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RunBenchmarks measures a driver's basic operations. newDriver must return a fresh, empty
// driver; the benchmark closes it.
func RunBenchmarks(b *testing.B, newDriver func(b *testing.B) store.Driver) {
	ctx := context.Background()
	row := store.Attrs{"owner": "bench", "n": int64(0), "payload": bytes.Repeat([]byte{'x'}, 256)}
	bench := func(name string, setup func(store.Driver), op func(store.Driver, int) error) {
		b.Run(name, func(b *testing.B) {
			d := newDriver(b)
			defer d.Close()
			setup(d)
			i := 0
			for b.Loop() {
				if err := op(d, i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	mustPut := func(d store.Driver, k store.Key) {
		if _, err := d.Update(ctx, k, store.Always(), sets(row)); err != nil {
			b.Fatal(err)
		}
	}
	bench("Get", func(d store.Driver) { mustPut(d, key("row")) }, func(d store.Driver, _ int) error {
		_, found, err := d.Get(ctx, key("row"))
		if err == nil && !found {
			err = errors.New("benchmark row vanished")
		}
		return err
	})
	bench("UpdateAdd", func(d store.Driver) { mustPut(d, key("row")) }, func(d store.Driver, _ int) error {
		_, err := d.Update(ctx, key("row"), store.RowExists(), store.Update{store.AddInt(store.Attr("n"), 1)})
		return err
	})
	bench("UpdateCAS", func(d store.Driver) { mustPut(d, key("row")) }, func(d store.Driver, i int) error {
		r, err := d.Update(ctx, key("row"), store.Equal(store.Attr("n"), int64(i)), store.Update{store.AddInt(store.Attr("n"), 1)})
		if err == nil && !r.Applied {
			err = fmt.Errorf("uncontended CAS from %d failed", i)
		}
		return err
	})
	bench("CreateIfAbsent", func(store.Driver) {}, func(d store.Driver, i int) error {
		_, err := d.Update(ctx, key(fmt.Sprintf("new%09d", i)), store.RowAbsent(), sets(row))
		return err
	})
	bench("Scan100", func(d store.Driver) {
		for i := range 100 {
			mustPut(d, key(fmt.Sprintf("%03d", i)))
		}
	}, func(d store.Driver, _ int) error {
		rows, err := d.Scan(ctx, "p", store.ScanOptions{Projection: []store.Path{store.Attr("n")}})
		if err == nil && len(rows) != 100 {
			err = fmt.Errorf("Scan returned %d rows, want 100", len(rows))
		}
		return err
	})
}

// testAtomicBatch checks store.AtomicBatcher: a batch whose conditions all hold applies in order
// (a row named twice sees the earlier update); one whose last condition fails changes nothing,
// not even the rows its earlier updates would have created or changed.
func testAtomicBatch(t suite.T, d store.Driver) {
	ctx := context.Background()
	ab := d.(store.AtomicBatcher)
	n := func(v int64) store.Update { return store.Update{store.SetAttr(store.Path{"n"}, v)} }
	a, b, c := store.Key{Partition: "p", Sort: "a"}, store.Key{Partition: "p", Sort: "b"}, store.Key{Partition: "p", Sort: "c"}
	rs, applied, err := ab.UpdateBatchAtomic(ctx, []store.BatchUpdate{
		{Key: a, Cond: store.RowAbsent(), Update: n(1)},
		{Key: b, Cond: store.Always(), Update: n(2)},
		{Key: a, Cond: store.Equal(store.Path{"n"}, int64(1)), Update: n(3)},
	})
	if err != nil || !applied || len(rs) != 3 || !rs[2].Applied || rs[2].Attrs["n"] != int64(3) {
		t.Fatalf("a batch whose conditions hold: %+v applied %v, %v; want every update applied, a at 3", rs, applied, err)
	}
	rs, applied, err = ab.UpdateBatchAtomic(ctx, []store.BatchUpdate{
		{Key: a, Cond: store.Equal(store.Path{"n"}, int64(3)), Update: n(4)},
		{Key: c, Cond: store.RowAbsent(), Update: n(5)},
		{Key: b, Cond: store.Equal(store.Path{"n"}, int64(7)), Update: n(6)}, // b holds 2
	})
	if err != nil || applied || rs != nil {
		t.Fatalf("a batch with a failing condition: %+v applied %v, %v; want nothing applied", rs, applied, err)
	}
	for k, want := range map[store.Key]any{a: int64(3), b: int64(2)} {
		if got, _, err := d.Get(ctx, k); err != nil || got["n"] != want {
			t.Fatalf("%v after the refused batch: %v %v, want n %v", k, got, err, want)
		}
	}
	if _, found, err := d.Get(ctx, c); err != nil || found {
		t.Fatalf("the refused batch created %v: found %v, %v", c, found, err)
	}
}
