package dynamostore

import (
	"math"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func TestStoredNames(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"pk", "sk", "~", "~pk", "~~", "a", "pkx", "PK", "~~~sk"} {
		s := storedName(n)
		if s == attrPK || s == attrSK || s == noopAttr {
			t.Errorf("row attribute %q is stored as %q, a name the driver reserves", n, s)
		}
		if other, dup := seen[s]; dup {
			t.Errorf("%q and %q are both stored as %q", n, other, s)
		}
		seen[s] = n
		if back := rowName(s); back != n {
			t.Errorf("rowName(storedName(%q)) = %q", n, back)
		}
	}
}

func TestItemSize(t *testing.T) {
	k := store.Key{Partition: "p", Sort: "ss"}
	for _, tc := range []struct {
		attrs store.Attrs
		want  int
	}{
		{nil, 2 + 1 + 2 + 2},
		{store.Attrs{"s": "héllo"}, 7 + 1 + 6},
		{store.Attrs{"b": []byte{1, 2, 3}}, 7 + 1 + 3},
		{store.Attrs{"t": true}, 7 + 1 + 1},
		{store.Attrs{"n": int64(0)}, 7 + 1 + 1},
		{store.Attrs{"n": int64(-1200)}, 7 + 1 + 2},     // "12": one byte, plus one
		{store.Attrs{"n": int64(12345)}, 7 + 1 + 4},     // five digits: three bytes, plus one
		{store.Attrs{"pk": "x"}, 7 + len("~pk") + 1},    // the stored name counts
		{store.Attrs{"m": map[string]any{}}, 7 + 1 + 3}, // an empty map is 3 bytes
		{store.Attrs{"m": map[string]any{"k": "v", "t": false}}, 7 + 1 + 3 + (1 + 1 + 1) + (1 + 1 + 1)},
	} {
		if got := itemSize(k, tc.attrs); got != tc.want {
			t.Errorf("itemSize(%v) = %d, want %d", tc.attrs, got, tc.want)
		}
	}
}

// TestTranslate pins how conditions become expressions: constants fold away, every name and
// value goes through a placeholder, comparisons carry their type guard, and literals DynamoDB
// cannot compare exactly are refused (the driver then evaluates them on a read row).
func TestTranslate(t *testing.T) {
	attr, entry := store.Attr, store.Attr("m").Entry
	for _, tc := range []struct {
		cond store.Cond
		want string // "" for an error
	}{
		{store.And(store.Always(), store.RowExists()), "attribute_exists(#n0)"},
		{store.Or(store.Never(), store.Not(store.RowExists())), "(NOT attribute_exists(#n0))"},
		{store.And(store.RowExists(), store.Never()), "false"},
		{store.Or(store.Exists(attr("x")), store.Always()), "true"},
		{store.Cond{Op: store.OpNot}, "false"},
		{store.Exists(store.Path{"m", "k", "z"}), "false"},
		{store.NotExists(store.Path{""}), "true"},
		{store.Equal(attr("Value"), int64(3)), "(attribute_type(#n0, :tN) AND #n0 = :v0)"},
		{store.Compare(entry("k"), store.Ne, "x"), "(attribute_type(#n0.#n1, :tS) AND #n0.#n1 <> :v0)"},
		{store.Compare(attr("b"), store.Lt, true), "false"},
		{store.Equal(attr("x"), nil), "attribute_not_exists(#n0)"},
		{store.Compare(attr("x"), store.Ne, nil), "attribute_exists(#n0)"},
		{store.Compare(attr("x"), store.Lt, nil), "false"},
		{store.Equal(attr("x"), map[string]any{}), "false"},
		{store.Compare(attr("x"), store.Gt, 2.5), "(attribute_type(#n0, :tN) AND #n0 > :v0)"},
		{store.Compare(attr("x"), store.Gt, 1e300), ""},
		{store.Compare(attr("x"), store.Eq, math.NaN()), ""},
		{store.Compare(attr("x"), store.Eq, "\xff"), ""},
	} {
		b := newBuilder()
		c, err := b.cond(tc.cond)
		got := map[int8]string{1: "true", -1: "false"}[c.konst]
		if c.konst == 0 && err == nil {
			got = c.expr
		}
		if err != nil {
			got = ""
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.cond, got, tc.want)
		}
	}
}

func TestParamsDropUnused(t *testing.T) {
	b := newBuilder()
	c, _ := b.cond(store.Or(store.Equal(store.Attr("gone"), int64(1)), store.Always()))
	if c.konst != 1 {
		t.Fatalf("condition did not fold to true: %+v", c)
	}
	kept := b.name("kept")
	names, values := b.params(&kept, c.text())
	if len(names) != 1 || names[kept] != "kept" || values != nil {
		t.Errorf("params = %v, %v; want only the name used", names, values)
	}
}

// TestPlan pins the fast form of updates: what is expressible, and what it assumes.
func TestPlan(t *testing.T) {
	attr, entry := store.Attr, store.Attr("m").Entry
	for _, tc := range []struct {
		name   string
		upd    store.Update
		absent bool
		update string // "" when the update needs the row
		assume string
	}{
		{"Set", store.Update{store.SetAttr(attr("a"), int64(1)), store.RemoveAttr(attr("b"))}, false,
			"SET #n0 = :v0 REMOVE #n1", "true"},
		{"Add", store.Update{store.AddInt(attr("a"), 2)}, false,
			"SET #n0 = if_not_exists(#n0, :v0) + :v1", "(attribute_not_exists(#n0) OR (attribute_type(#n0, :tN) AND #n0 <= :v2))"},
		{"Entries", store.Update{store.SetAttr(entry("k"), "v"), store.AddInt(entry("n"), -1)}, false,
			"SET #n0.#n1 = :v0, #n0.#n2 = if_not_exists(#n0.#n2, :v1) + :v2",
			"(attribute_type(#n0, :tM) AND (attribute_not_exists(#n0.#n2) OR (attribute_type(#n0.#n2, :tN) AND #n0.#n2 >= :v3)))"},
		{"AddThenSet", store.Update{store.AddInt(attr("a"), 1), store.SetAttr(attr("a"), "s")}, false,
			"SET #n0 = :v0", "(attribute_not_exists(#n0) OR attribute_type(#n0, :tN))"},
		{"EntryThenRemove", store.Update{store.RemoveAttr(entry("k")), store.RemoveAttr(attr("m"))}, false,
			"REMOVE #n0", "(attribute_not_exists(#n0) OR attribute_type(#n0, :tM))"},
		{"Nothing", nil, false, "REMOVE #n0", "true"},
		{"AddToEditedMap", store.Update{store.SetAttr(entry("k"), "v"), store.AddInt(attr("m"), 1)}, false, "", ""},
		{"EntryOfInteger", store.Update{store.AddInt(attr("m"), 1), store.SetAttr(entry("k"), "v")}, false, "", ""},
		{"CreateWithEntries", store.Update{store.SetAttr(entry("k"), "v"), store.AddInt(entry("n"), 1)}, true,
			"SET #n0 = :v0", "true"},
		{"CreateFails", store.Update{store.SetAttr(attr("m"), "s"), store.SetAttr(entry("k"), "v")}, true, "", ""},
	} {
		p, ok := planUpdate(tc.upd, tc.absent)
		if !ok {
			if tc.update != "" {
				t.Errorf("%s: no plan, want %q", tc.name, tc.update)
			}
			continue
		}
		b := newBuilder()
		update, assume, err := p.render(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := "true"
		if assume.konst == 0 {
			got = assume.expr
		}
		if update != tc.update || got != tc.assume {
			t.Errorf("%s:\n got %q if %q\nwant %q if %q", tc.name, update, got, tc.update, tc.assume)
		}
		if strings.Contains(update, noopAttr) {
			t.Errorf("%s: a name appears in the expression itself", tc.name)
		}
	}
}
