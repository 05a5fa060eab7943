package store

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// sampleDocs cover every value type, so conditions that differ in a literal's type or value
// evaluate differently on at least one of them.
var sampleDocs = []map[string]any{
	nil,
	{},
	{"a": int64(1), "b": "x", "c": []byte("x"), "d": true, "m": map[string]any{"k": int64(1), "s": "x"}},
	{"a": float64(1), "b": "", "c": []byte{}, "d": false, "m": map[string]any{}, "x": nil},
	{"a": int64(-5), "b": "y", "balance": float64(10.5), "owner": map[string]any{"name": "ann"}, "exists": int64(0)},
	{"a": "1", "b": int64(2), "i": int64(math.MaxInt64), "f": 0.5, "t": true, "s": "é", "two words": int64(3), "": int64(0)},
}

func FuzzParseCond(f *testing.F) {
	for _, s := range []string{
		`balance >= 10`, `a == 1 and (b != "x" or not exists(m.k))`, `not row_exists()`,
		`$["two words"] < -1.5e3`, `c == b"\x00"`, `a == null || d == TRUE && !(s > "é")`,
		`not_exists($)`, `m["k"] <= 9223372036854775807`, `((a==1))`, `x.y.z == false`, `1 == a`,
		`a == "\u00e9\n"`, `a == 1e-400`, `$.exists == 0`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCond(s)
		if err != nil {
			return
		}
		printed := c.String()
		again, err := ParseCond(printed)
		if err != nil {
			t.Fatalf("ParseCond(%q) = %#v, whose String %q does not parse: %v", s, c, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("ParseCond(%q): String %q re-parses to one that prints as %q", s, printed, again)
		}
		for _, doc := range sampleDocs {
			for _, exists := range []bool{false, true} {
				if c.Eval(doc, exists) != again.Eval(doc, exists) {
					t.Fatalf("ParseCond(%q) and ParseCond(%q) disagree on %v (exists=%v)", s, printed, doc, exists)
				}
			}
		}
	})
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite:///var/lib/app.db?table=t&max_row_bytes=1024", "mem://demo", "mem://", "sqlite://./x.db",
		"dynamodb://tbl?region=eu-west-1", "postgres://u:secret@h:5432/db?sslmode=disable", "no-scheme",
		"sqlite:relative", "a://b/%zz", "x://h?%", " ", "://x", "s://[::1]:80/p#frag",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURL(s)
		if err != nil {
			return
		}
		if u.Scheme == "" {
			t.Fatalf("ParseURL(%q) accepted a URL without a scheme", s)
		}
		_ = u.Redacted()
		_ = u.Param("table", "default")
		_ = u.CheckParams("table")
	})
}

// projections exercise DecodeProjected against DecodeAttrs followed by Project.
var projections = [][]Path{
	{}, {Attr("a")}, {Attr("m").Entry("k")}, {Attr("m"), Attr("m").Entry("k")},
	{Attr("m").Entry("k"), Attr("m")}, {Attr("a").Entry("x"), Attr("b")}, {{}, {"a", "b", "c"}},
}

func FuzzDecodeAttrs(f *testing.F) {
	f.Add(EncodeAttrs(Attrs{"a": int64(-3), "b": "x", "m": map[string]any{"k": []byte{1}, "j": true}}))
	f.Add(EncodeAttrs(Attrs{"a": map[string]any{"x": false}, "m": "not a map"}))
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add(EncodeAttrs(Attrs{"a": int64(-1), "b": "x", "c": []byte{0}, "d": true, "e": false,
		"m": map[string]any{"k": int64(math.MinInt64), "e": []byte{}}}))
	f.Add([]byte{1, 1, 'm', 'm', 1, 1, 'n', 'm', 0}) // a map nested in a map
	f.Add([]byte{2, 1, 'a', 't', 1, 'a', 'f'})       // a duplicate key
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAttrs(b)
		if err != nil {
			return
		}
		for _, proj := range projections {
			got, err := DecodeProjected(b, proj)
			if want := a.Project(proj); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeProjected(%x, %v) = %#v, %v; DecodeAttrs+Project = %#v", b, proj, got, err, want)
			}
		}
		again, err := DecodeAttrs(EncodeAttrs(a))
		if err != nil {
			t.Fatalf("DecodeAttrs(%x) = %v, whose encoding does not decode: %v", b, a, err)
		}
		if !reflect.DeepEqual(again, a) {
			t.Fatalf("DecodeAttrs(%x) = %#v, which round-trips to %#v", b, a, again)
		}
	})
}

// randomAttrs returns valid Attrs exercising every value type, extreme integers and empty values.
func randomAttrs(r *rand.Rand) Attrs {
	scalar := func() any {
		switch r.IntN(7) {
		case 0:
			return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, 300}[r.IntN(7)]
		case 1:
			return r.Int64() - r.Int64()
		case 2:
			return randomString(r)
		case 3:
			return []byte(randomString(r))
		case 4:
			return r.IntN(2) == 0
		case 5:
			return ""
		}
		return []byte{}
	}
	a := Attrs{}
	for range r.IntN(8) {
		if r.IntN(5) == 0 {
			m := map[string]any{}
			for range r.IntN(4) {
				m[randomString(r)+"k"] = scalar()
			}
			a[randomString(r)+"m"] = m
			continue
		}
		a[randomString(r)+"a"] = scalar()
	}
	return a
}

func randomString(r *rand.Rand) string {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func TestEncodeAttrsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := randomAttrs(r)
		if err := ValidateAttrs(a); err != nil {
			t.Fatalf("case %d: generator produced invalid attrs: %v", i, err)
		}
		enc := EncodeAttrs(a)
		got, err := DecodeAttrs(enc)
		if err != nil {
			t.Fatalf("case %d: DecodeAttrs(EncodeAttrs(%#v)): %v", i, a, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("case %d: round trip of %#v gave %#v", i, a, got)
		}
		if !bytes.Equal(EncodeAttrs(got), enc) {
			t.Fatalf("case %d: encoding of %#v is not deterministic", i, a)
		}
		for cut := range enc {
			if _, err := DecodeAttrs(enc[:cut]); err == nil {
				t.Fatalf("case %d: truncated encoding %x (of %d bytes) decoded without error", i, enc[:cut], len(enc))
			}
		}
	}
}
