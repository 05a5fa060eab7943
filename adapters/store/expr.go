package store

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Path names a value inside a document: an attribute, then optionally map entries or object
// fields. Store rows use at most two segments (attribute, map entry); conditions over JSON values
// written by applications may go deeper.
type Path []string

// Attr returns the path of a top-level attribute.
func Attr(name string) Path { return Path{name} }

// Entry returns the path of the entry key inside the map at p.
func (p Path) Entry(key string) Path {
	out := make(Path, len(p), len(p)+1)
	copy(out, p)
	return append(out, key)
}

// String renders p in ParseCond's path syntax: owner.name, tags["two words"], $ for the whole
// document, and a "$" root when the first segment is not a plain identifier or is a keyword.
func (p Path) String() string {
	if len(p) == 0 {
		return "$"
	}
	var b strings.Builder
	if !isIdent(p[0]) || isKeyword(p[0]) {
		b.WriteByte('$')
	}
	for _, s := range p {
		switch {
		case !isIdent(s):
			b.WriteString("[" + strconv.Quote(s) + "]")
		case b.Len() > 0:
			b.WriteString("." + s)
		default:
			b.WriteString(s)
		}
	}
	return b.String()
}

// CondOp is the kind of a condition node.
type CondOp int

// Condition node kinds. The zero Cond is OpTrue.
const (
	OpTrue CondOp = iota
	OpFalse
	OpAnd
	OpOr
	OpNot
	OpRowExists // the row exists
	OpExists    // Path is present
	OpNotExists // Path is absent
	OpCompare   // Path Cmp Value; false when Path is absent or the types differ
)

// CmpOp is a comparison operator.
type CmpOp string

// Comparison operators.
const (
	Eq CmpOp = "=="
	Ne CmpOp = "!="
	Lt CmpOp = "<"
	Le CmpOp = "<="
	Gt CmpOp = ">"
	Ge CmpOp = ">="
)

// Cond is a portable condition over a document (a row's Attrs, or a decoded JSON value).
// Build it with the constructors below or with ParseCond; drivers that push conditions down walk
// its exported fields.
type Cond struct {
	Op    CondOp
	Path  Path
	Cmp   CmpOp
	Value any
	Args  []Cond
}

// Always is the condition that always holds.
func Always() Cond { return Cond{Op: OpTrue} }

// Never is the condition that never holds.
func Never() Cond { return Cond{Op: OpFalse} }

// RowExists holds when the row exists; Not(RowExists()) is "create only if absent".
func RowExists() Cond { return Cond{Op: OpRowExists} }

// RowAbsent holds when the row does not exist.
func RowAbsent() Cond { return Not(RowExists()) }

// OnlyAbsent reports whether c can hold only when the row does not exist: RowAbsent, alone or
// in a conjunction. A driver may then try to create the row first (the statement that proves it
// absent) and read it only when it exists.
func (c Cond) OnlyAbsent() bool {
	switch c.Op {
	case OpNot:
		return len(c.Args) == 1 && c.Args[0].Op == OpRowExists
	case OpAnd:
		for _, a := range c.Args {
			if a.OnlyAbsent() {
				return true
			}
		}
	}
	return false
}

// Exists holds when p is present.
func Exists(p Path) Cond { return Cond{Op: OpExists, Path: p} }

// NotExists holds when p is absent.
func NotExists(p Path) Cond { return Cond{Op: OpNotExists, Path: p} }

// Compare holds when the value at p compares to v by op.
func Compare(p Path, op CmpOp, v any) Cond { return Cond{Op: OpCompare, Path: p, Cmp: op, Value: v} }

// Equal holds when the value at p equals v.
func Equal(p Path, v any) Cond { return Compare(p, Eq, v) }

// And holds when every argument holds.
func And(cs ...Cond) Cond { return Cond{Op: OpAnd, Args: cs} }

// Or holds when some argument holds.
func Or(cs ...Cond) Cond { return Cond{Op: OpOr, Args: cs} }

// Not holds when c does not.
func Not(c Cond) Cond { return Cond{Op: OpNot, Args: []Cond{c}} }

// Eval evaluates c against a document: a row's Attrs, or any decoded JSON value (the root is
// the empty path "$"). exists says whether the row exists. A comparison with null tests presence:
// "p == null" holds when p is absent or null, "p != null" when it is present and not null.
func (c Cond) Eval(doc any, exists bool) bool {
	switch c.Op {
	case OpTrue:
		return true
	case OpFalse:
		return false
	case OpAnd:
		for _, a := range c.Args {
			if !a.Eval(doc, exists) {
				return false
			}
		}
		return true
	case OpOr:
		for _, a := range c.Args {
			if a.Eval(doc, exists) {
				return true
			}
		}
		return false
	case OpNot:
		return len(c.Args) == 1 && !c.Args[0].Eval(doc, exists)
	case OpRowExists:
		return exists
	case OpExists:
		_, ok := Lookup(doc, c.Path)
		return ok
	case OpNotExists:
		_, ok := Lookup(doc, c.Path)
		return !ok
	case OpCompare:
		v, ok := Lookup(doc, c.Path)
		if c.Value == nil && (c.Cmp == Eq || c.Cmp == Ne) {
			present := ok && v != nil
			return present == (c.Cmp == Ne)
		}
		if !ok {
			return false
		}
		return compare(v, c.Cmp, c.Value)
	}
	return false
}

func (c Cond) String() string {
	switch c.Op {
	case OpTrue:
		return "true"
	case OpFalse:
		return "false"
	case OpAnd, OpOr:
		sep := " and "
		if c.Op == OpOr {
			sep = " or "
		}
		parts := make([]string, len(c.Args))
		for i, a := range c.Args {
			parts[i] = a.String()
		}
		if len(parts) == 0 {
			if c.Op == OpAnd {
				return "true"
			}
			return "false"
		}
		return "(" + strings.Join(parts, sep) + ")"
	case OpNot:
		if len(c.Args) == 1 {
			return "not " + c.Args[0].String()
		}
	case OpRowExists:
		return "row_exists()"
	case OpExists:
		return "exists(" + c.Path.String() + ")"
	case OpNotExists:
		return "not_exists(" + c.Path.String() + ")"
	case OpCompare:
		return fmt.Sprintf("%s %s %s", c.Path, c.Cmp, literal(c.Value))
	}
	return "<invalid condition>"
}

func literal(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", x)
	case []byte:
		return fmt.Sprintf("b%q", x)
	case float64:
		// Keep a float a float when parsed back: 3.0 prints as "3.0", not "3".
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		return s
	default:
		return fmt.Sprint(x)
	}
}

// Lookup returns the value at p inside doc (a map, Attrs, or any decoded JSON value).
func Lookup(doc any, p Path) (any, bool) {
	if len(p) == 0 {
		switch m := doc.(type) {
		case Attrs:
			return doc, m != nil
		case map[string]any:
			return doc, m != nil
		}
		return doc, doc != nil
	}
	cur := doc
	for _, seg := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			if a, isAttrs := cur.(Attrs); isAttrs {
				m = a
			} else {
				return nil, false
			}
		}
		cur, ok = m[seg]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// number converts the numeric types that appear in rows and decoded JSON to float64, keeping
// int64 exactness where both sides are integers.
func number(v any) (i int64, f float64, isInt, ok bool) {
	switch x := v.(type) {
	case int64:
		return x, float64(x), true, true
	case int:
		return int64(x), float64(x), true, true
	case int32:
		return int64(x), float64(x), true, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), x, true, true
		}
		return 0, x, false, true
	}
	return 0, 0, false, false
}

func compare(a any, op CmpOp, b any) bool {
	if x, isBool := a.(bool); isBool {
		y, ok := b.(bool)
		return ok && ((op == Eq && x == y) || (op == Ne && x != y))
	}
	c, ok := order(a, b)
	if !ok {
		return false
	}
	switch op {
	case Eq:
		return c == 0
	case Ne:
		return c != 0
	case Lt:
		return c < 0
	case Le:
		return c <= 0
	case Gt:
		return c > 0
	case Ge:
		return c >= 0
	}
	return false
}

// order compares two values of the same kind; ok is false for different kinds and for maps.
func order(a, b any) (int, bool) {
	if ai, af, aInt, aok := number(a); aok {
		bi, bf, bInt, bok := number(b)
		if !bok {
			return 0, false
		}
		if aInt && bInt {
			switch {
			case ai < bi:
				return -1, true
			case ai > bi:
				return 1, true
			}
			return 0, true
		}
		switch {
		case af < bf:
			return -1, true
		case af > bf:
			return 1, true
		}
		return 0, true
	}
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 0, true
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y), true
		}
	}
	return 0, false
}

// MutationKind is the kind of one change in an Update.
type MutationKind int

// Mutation kinds.
const (
	// Set stores Value at Path, creating the map for a two-segment path if needed.
	Set MutationKind = iota
	// Remove deletes Path if present.
	Remove
	// Add adds the int64 Value to the integer at Path (absent counts as 0).
	Add
)

// Mutation is one change in an Update.
type Mutation struct {
	Kind  MutationKind
	Path  Path
	Value any
}

// Update is a list of mutations applied atomically, in order.
type Update []Mutation

// SetAttr returns a mutation that stores v at p.
func SetAttr(p Path, v any) Mutation { return Mutation{Kind: Set, Path: p, Value: v} }

// RemoveAttr returns a mutation that deletes p.
func RemoveAttr(p Path) Mutation { return Mutation{Kind: Remove, Path: p} }

// AddInt returns a mutation that adds delta to the integer at p.
func AddInt(p Path, delta int64) Mutation { return Mutation{Kind: Add, Path: p, Value: delta} }

// Validate checks that the update only uses paths and values every backend can store.
func (u Update) Validate() error {
	for _, m := range u {
		if len(m.Path) == 0 || len(m.Path) > 2 {
			return fmt.Errorf("%w: update path %s must name an attribute or a map entry", ErrInvalid, m.Path)
		}
		for _, seg := range m.Path {
			if seg == "" {
				return fmt.Errorf("%w: empty segment in update path %s", ErrInvalid, m.Path)
			}
		}
		switch m.Kind {
		case Set:
			if err := validateValue(m.Value, len(m.Path) == 1); err != nil {
				return fmt.Errorf("%w: set %s: %v", ErrInvalid, m.Path, err)
			}
		case Add:
			if _, ok := m.Value.(int64); !ok {
				return fmt.Errorf("%w: add to %s needs an int64 delta, got %T", ErrInvalid, m.Path, m.Value)
			}
		case Remove:
		default:
			return fmt.Errorf("%w: unknown mutation kind %d", ErrInvalid, m.Kind)
		}
	}
	return nil
}

// Apply returns a copy of attrs with u applied; attrs is not modified. It fails, leaving
// nothing changed, when an Add meets a non-integer or a map entry is set inside a non-map.
func (u Update) Apply(attrs Attrs) (Attrs, error) {
	out := attrs.Clone()
	if out == nil {
		out = Attrs{}
	}
	for _, m := range u {
		top := m.Path[0]
		if len(m.Path) == 2 {
			inner, present := out[top]
			mp, isMap := inner.(map[string]any)
			if present && !isMap {
				return nil, fmt.Errorf("%w: %s is a %T, not a map", ErrInvalid, Attr(top), inner)
			}
			if !present {
				if m.Kind == Remove {
					continue
				}
				mp = map[string]any{}
				out[top] = mp
			}
			applyLeaf(mp, m.Path[1], m)
			if err := leafErr(mp, m); err != nil {
				return nil, err
			}
			continue
		}
		applyLeaf(out, top, m)
		if err := leafErr(out, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func applyLeaf(m map[string]any, k string, mut Mutation) {
	switch mut.Kind {
	case Set:
		m[k] = cloneValue(mut.Value)
	case Remove:
		delete(m, k)
	case Add:
		if cur, ok := m[k].(int64); ok || m[k] == nil {
			m[k] = cur + mut.Value.(int64)
		}
	}
}

func leafErr(m map[string]any, mut Mutation) error {
	if mut.Kind == Add {
		if _, ok := m[mut.Path[len(mut.Path)-1]].(int64); !ok {
			return fmt.Errorf("%w: cannot add to %s: not an integer", ErrInvalid, mut.Path)
		}
	}
	return nil
}

// Clone returns a deep copy of attrs.
func (a Attrs) Clone() Attrs {
	if a == nil {
		return nil
	}
	out := make(Attrs, len(a))
	for k, v := range a {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return bytes.Clone(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e)
		}
		return m
	}
	return v
}

// Project returns the attributes of a named by paths (all of them when paths is nil).
func (a Attrs) Project(paths []Path) Attrs {
	if paths == nil {
		return a.Clone()
	}
	out := Attrs{}
	for _, p := range paths {
		v, ok := Lookup(a, p)
		if !ok || len(p) == 0 {
			continue
		}
		if len(p) == 1 {
			out[p[0]] = cloneValue(v)
			continue
		}
		mp, _ := out[p[0]].(map[string]any)
		if mp == nil {
			mp = map[string]any{}
			out[p[0]] = mp
		}
		mp[p[1]] = cloneValue(v)
	}
	return out
}

// ValidateAttrs checks that attrs only hold values every backend can store.
func ValidateAttrs(a Attrs) error {
	for k, v := range a {
		if k == "" {
			return fmt.Errorf("%w: empty attribute name", ErrInvalid)
		}
		if err := validateValue(v, true); err != nil {
			return fmt.Errorf("%w: attribute %q: %v", ErrInvalid, k, err)
		}
	}
	return nil
}

func validateValue(v any, mapAllowed bool) error {
	switch x := v.(type) {
	case int64, string, []byte, bool:
		return nil
	case map[string]any:
		if !mapAllowed {
			return fmt.Errorf("maps may not nest")
		}
		for k, e := range x {
			if k == "" {
				return fmt.Errorf("empty map key")
			}
			if err := validateValue(e, false); err != nil {
				return fmt.Errorf("entry %q: %v", k, err)
			}
		}
		return nil
	}
	return fmt.Errorf("unsupported type %T (want int64, string, []byte, bool or map[string]any)", v)
}

// Evaluate is what a driver that evaluates conditions itself (under a row lock, a transaction or
// a compare-and-swap) does with one conditional update, given the row's current state: it
// returns the result, and when the update applies, the new row encoded with EncodeAttrs, having
// checked it against maxRowBytes (keys included).
func (u BatchUpdate) Evaluate(cur Attrs, exists bool, maxRowBytes int) (UpdateResult, []byte, error) {
	if !u.Cond.Eval(cur, exists) {
		return UpdateResult{Attrs: cur}, nil, nil
	}
	next, err := u.Update.Apply(cur)
	if err != nil {
		return UpdateResult{}, nil, err
	}
	blob := EncodeAttrs(next)
	if n := len(u.Key.Partition) + len(u.Key.Sort) + len(blob); n > maxRowBytes {
		return UpdateResult{}, nil, fmt.Errorf("%w: row %s: %d bytes > %d", ErrTooLarge, u.Key, n, maxRowBytes)
	}
	return UpdateResult{Applied: true, Attrs: next}, blob, nil
}
