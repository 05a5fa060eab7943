package store

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestEval(t *testing.T) {
	doc := Attrs{
		"i": int64(5), "f": 2.5, "s": "abc", "b": []byte{1, 2}, "t": true, "n": nil,
		"m": map[string]any{"k": int64(1)},
		"a": map[string]any{"inner": Attrs{"x": int64(1)}}, // Lookup descends into Attrs too
	}
	tests := []struct {
		name string
		c    Cond
		want bool
	}{
		{"zero Cond is true", Cond{}, true},
		{"Never", Never(), false},
		{"And of nothing", And(), true},
		{"Or of nothing", Or(), false},
		{"And short-circuits on false", And(Never(), Compare(Path{"i"}, CmpOp("??"), 1)), false},
		{"Not without argument", Cond{Op: OpNot}, false},
		{"Not with two arguments", Cond{Op: OpNot, Args: []Cond{Never(), Never()}}, false},
		{"unknown op", Cond{Op: CondOp(99)}, false},
		{"unknown CmpOp", Compare(Path{"i"}, CmpOp("=~"), int64(5)), false},
		{"int64 == int", Equal(Path{"i"}, 5), true},
		{"int64 == int32", Equal(Path{"i"}, int32(5)), true},
		{"int64 == float64", Equal(Path{"i"}, 5.0), true},
		{"int64 < float64", Compare(Path{"i"}, Lt, 5.5), true},
		{"float64 > int64", Compare(Path{"f"}, Gt, int64(2)), true},
		{"float64 == float64", Equal(Path{"f"}, 2.5), true},
		{"int64 vs string", Equal(Path{"i"}, "5"), false},
		{"int64 != string is false", Compare(Path{"i"}, Ne, "5"), false},
		{"string order", Compare(Path{"s"}, Gt, "ab"), true},
		{"bytes order", Compare(Path{"b"}, Lt, []byte{1, 2, 0}), true},
		{"bytes vs string", Equal(Path{"b"}, "\x01\x02"), false},
		{"bool ==", Equal(Path{"t"}, true), true},
		{"bool !=", Compare(Path{"t"}, Ne, false), true},
		{"bool has no order", Compare(Path{"t"}, Ge, true), false},
		{"bool vs int", Equal(Path{"t"}, int64(1)), false},
		{"null == null", Equal(Path{"n"}, nil), true},
		{"null != null", Compare(Path{"n"}, Ne, nil), false},
		{"int == null", Equal(Path{"i"}, nil), false},
		{"map compares false", Equal(Path{"m"}, map[string]any{"k": int64(1)}), false},
		{"map entry", Equal(Path{"m", "k"}, int64(1)), true},
		{"entry of a scalar", Exists(Path{"i", "k"}), false},
		{"entry of Attrs in a map", Equal(Path{"a", "inner", "x"}, int64(1)), true},
		{"missing compares false", Compare(Path{"zz"}, Ne, int64(0)), false},
		{"whole document exists", Exists(nil), true},
		{"NotExists of present", NotExists(Path{"n"}), false},
	}
	for _, tt := range tests {
		if got := tt.c.Eval(doc, true); got != tt.want {
			t.Errorf("%s: %s = %v, want %v", tt.name, tt.c, got, tt.want)
		}
	}

	big := map[string]any{"big": int64(math.MaxInt64 - 1)}
	if !Compare(Path{"big"}, Lt, int64(math.MaxInt64)).Eval(big, true) {
		t.Error("MaxInt64-1 < MaxInt64 must hold exactly, not via float64")
	}
	if !RowAbsent().Eval(nil, false) || RowExists().Eval(nil, false) || !RowExists().Eval(nil, true) {
		t.Error("RowExists must follow the exists flag, not the document")
	}
	if Exists(nil).Eval(nil, true) {
		t.Error("the whole document of an attribute-less row must not exist")
	}
}

func TestApply(t *testing.T) {
	base := Attrs{"i": int64(1), "s": "x", "m": map[string]any{"k": int64(2), "b": []byte{1}}}
	tests := []struct {
		name string
		upd  Update
		want Attrs // nil: Apply must fail with ErrInvalid
	}{
		{"no mutations", nil, base},
		{"set top-level", Update{SetAttr(Attr("new"), "v")}, Attrs{"i": int64(1), "s": "x", "m": base["m"], "new": "v"}},
		{"set replaces type", Update{SetAttr(Attr("i"), "now a string")}, Attrs{"i": "now a string", "s": "x", "m": base["m"]}},
		{"set entry keeps others", Update{SetAttr(Attr("m").Entry("z"), true)},
			Attrs{"i": int64(1), "s": "x", "m": map[string]any{"k": int64(2), "b": []byte{1}, "z": true}}},
		{"set entry creates map", Update{SetAttr(Attr("n").Entry("k"), int64(3))},
			Attrs{"i": int64(1), "s": "x", "m": base["m"], "n": map[string]any{"k": int64(3)}}},
		{"set a whole map", Update{SetAttr(Attr("m"), map[string]any{})}, Attrs{"i": int64(1), "s": "x", "m": map[string]any{}}},
		{"remove attr", Update{RemoveAttr(Attr("s"))}, Attrs{"i": int64(1), "m": base["m"]}},
		{"remove entry", Update{RemoveAttr(Attr("m").Entry("k"))}, Attrs{"i": int64(1), "s": "x", "m": map[string]any{"b": []byte{1}}}},
		{"remove missing attr", Update{RemoveAttr(Attr("zz"))}, base},
		{"remove entry of missing map", Update{RemoveAttr(Attr("zz").Entry("k"))}, base},
		{"add to missing", Update{AddInt(Attr("c"), -4)}, Attrs{"i": int64(1), "s": "x", "m": base["m"], "c": int64(-4)}},
		{"add to existing", Update{AddInt(Attr("i"), 10)}, Attrs{"i": int64(11), "s": "x", "m": base["m"]}},
		{"add to entry", Update{AddInt(Attr("m").Entry("k"), 1)}, Attrs{"i": int64(1), "s": "x", "m": map[string]any{"k": int64(3), "b": []byte{1}}}},
		{"add to entry of missing map", Update{AddInt(Attr("n").Entry("k"), 1)},
			Attrs{"i": int64(1), "s": "x", "m": base["m"], "n": map[string]any{"k": int64(1)}}},
		{"mutations apply in order", Update{SetAttr(Attr("c"), int64(1)), AddInt(Attr("c"), 2), RemoveAttr(Attr("s"))},
			Attrs{"i": int64(1), "c": int64(3), "m": base["m"]}},
		{"add to string", Update{AddInt(Attr("s"), 1)}, nil},
		{"add to map", Update{AddInt(Attr("m"), 1)}, nil},
		{"add to bytes entry", Update{AddInt(Attr("m").Entry("b"), 1)}, nil},
		{"entry of a scalar", Update{SetAttr(Attr("s").Entry("k"), int64(1))}, nil},
		{"remove entry of a scalar", Update{RemoveAttr(Attr("s").Entry("k"))}, nil},
		{"failure after success", Update{SetAttr(Attr("ok"), int64(1)), AddInt(Attr("s"), 1)}, nil},
	}
	for _, tt := range tests {
		before := base.Clone()
		got, err := tt.upd.Apply(base)
		if !reflect.DeepEqual(base, before) {
			t.Fatalf("%s: Apply modified its input: %v", tt.name, base)
		}
		if tt.want == nil {
			if !errors.Is(err, ErrInvalid) || got != nil {
				t.Errorf("%s: Apply = %v, %v; want nil and an ErrInvalid error", tt.name, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Apply = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}

	got, err := Update{AddInt(Attr("n"), 1)}.Apply(nil)
	if err != nil || !reflect.DeepEqual(got, Attrs{"n": int64(1)}) {
		t.Errorf("Apply on nil attrs = %v, %v; want n=1", got, err)
	}
	if got, err := Update(nil).Apply(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty Apply on nil attrs = %#v, %v; want an empty, non-nil Attrs", got, err)
	}

	// Set copies its value: changing the caller's slice or map afterwards changes nothing.
	b, m := []byte{1}, map[string]any{"k": int64(1)}
	got, _ = Update{SetAttr(Attr("b"), b), SetAttr(Attr("m"), m)}.Apply(nil)
	b[0], m["k"] = 9, int64(9)
	if !reflect.DeepEqual(got, Attrs{"b": []byte{1}, "m": map[string]any{"k": int64(1)}}) {
		t.Errorf("Apply aliased the values it set: %v", got)
	}
}

func TestUpdateValidate(t *testing.T) {
	good := Update{
		SetAttr(Attr("a"), int64(1)), SetAttr(Attr("a"), ""), SetAttr(Attr("a"), []byte(nil)), SetAttr(Attr("a"), false),
		SetAttr(Attr("m"), map[string]any{"k": "v"}), SetAttr(Attr("m").Entry("k"), []byte{}),
		RemoveAttr(Attr("a")), RemoveAttr(Attr("m").Entry("k")), AddInt(Attr("n"), -1),
	}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%v) = %v", good, err)
	}
	bad := []struct {
		m    Mutation
		want string
	}{
		{SetAttr(nil, int64(1)), "must name an attribute or a map entry"},
		{SetAttr(Path{"a", "b", "c"}, int64(1)), "must name an attribute or a map entry"},
		{SetAttr(Path{""}, int64(1)), "empty segment"},
		{RemoveAttr(Path{"m", ""}), "empty segment"},
		{SetAttr(Attr("a"), 1), "unsupported type int"},
		{SetAttr(Attr("a"), 1.5), "unsupported type float64"},
		{SetAttr(Attr("a"), nil), "unsupported type <nil>"},
		{SetAttr(Attr("a"), []string{"x"}), "unsupported type []string"},
		{SetAttr(Attr("m"), map[string]any{"k": map[string]any{}}), "maps may not nest"},
		{SetAttr(Attr("m"), map[string]any{"": int64(1)}), "empty map key"},
		{SetAttr(Attr("m").Entry("k"), map[string]any{}), "maps may not nest"},
		{Mutation{Kind: Add, Path: Attr("n"), Value: 1}, "needs an int64 delta, got int"},
		{Mutation{Kind: MutationKind(7), Path: Attr("n")}, "unknown mutation kind 7"},
	}
	for _, tt := range bad {
		err := Update{tt.m}.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid mentioning %q", tt.m, err, tt.want)
		}
	}
}

func TestValidateAttrs(t *testing.T) {
	if err := ValidateAttrs(nil); err != nil {
		t.Errorf("ValidateAttrs(nil) = %v", err)
	}
	if err := ValidateAttrs(Attrs{"a": int64(1), "m": map[string]any{"b": []byte{}}}); err != nil {
		t.Errorf("ValidateAttrs(valid) = %v", err)
	}
	for _, a := range []Attrs{
		{"": int64(1)},
		{"a": uint64(1)},
		{"m": map[string]any{"k": map[string]any{}}},
		{"m": map[string]any{"": "v"}},
		{"m": Attrs{"k": "v"}}, // only plain maps are storable
	} {
		if err := ValidateAttrs(a); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateAttrs(%v) = %v, want ErrInvalid", a, err)
		}
	}
}

func TestProject(t *testing.T) {
	a := Attrs{"x": int64(1), "y": "s", "m": map[string]any{"k": int64(2), "j": true}}
	tests := []struct {
		name  string
		paths []Path
		want  Attrs
	}{
		{"nil returns everything", nil, a},
		{"empty returns nothing", []Path{}, Attrs{}},
		{"attribute", []Path{Attr("x")}, Attrs{"x": int64(1)}},
		{"missing attribute", []Path{Attr("zz")}, Attrs{}},
		{"map entry", []Path{Attr("m").Entry("k")}, Attrs{"m": map[string]any{"k": int64(2)}}},
		{"two entries", []Path{Attr("m").Entry("k"), Attr("m").Entry("j")}, Attrs{"m": map[string]any{"k": int64(2), "j": true}}},
		{"missing entry", []Path{Attr("m").Entry("zz")}, Attrs{}},
		{"entry of a scalar", []Path{Attr("x").Entry("k")}, Attrs{}},
		{"whole document path is ignored", []Path{nil}, Attrs{}},
		{"map and its entry", []Path{Attr("m").Entry("k"), Attr("m")}, Attrs{"m": a["m"]}},
	}
	for _, tt := range tests {
		got := a.Project(tt.paths)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Project(%v) = %v, want %v", tt.name, tt.paths, got, tt.want)
		}
	}
	got := a.Project([]Path{Attr("m")})
	got["m"].(map[string]any)["k"] = int64(99)
	if a["m"].(map[string]any)["k"] != int64(2) {
		t.Error("Project returned a map aliasing the original")
	}
}

func TestCloneIsDeep(t *testing.T) {
	a := Attrs{"b": []byte{1}, "m": map[string]any{"k": []byte{2}}}
	c := a.Clone()
	c["b"].([]byte)[0] = 9
	c["m"].(map[string]any)["k"].([]byte)[0] = 9
	c["m"].(map[string]any)["new"] = true
	if !reflect.DeepEqual(a, Attrs{"b": []byte{1}, "m": map[string]any{"k": []byte{2}}}) {
		t.Errorf("Clone shares memory with the original: %v", a)
	}
	if Attrs(nil).Clone() != nil {
		t.Error("Clone of nil Attrs must be nil")
	}
}

func TestPathEntryDoesNotAlias(t *testing.T) {
	base := make(Path, 1, 4)
	base[0] = "m"
	a, b := base.Entry("a"), base.Entry("b")
	if a[1] != "a" || b[1] != "b" {
		t.Errorf("Entry shares the backing array: %v %v", a, b)
	}
}

func TestLookup(t *testing.T) {
	if _, ok := Lookup(nil, nil); ok {
		t.Error("the whole of a nil document must be absent")
	}
	if _, ok := Lookup(map[string]any{"n": nil}, Path{"n"}); !ok {
		t.Error("a present null value must be found")
	}
	if _, ok := Lookup(map[string]any{"n": nil}, Path{"n", "k"}); ok {
		t.Error("an entry of a null value must not be found")
	}
}

func TestOnlyAbsent(t *testing.T) {
	for _, c := range []struct {
		cond Cond
		want bool
	}{
		{RowAbsent(), true},
		{And(RowAbsent(), NotExists(Path{"v"})), true},
		{And(Exists(Path{"v"}), RowAbsent()), true},
		{RowExists(), false},
		{Always(), false},
		{Or(RowAbsent(), Exists(Path{"v"})), false}, // holds on a row with v too
		{Not(Exists(Path{"v"})), false},
		{Not(And(RowExists())), false},
		{NotExists(Path{"v"}), false},
	} {
		if got := c.cond.OnlyAbsent(); got != c.want {
			t.Errorf("%v.OnlyAbsent() = %v, want %v", c.cond, got, c.want)
		}
		// What OnlyAbsent claims must be true: the condition fails on every existing row tried.
		if c.want {
			for _, doc := range []Attrs{{}, {"v": int64(1)}} {
				if c.cond.Eval(doc, true) {
					t.Errorf("%v holds on the existing row %v", c.cond, doc)
				}
			}
		}
	}
}
