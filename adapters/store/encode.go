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
func DecodeAttrs(b []byte) (Attrs, error) { return DecodeProjected(b, nil) }

// DecodeProjected decodes only the attributes named by proj (all of them when proj is nil),
// skipping the rest without allocating them; it equals DecodeAttrs followed by Attrs.Project.
// Scans of linked DAALs read a few small attributes of rows that carry whole write logs.
func DecodeProjected(b []byte, proj []Path) (Attrs, error) {
	var wanted map[string]map[string]bool // attribute -> wanted entries (nil: all of it)
	if proj != nil {
		wanted = make(map[string]map[string]bool, len(proj))
		for _, p := range proj {
			if len(p) == 0 || len(p) > 2 {
				continue // Project ignores these too: rows hold at most one map level
			}
			switch entries, seen := wanted[p[0]]; {
			case len(p) == 1:
				wanted[p[0]] = nil
			case !seen:
				wanted[p[0]] = map[string]bool{p[1]: true}
			case entries != nil:
				entries[p[1]] = true
			}
		}
	}
	m, rest, err := decodeMap(b, 0, func(k string) (bool, map[string]bool) {
		if wanted == nil {
			return true, nil
		}
		entries, ok := wanted[k]
		return ok, entries
	})
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(rest))
	}
	return Attrs(m), nil
}

// selector says whether to keep a key and, for a map value, which entries (nil: all).
type selector func(key string) (keep bool, entries map[string]bool)

func keepAll(string) (bool, map[string]bool) { return true, nil }

func decodeMap(b []byte, depth int, sel selector) (map[string]any, []byte, error) {
	if depth > 1 {
		return nil, nil, fmt.Errorf("%w: maps nested too deeply", errCorrupt)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: bad map length", errCorrupt)
	}
	b = b[k:]
	m := map[string]any{}
	for i := uint64(0); i < n; i++ {
		key, rest, err := decodeLen(b)
		if err != nil {
			return nil, nil, err
		}
		keep, entries := sel(string(key))
		if !keep {
			if b, err = skipValue(rest, depth); err != nil {
				return nil, nil, err
			}
			continue
		}
		inner := keepAll
		if entries != nil {
			if len(rest) == 0 || rest[0] != tagMap {
				// Entries of something that is not a map: nothing to keep.
				if b, err = skipValue(rest, depth); err != nil {
					return nil, nil, err
				}
				continue
			}
			inner = func(e string) (bool, map[string]bool) { return entries[e], nil }
		}
		var v any
		if v, b, err = decodeValue(rest, depth, inner); err != nil {
			return nil, nil, err
		}
		if mv, isMap := v.(map[string]any); isMap && entries != nil && len(mv) == 0 {
			continue // no wanted entry present
		}
		m[string(key)] = v
	}
	return m, b, nil
}

// decodeValue decodes one tagged value; sel applies to the entries of a map value.
func decodeValue(b []byte, depth int, sel selector) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: missing value", errCorrupt)
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagInt:
		x, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, fmt.Errorf("%w: bad integer", errCorrupt)
		}
		return x, b[k:], nil
	case tagStr:
		s, rest, err := decodeLen(b)
		return string(s), rest, err
	case tagBytes:
		s, rest, err := decodeLen(b)
		return append([]byte{}, s...), rest, err
	case tagTrue:
		return true, b, nil
	case tagFalse:
		return false, b, nil
	case tagMap:
		return decodeMap(b, depth+1, sel)
	}
	return nil, nil, fmt.Errorf("%w: unknown type tag %q", errCorrupt, tag)
}

// skipValue returns what follows one tagged value, validating it without allocating.
func skipValue(b []byte, depth int) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: missing value", errCorrupt)
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagInt:
		if _, k := binary.Varint(b); k > 0 {
			return b[k:], nil
		}
		return nil, fmt.Errorf("%w: bad integer", errCorrupt)
	case tagStr, tagBytes:
		_, rest, err := decodeLen(b)
		return rest, err
	case tagTrue, tagFalse:
		return b, nil
	case tagMap:
		if depth >= 1 {
			return nil, fmt.Errorf("%w: maps nested too deeply", errCorrupt)
		}
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return nil, fmt.Errorf("%w: bad map length", errCorrupt)
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			var err error
			if _, b, err = decodeLen(b); err != nil {
				return nil, err
			}
			if b, err = skipValue(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: unknown type tag %q", errCorrupt, tag)
}

func decodeLen(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: bad length", errCorrupt)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
