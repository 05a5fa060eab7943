package store

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// jsonDoc is shaped like encoding/json output: numbers are float64.
var jsonDoc = map[string]any{
	"balance": float64(10),
	"rate":    0.25,
	"owner":   map[string]any{"name": "ann", "display name": "Ann B", "age": float64(41)},
	"active":  true,
	"note":    nil,
	"exists":  "a field named like a keyword",
	"tags":    []any{"x"},
}

func TestParseCondEval(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`true`, true},
		{`FALSE`, false},
		{`balance == 10`, true},
		{`balance >= 10`, true},
		{`balance > 10`, false},
		{`balance < 10.5`, true},
		{`balance != 10`, false},
		{`balance <= -1`, false},
		{`rate == 0.25`, true},
		{`rate < 2.5e-1`, false},
		{`rate > 1E-3`, true},
		{`owner.name == "ann"`, true},
		{`owner["name"] == "ann"`, true},
		{`owner["display name"] == "Ann B"`, true},
		{`$.owner.name == "ann"`, true},
		{`$["owner"]["name"] != "bob"`, true},
		{`owner.name < "b"`, true},
		{`owner.age >= 18 AND active == true`, true},
		{`owner.name == "ann" && owner.age < 18`, false},
		{`owner.name == "bob" or balance == 10`, true},
		{`owner.name == "bob" || balance == 11`, false},
		{`not balance == 10`, false},
		{`!balance == 11`, true},
		{`NOT (balance == 10 or false)`, false},
		{`not not true`, true},
		{`exists(owner.name)`, true},
		{`exists(owner.missing)`, false},
		{`not_exists(owner.missing)`, true},
		{`Not_Exists(balance)`, false},
		{`exists($)`, true},
		{`exists($.exists)`, true},
		{`$.exists == "a field named like a keyword"`, true},
		{`row_exists()`, true},
		{`note == null`, true},
		{`note != null`, false},
		{`balance == null`, false}, // present and not null
		{`balance != "10"`, false}, // a type mismatch is false, even for !=
		{`missing != 1`, false},    // a missing path compares false
		{`active == true`, true},
		{`active != FALSE`, true},
		{`active < true`, false}, // booleans have no order
		{`tags == "x"`, false},
		{`owner == null`, false},
		{`balance == 10 and (owner.name == "x" or owner.name == "ann") and not exists(gone)`, true},
		{`false or false or true and false`, false}, // and binds tighter than or
		{`true or false and false`, true},
		{"\tbalance\n==\r\n10 ", true},
		{`owner.name == "\u0061nn"`, true},
		{`owner.name == b"ann"`, false}, // []byte never equals string
	}
	for _, tt := range tests {
		c, err := ParseCond(tt.in)
		if err != nil {
			t.Errorf("ParseCond(%q): %v", tt.in, err)
			continue
		}
		if got := c.Eval(jsonDoc, true); got != tt.want {
			t.Errorf("ParseCond(%q) = %s; Eval = %v, want %v", tt.in, c, got, tt.want)
		}
		again, err := ParseCond(c.String())
		if err != nil {
			t.Errorf("ParseCond(%q).String() = %q does not parse: %v", tt.in, c, err)
			continue
		}
		if !reflect.DeepEqual(again, c) {
			t.Errorf("ParseCond(%q): String %q re-parses to %#v, want %#v", tt.in, c, again, c)
		}
	}
}

func TestParseCondTree(t *testing.T) {
	tests := []struct {
		in   string
		want Cond
	}{
		{`a == 1`, Compare(Path{"a"}, Eq, int64(1))},
		{`a.b["c d"] != -7`, Compare(Path{"a", "b", "c d"}, Ne, int64(-7))},
		{`$ == null`, Compare(nil, Eq, nil)},
		{`$["x"] < 1.5`, Compare(Path{"x"}, Lt, 1.5)},
		{`a >= "s"`, Compare(Path{"a"}, Ge, "s")},
		{`a <= b"\x00\xff"`, Compare(Path{"a"}, Le, []byte{0, 0xff})},
		{`a > TRUE`, Compare(Path{"a"}, Gt, true)},
		{`a == 9223372036854775807`, Compare(Path{"a"}, Eq, int64(9223372036854775807))},
		{`a == -9223372036854775808`, Compare(Path{"a"}, Eq, int64(-9223372036854775808))},
		{`a == 1e3`, Compare(Path{"a"}, Eq, float64(1000))},
		{`a == 3.0`, Compare(Path{"a"}, Eq, float64(3))},
		{`a == -0.0`, Compare(Path{"a"}, Eq, math.Copysign(0, -1))},
		{`a == 1 and b == 2 and c == 3`, And(Compare(Path{"a"}, Eq, int64(1)), Compare(Path{"b"}, Eq, int64(2)), Compare(Path{"c"}, Eq, int64(3)))},
		{`a == 1 or b == 2 and c == 3`, Or(Compare(Path{"a"}, Eq, int64(1)), And(Compare(Path{"b"}, Eq, int64(2)), Compare(Path{"c"}, Eq, int64(3))))},
		{`(a == 1 or b == 2) and c == 3`, And(Or(Compare(Path{"a"}, Eq, int64(1)), Compare(Path{"b"}, Eq, int64(2))), Compare(Path{"c"}, Eq, int64(3)))},
		{`not a == 1 and b == 2`, And(Not(Compare(Path{"a"}, Eq, int64(1))), Compare(Path{"b"}, Eq, int64(2)))},
		{`not row_exists()`, RowAbsent()},
		{`((true))`, Always()},
		{`exists(_x9.y)`, Exists(Path{"_x9", "y"})},
		{`not_exists($["a.b"])`, NotExists(Path{"a.b"})},
		{`a.and == 1`, Compare(Path{"a", "and"}, Eq, int64(1))},
	}
	for _, tt := range tests {
		got, err := ParseCond(tt.in)
		if err != nil {
			t.Errorf("ParseCond(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCond(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestParseCondErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`balance >=`, `condition "balance >=": at offset 10: expected a literal, found end of input`},
		{``, `at offset 0: expected a condition, found end of input`},
		{`   `, `at offset 3: expected a condition, found end of input`},
		{`balance`, `at offset 7: expected a comparison operator (==, !=, <, <=, >, >=), found end of input`},
		{`balance = 1`, `at offset 8: unexpected character '='`},
		{`balance == 1 balance`, `at offset 13: expected "and", "or" or end of input, found "balance"`},
		{`a == 1 and`, `at offset 10: expected a condition, found end of input`},
		{`a == 1 & b == 2`, `at offset 7: unexpected character '&'`},
		{`(a == 1`, `at offset 7: expected ")", found end of input`},
		{`a == 1)`, `at offset 6: expected "and", "or" or end of input, found ")"`},
		{`exists a`, `at offset 7: expected "(", found "a"`},
		{`exists()`, `at offset 7: expected a path, found ")"`},
		{`exists(a`, `at offset 8: expected ")", found end of input`},
		{`row_exists(a)`, `at offset 11: expected ")", found "a"`},
		{`a. == 1`, `at offset 3: expected an identifier, found "=="`},
		{`a[b] == 1`, `at offset 2: expected a quoted string, found "b"`},
		{`a["b" == 1`, `at offset 6: expected "]", found "=="`},
		{`a == b`, `at offset 5: expected a literal, found "b"`},
		{`a == "unterminated`, `at offset 5: unterminated string`},
		{`a == "bad \q escape"`, `at offset 5: invalid string literal "bad \q escape"`},
		{`a == 1.`, `at offset 5: malformed number "1."`},
		{`a == 1e`, `at offset 5: malformed number "1e"`},
		{`a == 12abc`, `at offset 5: malformed number "12abc"`},
		{`a == 0x10`, `at offset 5: malformed number "0x10"`},
		{`a == 9223372036854775808`, `at offset 5: integer 9223372036854775808 is out of range for int64`},
		{`a == 1e999`, `at offset 5: number 1e999 is out of range for float64`},
		{`a == -`, `at offset 5: unexpected character '-'`},
		{`and == 1`, `at offset 0: expected a condition, found "and"`},
		{`NULL == 1`, `at offset 0: expected a condition, found "NULL"`},
		{`exists == 1`, `at offset 7: expected "(", found "=="`},
		{`"a" == 1`, `at offset 0: expected a condition, found string "a"`},
		{`1 == a`, `at offset 0: expected a condition, found "1"`},
		{`a == 1 ||`, `at offset 9: expected a condition, found end of input`},
		{`a ≥ 1`, `at offset 2: unexpected character '≥'`},
		{`a == "x" and b == b"y`, `at offset 19: unterminated string`},
		{strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300), `levels deep`},
		{strings.Repeat("not ", 300) + "true", `levels deep`},
	}
	for _, tt := range tests {
		_, err := ParseCond(tt.in)
		if err == nil {
			t.Errorf("ParseCond(%q) succeeded, want error containing %q", tt.in, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCond(%q) error = %q, want it to contain %q", tt.in, err, tt.want)
		}
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Input != tt.in || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCond(%q) error %#v is not a *ParseError wrapping ErrInvalid", tt.in, err)
		}
	}
}

func TestMustParseCond(t *testing.T) {
	if c := MustParseCond(`a == 1`); !c.Eval(map[string]any{"a": int64(1)}, true) {
		t.Errorf("MustParseCond(`a == 1`) = %s does not hold for a=1", c)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseCond of a bad condition did not panic")
		}
	}()
	MustParseCond(`a ==`)
}

// Conditions built in code must print in a form ParseCond reads back to the same condition.
func TestCondStringRoundTrip(t *testing.T) {
	conds := []Cond{
		Always(), Never(), RowExists(), RowAbsent(),
		Exists(nil), Exists(Path{"a"}), NotExists(Path{"m", "k"}),
		Exists(Path{"two words"}), Exists(Path{""}), Exists(Path{"1st"}), Exists(Path{"m", "a.b"}),
		Exists(Path{"AND"}), Exists(Path{"not_exists", "or"}), Exists(Path{"null"}), Exists(Path{"b"}),
		Exists(Path{"quote\"and\\slash\n"}), Exists(Path{"\xff\x00"}),
		Exists(Path{strings.Repeat("long", 20)}),
		Equal(Path{"s"}, ""), Equal(Path{"s"}, "é\t\"x\""), Equal(Path{"b"}, []byte{}), Equal(Path{"b"}, []byte("\x00\xffz")),
		Compare(Path{"i"}, Lt, int64(-1)), Compare(Path{"i"}, Ge, int64(-9223372036854775808)),
		Compare(Path{"f"}, Gt, 0.5), Compare(Path{"f"}, Le, 1e300), Compare(Path{"f"}, Ne, -2.5e-10),
		Equal(Path{"f"}, 3.0), Equal(Path{"f"}, math.Copysign(0, -1)), Equal(Path{"f"}, 1e21), Equal(Path{"f"}, 123456789.0),
		Equal(Path{"t"}, true), Compare(Path{"t"}, Ne, false), Equal(nil, nil),
		And(Exists(Path{"a"}), Or(Never(), Not(Equal(Path{"a"}, int64(1)))), Not(Not(RowExists()))),
		Not(And(Always(), Always())), Or(And(), Or()),
	}
	for _, c := range conds {
		s := c.String()
		got, err := ParseCond(s)
		if err != nil {
			t.Errorf("%#v prints as %q, which does not parse: %v", c, s, err)
			continue
		}
		if got.String() != s {
			t.Errorf("%#v prints as %q, which re-parses to %q", c, s, got)
		}
		if f, ok := c.Value.(float64); ok && got.Value != f {
			t.Errorf("%#v prints as %q, which re-parses to value %#v", c, s, got.Value)
		}
		for _, doc := range sampleDocs {
			for _, exists := range []bool{false, true} {
				if got.Eval(doc, exists) != c.Eval(doc, exists) {
					t.Errorf("%q: parsed condition evaluates differently on %v (exists=%v)", s, doc, exists)
				}
			}
		}
	}
}

func TestPathString(t *testing.T) {
	tests := []struct {
		p    Path
		want string
	}{
		{nil, "$"},
		{Path{"a"}, "a"},
		{Path{"a", "b"}, "a.b"},
		{Path{"a", "b c"}, `a["b c"]`},
		{Path{"b c", "d"}, `$["b c"].d`},
		{Path{"exists"}, "$.exists"},
		{Path{"a", "exists"}, "a.exists"},
		{Path{""}, `$[""]`},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}
