package dynamostore

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// builder collects the expression attribute names and values of one request. Every name and
// value goes through a placeholder, so reserved words and arbitrary bytes in names are safe.
type builder struct {
	names     map[string]string // name -> placeholder
	values    map[string]types.AttributeValue
	nvalues   int               // values made, type names aside
	typeNames map[string]string // DynamoDB type -> placeholder of its name, for attribute_type
}

func newBuilder() *builder {
	return &builder{names: map[string]string{}, values: map[string]types.AttributeValue{}, typeNames: map[string]string{}}
}

func (b *builder) name(n string) string {
	ph, ok := b.names[n]
	if !ok {
		ph = "#n" + strconv.Itoa(len(b.names))
		b.names[n] = ph
	}
	return ph
}

// path renders a row path (attribute, or attribute and map entry) as a document path.
func (b *builder) path(p store.Path) string {
	s := b.name(storedName(p[0]))
	for _, seg := range p[1:] {
		s += "." + b.name(seg)
	}
	return s
}

func (b *builder) value(av types.AttributeValue) string {
	ph := ":v" + strconv.Itoa(b.nvalues)
	b.nvalues++
	b.values[ph] = av
	return ph
}

func (b *builder) number(n int64) string {
	return b.value(&types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)})
}

// hasType renders attribute_type(path, T).
func (b *builder) hasType(path, typ string) string {
	ph, ok := b.typeNames[typ]
	if !ok {
		ph = ":t" + typ
		b.typeNames[typ] = ph
		b.values[ph] = &types.AttributeValueMemberS{Value: typ}
	}
	return "attribute_type(" + path + ", " + ph + ")"
}

var placeholder = regexp.MustCompile(`[#:][a-zA-Z0-9]+`)

// params returns the names and values the final expressions use. Constant folding drops
// subexpressions after their placeholders were made, and DynamoDB rejects unused ones.
func (b *builder) params(exprs ...*string) (map[string]string, map[string]types.AttributeValue) {
	used := map[string]bool{}
	for _, e := range exprs {
		if e != nil {
			for _, ph := range placeholder.FindAllString(*e, -1) {
				used[ph] = true
			}
		}
	}
	var names map[string]string
	for n, ph := range b.names {
		if used[ph] {
			if names == nil {
				names = map[string]string{}
			}
			names[ph] = n
		}
	}
	var values map[string]types.AttributeValue
	for ph, v := range b.values {
		if used[ph] {
			if values == nil {
				values = map[string]types.AttributeValue{}
			}
			values[ph] = v
		}
	}
	return names, values
}

// cexpr is a translated condition: a constant, or a condition expression.
type cexpr struct {
	konst int8 // +1 always true, -1 always false, 0 see expr
	expr  string
}

var (
	alwaysTrue  = cexpr{konst: 1}
	alwaysFalse = cexpr{konst: -1}
)

func expr(s string) cexpr { return cexpr{expr: s} }

// text returns the condition expression, nil for one that always holds. A condition that never
// holds needs no request at all, so callers never send one.
func (c cexpr) text() *string {
	if c.konst > 0 {
		return nil
	}
	return ptr(c.expr)
}

func ptr[T any](v T) *T { return &v }

func and(cs ...cexpr) cexpr { return combine(cs, -1, " AND ") }
func or(cs ...cexpr) cexpr  { return combine(cs, +1, " OR ") }

// combine folds constants: dominant (false for AND, true for OR) absorbs, the other drops out.
func combine(cs []cexpr, dominant int8, op string) cexpr {
	var parts []string
	for _, c := range cs {
		switch c.konst {
		case dominant:
			return c
		case 0:
			parts = append(parts, c.expr)
		}
	}
	switch len(parts) {
	case 0:
		return cexpr{konst: -dominant}
	case 1:
		return expr(parts[0])
	}
	return expr("(" + strings.Join(parts, op) + ")")
}

func not(c cexpr) cexpr {
	if c.konst != 0 {
		return cexpr{konst: -c.konst}
	}
	return expr("(NOT " + c.expr + ")")
}

// errUntranslatable: the condition has a literal DynamoDB cannot compare exactly as
// store.Cond.Eval does; the driver evaluates it on a read row instead.
var errUntranslatable = errors.New("condition not expressible in DynamoDB")

// rowPath reports whether p can name a value in a row: an attribute or a map entry. Longer
// paths and empty segments never resolve, since rows hold one level of maps.
func rowPath(p store.Path) bool {
	if len(p) == 0 || len(p) > 2 {
		return false
	}
	for _, s := range p {
		if s == "" {
			return false
		}
	}
	return true
}

// cond translates c into a condition expression with exactly store.Cond.Eval's semantics on
// rows: comparisons across types are false, a missing path compares false, and the row's
// existence is its key's.
func (b *builder) cond(c store.Cond) (cexpr, error) {
	switch c.Op {
	case store.OpTrue:
		return alwaysTrue, nil
	case store.OpFalse:
		return alwaysFalse, nil
	case store.OpAnd, store.OpOr:
		parts := make([]cexpr, len(c.Args))
		for i, a := range c.Args {
			x, err := b.cond(a)
			if err != nil {
				return cexpr{}, err
			}
			parts[i] = x
		}
		if c.Op == store.OpAnd {
			return and(parts...), nil
		}
		return or(parts...), nil
	case store.OpNot:
		if len(c.Args) != 1 {
			return alwaysFalse, nil
		}
		x, err := b.cond(c.Args[0])
		return not(x), err
	case store.OpRowExists:
		return b.exists(nil, true), nil
	case store.OpExists, store.OpNotExists:
		return b.exists(c.Path, c.Op == store.OpExists), nil
	case store.OpCompare:
		return b.compare(c)
	}
	return alwaysFalse, nil
}

// exists tests the presence of p; the empty path is the row itself.
func (b *builder) exists(p store.Path, want bool) cexpr {
	var path string
	switch {
	case len(p) == 0:
		path = b.name(attrPK)
	case !rowPath(p) && want:
		return alwaysFalse
	case !rowPath(p):
		return alwaysTrue
	default:
		path = b.path(p)
	}
	if want {
		return expr("attribute_exists(" + path + ")")
	}
	return expr("attribute_not_exists(" + path + ")")
}

var operators = map[store.CmpOp]string{store.Eq: "=", store.Ne: "<>", store.Lt: "<", store.Le: "<=", store.Gt: ">", store.Ge: ">="}

func (b *builder) compare(c store.Cond) (cexpr, error) {
	op, known := operators[c.Cmp]
	if c.Value == nil && (c.Cmp == store.Eq || c.Cmp == store.Ne) {
		return b.exists(c.Path, c.Cmp == store.Ne), nil // null tests presence
	}
	if !known || !rowPath(c.Path) {
		return alwaysFalse, nil
	}
	av, typ, err := operand(c.Value)
	if err != nil || av == nil {
		return alwaysFalse, err // nil av: a type no row value compares with
	}
	if typ == "BOOL" && c.Cmp != store.Eq && c.Cmp != store.Ne {
		return alwaysFalse, nil // booleans are unordered
	}
	// The type guard makes values of different types compare false, even with <>, as Eval
	// has it; DynamoDB rejects some such comparisons, and emulators coerce some (moto: true = 1).
	path := b.path(c.Path)
	return expr("(" + b.hasType(path, typ) + " AND " + path + " " + op + " " + b.value(av) + ")"), nil
}

// operand converts a comparison literal to the attribute value it compares with. A nil value
// with no error means no row value ever compares with it.
func operand(v any) (types.AttributeValue, string, error) {
	switch x := v.(type) {
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, "BOOL", nil
	case string:
		if !utf8.ValidString(x) {
			return nil, "", errUntranslatable
		}
		return &types.AttributeValueMemberS{Value: x}, "S", nil
	case []byte:
		if x == nil {
			x = []byte{}
		}
		return &types.AttributeValueMemberB{Value: x}, "B", nil
	case int64:
		return number(strconv.FormatInt(x, 10)), "N", nil
	case int:
		return number(strconv.Itoa(x)), "N", nil
	case int32:
		return number(strconv.FormatInt(int64(x), 10)), "N", nil
	case float64:
		// Eval compares an int64 with a float64 in float64 arithmetic. Below 2^53 that is
		// exact, and the shortest decimal of the float orders against every integer as the
		// float does; beyond, or too small for DynamoDB's exponent range, it is not.
		abs := math.Abs(x)
		if math.IsNaN(x) || abs >= 1<<53 || (abs != 0 && abs < 1e-100) {
			return nil, "", errUntranslatable
		}
		if x == 0 {
			x = 0 // not -0
		}
		return number(strconv.FormatFloat(x, 'f', -1, 64)), "N", nil
	}
	return nil, "", nil
}

func number(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

// condPaths lists the paths c reads: what a row must keep for c's value to stay the same.
func condPaths(c store.Cond, out []store.Path) []store.Path {
	switch c.Op {
	case store.OpExists, store.OpNotExists, store.OpCompare:
		if rowPath(c.Path) {
			out = append(out, c.Path)
		}
	}
	for _, a := range c.Args {
		out = condPaths(a, out)
	}
	return out
}

// rowAbsent reports whether c can only hold on a missing row: create-if-absent.
func rowAbsent(c store.Cond) bool {
	switch c.Op {
	case store.OpNot:
		return len(c.Args) == 1 && c.Args[0].Op == store.OpRowExists
	case store.OpAnd:
		for _, a := range c.Args {
			if rowAbsent(a) {
				return true
			}
		}
	}
	return false
}
