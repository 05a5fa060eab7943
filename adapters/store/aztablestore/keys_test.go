package aztablestore

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// randomKey draws keys rich in the bytes at the edges of the escaped ranges.
func randomKey(r *rand.Rand) string {
	edges := []byte{0x00, 0x1f, 0x20, '!', '#', '\'', ',', '-', '.', '/', '0', '9', '=', '>', '?', '@', 'A', 'Z', '[', '\\', ']', '`', 'a', 'z', '|', '}', '~', 0x7f, 0x80, 0x9f, 0xc3, 0xa9, 0xff}
	b := make([]byte, r.IntN(12))
	for i := range b {
		if r.IntN(2) == 0 {
			b[i] = edges[r.IntN(len(edges))]
		} else {
			b[i] = byte(r.IntN(256))
		}
	}
	return string(b)
}

func TestKeyEscaping(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := randomKey(r), randomKey(r)
		ea, err := encodeKey(a)
		if err != nil {
			t.Fatal(err)
		}
		eb, _ := encodeKey(b)
		if got, err := decodeKey(ea); err != nil || got != a {
			t.Fatalf("decodeKey(encodeKey(%q)) = %q, %v", a, got, err)
		}
		if strings.Compare(ea, eb) != strings.Compare(a, b) {
			t.Fatalf("order not kept: %q vs %q became %q vs %q", a, b, ea, eb)
		}
		for i := 0; i < len(ea); i++ {
			// Printable ASCII without what Azure forbids, or what needs quoting in URLs and filters.
			if c := ea[i]; c < 0x21 || c > 0x7e || strings.IndexByte(`/\#?'%+&`, c) >= 0 {
				t.Fatalf("encodeKey(%q) = %q holds %q", a, ea, c)
			}
		}
	}
}

func TestKeyEscapingEdges(t *testing.T) {
	for raw, want := range map[string]string{
		"":               "!",
		"i|abc-12":       "i|abc-12",
		"a/b?c#d\\e":     "a.2fb>3fc!23d[5ce",
		"\x00":           "!00",
		"!":              "!21",
		"é~":             "~c3~a9~7e",
		"d|t|KEY_9:;<=@": "d|t|KEY_9:;<=@",
	} {
		if got, err := encodeKey(raw); err != nil || got != want {
			t.Errorf("encodeKey(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, bad := range []string{"!0", "!2", "a#b", "!zz", "!41", ".2e.", "~7d", " ", "a\x00"} {
		if got, err := decodeKey(bad); err == nil {
			t.Errorf("decodeKey(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := encodeKey(strings.Repeat("a", maxKeyChars)); err != nil {
		t.Errorf("a %d-character key: %v", maxKeyChars, err)
	}
	if _, err := encodeKey(strings.Repeat("/", maxKeyChars/3+1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a key over %d characters once escaped: err = %v, want store.ErrInvalid", maxKeyChars, err)
	}
}
