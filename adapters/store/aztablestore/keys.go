package aztablestore

import (
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Store keys become PartitionKey and RowKey through an escaping that is reversible, keeps byte
// order and yields printable ASCII only. Azure forbids / \ # ? and control characters in keys,
// and compares non-ASCII keys in UTF-16 order, not the UTF-8 byte order the store contract
// promises; ASCII compares the same everywhere.
//
// Each byte becomes one token: itself, or an escape character and two lowercase hex digits. The
// bytes escaped with one escape character form a range that holds no literal byte, and the
// escape character itself lies inside that range, so it compares above every literal below the
// range and below every literal above it:
//
//	0x00-0x2c (controls, space, !"#$%&'()*+,)  '!' + hex
//	0x2e-0x2f (. /)                             '.' + hex
//	0x3e-0x3f (> ?)                             '>' + hex
//	0x5b-0x5c ([ \)                             '[' + hex
//	0x7e-0xff (~ DEL, all non-ASCII bytes)      '~' + hex
//
// Everything else (- 0-9 : ; < = @ A-Z ] ^ _ ` a-z { | }) stays as it is. No token is a prefix of
// another, so comparing two escaped keys compares the first bytes where the keys differ: order
// is preserved. The empty key, which the service's point-read URLs cannot carry, becomes "!":
// a prefix of every key that starts with an escaped byte, below every other.
const (
	emptyKey = "!"
	// maxKeyChars is Azure's limit on PartitionKey and RowKey (1 KiB of ASCII here).
	maxKeyChars = 1024
	hexDigits   = "0123456789abcdef"
)

// escapeChar returns the escape character of b's range, or 0 if b stands for itself. An escape
// character lies inside its own range, so escapeChar(c) == c exactly when c is one.
func escapeChar(b byte) byte {
	switch {
	case b <= 0x2c:
		return '!'
	case b == 0x2e || b == 0x2f:
		return '.'
	case b == 0x3e || b == 0x3f:
		return '>'
	case b == 0x5b || b == 0x5c:
		return '['
	case b >= 0x7e:
		return '~'
	}
	return 0
}

// encodeKey escapes a store key for Azure, failing with store.ErrInvalid when the result is
// longer than Azure accepts.
func encodeKey(s string) (string, error) {
	if s == "" {
		return emptyKey, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		b := s[i]
		if e := escapeChar(b); e != 0 {
			out = append(out, e, hexDigits[b>>4], hexDigits[b&0xf])
		} else {
			out = append(out, b)
		}
	}
	if len(out) > maxKeyChars {
		return "", fmt.Errorf("%w: key %q is %d characters once escaped for Azure Tables, over the limit of %d", store.ErrInvalid, s, len(out), maxKeyChars)
	}
	return string(out), nil
}

// decodeKey reverses encodeKey, rejecting anything encodeKey could not have produced.
func decodeKey(s string) (string, error) {
	if s == emptyKey {
		return "", nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch e := escapeChar(c); {
		case e == 0:
			out = append(out, c)
		case e == c && i+2 < len(s):
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			b := hi<<4 | lo
			if hi > 0xf || lo > 0xf || escapeChar(b) != c {
				return "", fmt.Errorf("store: corrupt Azure key %q: bad escape at %d", s, i)
			}
			out = append(out, b)
			i += 2
		default:
			return "", fmt.Errorf("store: corrupt Azure key %q: unescaped %q at %d", s, c, i)
		}
	}
	return string(out), nil
}

// unhex returns the value of a lowercase hex digit, or 0xff.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}
