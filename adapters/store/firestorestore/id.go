package firestorestore

import (
	"fmt"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Document IDs encode partition and sort keys reversibly, within Firestore's ID rules (no "/",
// not "." or "..", not __*__, at most 1500 bytes), and so that document-ID order is sort-key
// order: a partition scan is a query ordered by document ID.
//
// Every ID starts with idPrefix, which rules out the empty, dot and __*__ forms. Bytes '0'..'}'
// stand for themselves; a byte below '0' becomes '!' and two hex digits, a byte above '}' becomes
// '~' and two hex digits. The output is printable ASCII, where byte, UTF-16 and code point order
// agree, so the order does not depend on how a Firestore version compares strings. Each byte's
// token sorts like the byte ('!' < '0'..'}' < '~', hex digits in ASCII order, fixed width), and
// no token is a prefix of another, so the encoding preserves byte-wise order.
const (
	idPrefix  = "k"
	escLow    = '!'
	escHigh   = '~'
	lowSafe   = '0'
	highSafe  = '}'
	hexDigits = "0123456789ABCDEF"
	// maxIDBytes is Firestore's limit on a document ID. Keys of up to 499 bytes always fit;
	// keys of '0'..'}' characters fit up to 1499 bytes.
	maxIDBytes = 1500
)

// encodeID returns the document ID of a partition or sort key.
func encodeID(key string) (string, error) {
	var b strings.Builder
	b.Grow(len(idPrefix) + len(key))
	b.WriteString(idPrefix)
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c < lowSafe:
			b.Write([]byte{escLow, hexDigits[c>>4], hexDigits[c&15]})
		case c > highSafe:
			b.Write([]byte{escHigh, hexDigits[c>>4], hexDigits[c&15]})
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() > maxIDBytes {
		return "", fmt.Errorf("%w: key %q is %d bytes as a Firestore document ID, over the %d-byte limit", store.ErrInvalid, key, b.Len(), maxIDBytes)
	}
	return b.String(), nil
}

// decodeID reverses encodeID. It accepts only what encodeID produces, so a document that some
// other program put into the collection is reported rather than misread.
func decodeID(id string) (string, error) {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok {
		return "", errForeignID(id)
	}
	out := make([]byte, 0, len(rest))
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c >= lowSafe && c <= highSafe {
			out = append(out, c)
			continue
		}
		if (c != escLow && c != escHigh) || i+2 >= len(rest) {
			return "", errForeignID(id)
		}
		hi, lo := strings.IndexByte(hexDigits, rest[i+1]), strings.IndexByte(hexDigits, rest[i+2])
		if hi < 0 || lo < 0 {
			return "", errForeignID(id)
		}
		v := byte(hi<<4 | lo)
		// Only the canonical escape decodes, so every ID maps back to exactly one key.
		if (c == escLow) != (v < lowSafe) || (c == escHigh) != (v > highSafe) {
			return "", errForeignID(id)
		}
		out = append(out, v)
		i += 2
	}
	return string(out), nil
}

func errForeignID(id string) error {
	return fmt.Errorf("document ID %q was not written by ssfkit", id)
}
