package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// EncodeAttrs serialises attrs into a compact, type-preserving binary form for drivers that
// store a row as one blob (SQLite, and map-valued columns elsewhere). Keys are sorted, so equal
// rows encode to equal bytes.
func EncodeAttrs(a Attrs) []byte {
	buf := make([]byte, 0, 64)
	return appendMap(buf, a)
}

const (
	tagInt   = 'i'
	tagStr   = 's'
	tagBytes = 'b'
	tagTrue  = 't'
	tagFalse = 'f'
	tagMap   = 'm'
)

func appendMap(buf []byte, m map[string]any) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = appendValue(buf, m[k])
	}
	return buf
}

func appendValue(buf []byte, v any) []byte {
	switch x := v.(type) {
	case int64:
		return binary.AppendVarint(append(buf, tagInt), x)
	case string:
		buf = binary.AppendUvarint(append(buf, tagStr), uint64(len(x)))
		return append(buf, x...)
	case []byte:
		buf = binary.AppendUvarint(append(buf, tagBytes), uint64(len(x)))
		return append(buf, x...)
	case bool:
		if x {
			return append(buf, tagTrue)
		}
		return append(buf, tagFalse)
	case map[string]any:
		return appendMap(append(buf, tagMap), x)
	}
	panic(fmt.Sprintf("store: EncodeAttrs: unsupported type %T (validate attrs first)", v))
}

var errCorrupt = errors.New("store: corrupt encoded row")

// DecodeAttrs reverses EncodeAttrs. It never panics on malformed input.
func DecodeAttrs(b []byte) (Attrs, error) {
	m, rest, err := decodeMap(b, 0)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(rest))
	}
	return Attrs(m), nil
}

func decodeMap(b []byte, depth int) (map[string]any, []byte, error) {
	if depth > 1 {
		return nil, nil, fmt.Errorf("%w: maps nested too deeply", errCorrupt)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: bad map length", errCorrupt)
	}
	b = b[k:]
	m := make(map[string]any, n)
	for i := uint64(0); i < n; i++ {
		var key []byte
		var err error
		if key, b, err = decodeLen(b); err != nil {
			return nil, nil, err
		}
		if len(b) == 0 {
			return nil, nil, fmt.Errorf("%w: missing value", errCorrupt)
		}
		tag := b[0]
		b = b[1:]
		var v any
		switch tag {
		case tagInt:
			x, k := binary.Varint(b)
			if k <= 0 {
				return nil, nil, fmt.Errorf("%w: bad integer", errCorrupt)
			}
			v, b = x, b[k:]
		case tagStr:
			var s []byte
			if s, b, err = decodeLen(b); err != nil {
				return nil, nil, err
			}
			v = string(s)
		case tagBytes:
			var s []byte
			if s, b, err = decodeLen(b); err != nil {
				return nil, nil, err
			}
			v = append([]byte{}, s...)
		case tagTrue:
			v = true
		case tagFalse:
			v = false
		case tagMap:
			if v, b, err = decodeMap(b, depth+1); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("%w: unknown type tag %q", errCorrupt, tag)
		}
		m[string(key)] = v
	}
	return m, b, nil
}

func decodeLen(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: bad length", errCorrupt)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
