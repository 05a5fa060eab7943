package store

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseCond parses the textual form of a condition, the same form Cond.String produces:
//
//	balance >= 10 and not exists(frozen)
//	owner.name == "ann" || owner["display name"] == "Ann"
//	not row_exists()
//
// Grammar (keywords are case-insensitive):
//
//	expr    := and (("or" | "||") and)*
//	and     := unary (("and" | "&&") unary)*
//	unary   := ("not" | "!") unary | primary
//	primary := "(" expr ")" | "true" | "false" | "row_exists" "(" ")"
//	         | "exists" "(" path ")" | "not_exists" "(" path ")" | path cmpop literal
//	path    := "$" | "$" segment+ | ident segment*      segment := "." ident | "[" string "]"
//	cmpop   := "==" | "!=" | "<" | "<=" | ">" | ">="
//	literal := integer | float | string | b string | "true" | "false" | "null"
//
// "$" alone is the whole document; a path must start with "$" when its first segment is not an
// identifier or is a keyword ($["two words"], $.exists). Integers become int64, floats float64,
// strings are double-quoted with Go escapes, b"..." is a []byte, and null is nil.
// Errors are *ParseError, which wraps ErrInvalid.
func ParseCond(s string) (Cond, error) {
	p := &parser{src: s}
	p.next()
	c := p.parseOr(0)
	if p.err == nil && p.tok.kind != tokEOF {
		p.fail(`"and", "or" or end of input`)
	}
	if p.err != nil {
		return Cond{}, p.err
	}
	return c, nil
}

// MustParseCond is ParseCond for conditions fixed in source code; it panics on a syntax error.
func MustParseCond(s string) Cond {
	c, err := ParseCond(s)
	if err != nil {
		panic(err)
	}
	return c
}

// ParseError reports where and why a condition failed to parse.
type ParseError struct {
	Input  string
	Offset int // byte offset into Input
	Msg    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("condition %q: at offset %d: %s", e.Input, e.Offset, e.Msg)
}

// Unwrap lets callers test for ErrInvalid.
func (e *ParseError) Unwrap() error { return ErrInvalid }

// maxNesting bounds recursion so hostile input cannot exhaust the stack.
const maxNesting = 200

// keywords may not start a path unless written after "$" ($.exists), so Path.String knows
// which first segments need the "$" root.
var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "true": true, "false": true, "null": true,
	"exists": true, "not_exists": true, "row_exists": true,
}

func isKeyword(s string) bool { return keywords[strings.ToLower(s)] }

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// isIdent reports whether s is an identifier in the condition grammar.
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokInt
	tokFloat
	tokString
	tokBytes
	tokPunct // ( ) . [ ] $ ! && || and the comparison operators
)

type token struct {
	kind tokKind
	text string // source text
	off  int
	val  any // decoded value of literal tokens
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokString, tokBytes:
		return "string " + t.text
	}
	return strconv.Quote(t.text)
}

type parser struct {
	src string
	pos int
	tok token
	err *ParseError
}

func (p *parser) errorAt(off int, format string, args ...any) {
	if p.err == nil {
		p.err = &ParseError{Input: p.src, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	// Park on EOF so callers unwind without further errors.
	p.tok = token{kind: tokEOF, off: len(p.src)}
}

// fail reports that the current token is not what the grammar expected.
func (p *parser) fail(expected string) {
	p.errorAt(p.tok.off, "expected %s, found %s", expected, p.tok.describe())
}

func (p *parser) is(text string) bool {
	return (p.tok.kind == tokPunct || p.tok.kind == tokIdent) && strings.EqualFold(p.tok.text, text)
}

func (p *parser) expect(text string) bool {
	if !p.is(text) {
		p.fail(strconv.Quote(text))
		return false
	}
	p.next()
	return true
}

var twoCharOps = []string{"==", "!=", "<=", ">=", "&&", "||"}

// next advances to the following token.
func (p *parser) next() {
	if p.err != nil {
		return
	}
	s := p.src
	for p.pos < len(s) && strings.IndexByte(" \t\r\n", s[p.pos]) >= 0 {
		p.pos++
	}
	start := p.pos
	if start == len(s) {
		p.tok = token{kind: tokEOF, off: start}
		return
	}
	c := s[start]
	switch {
	case c == 'b' && start+1 < len(s) && s[start+1] == '"':
		p.pos++
		if str, ok := p.lexString(); ok {
			p.tok = token{kind: tokBytes, text: s[start:p.pos], off: start, val: []byte(str)}
		}
	case c == '"':
		if str, ok := p.lexString(); ok {
			p.tok = token{kind: tokString, text: s[start:p.pos], off: start, val: str}
		}
	case isIdentStart(c):
		for p.pos < len(s) && isIdentChar(s[p.pos]) {
			p.pos++
		}
		p.tok = token{kind: tokIdent, text: s[start:p.pos], off: start}
	case isDigit(c) || c == '-' && start+1 < len(s) && isDigit(s[start+1]):
		p.lexNumber()
	default:
		for _, op := range twoCharOps {
			if strings.HasPrefix(s[start:], op) {
				p.pos += 2
				p.tok = token{kind: tokPunct, text: op, off: start}
				return
			}
		}
		if strings.IndexByte("()[].$!<>", c) < 0 {
			r, _ := utf8.DecodeRuneInString(s[start:])
			p.errorAt(start, "unexpected character %q", r)
			return
		}
		p.pos++
		p.tok = token{kind: tokPunct, text: s[start:p.pos], off: start}
	}
}

// lexString scans a double-quoted Go string starting at p.pos.
func (p *parser) lexString() (string, bool) {
	s, start := p.src, p.pos
	i := start + 1
	for ; i < len(s) && s[i] != '"'; i++ {
		if s[i] == '\\' {
			i++
		}
	}
	if i >= len(s) {
		p.errorAt(start, "unterminated string")
		return "", false
	}
	p.pos = i + 1
	str, err := strconv.Unquote(s[start:p.pos])
	if err != nil {
		p.errorAt(start, "invalid string literal %s", s[start:p.pos])
		return "", false
	}
	return str, true
}

// lexNumber scans -?digits(.digits)?([eE][+-]?digits)?.
func (p *parser) lexNumber() {
	s, start := p.src, p.pos
	digits := func() bool {
		d := p.pos
		for p.pos < len(s) && isDigit(s[p.pos]) {
			p.pos++
		}
		return p.pos > d
	}
	if s[p.pos] == '-' {
		p.pos++
	}
	digits()
	isFloat, ok := false, true
	if p.pos < len(s) && s[p.pos] == '.' {
		p.pos++
		isFloat, ok = true, digits()
	}
	if ok && p.pos < len(s) && (s[p.pos] == 'e' || s[p.pos] == 'E') {
		p.pos++
		if p.pos < len(s) && (s[p.pos] == '+' || s[p.pos] == '-') {
			p.pos++
		}
		isFloat, ok = true, digits()
	}
	for p.pos < len(s) && (isIdentChar(s[p.pos]) || s[p.pos] == '.') {
		p.pos, ok = p.pos+1, false
	}
	text := s[start:p.pos]
	if !ok {
		p.errorAt(start, "malformed number %q", text)
		return
	}
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			p.errorAt(start, "number %s is out of range for float64", text)
			return
		}
		p.tok = token{kind: tokFloat, text: text, off: start, val: f}
		return
	}
	i, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		p.errorAt(start, "integer %s is out of range for int64 (write it as a float, e.g. %se0)", text, text)
		return
	}
	p.tok = token{kind: tokInt, text: text, off: start, val: i}
}

func (p *parser) nest(depth int) bool {
	if depth > maxNesting {
		p.errorAt(p.tok.off, "condition nests more than %d levels deep", maxNesting)
		return false
	}
	return true
}

func (p *parser) parseOr(depth int) Cond {
	if !p.nest(depth) {
		return Cond{}
	}
	args := []Cond{p.parseAnd(depth)}
	for p.is("or") || p.is("||") {
		p.next()
		args = append(args, p.parseAnd(depth))
	}
	if len(args) == 1 {
		return args[0]
	}
	return Or(args...)
}

func (p *parser) parseAnd(depth int) Cond {
	args := []Cond{p.parseUnary(depth)}
	for p.is("and") || p.is("&&") {
		p.next()
		args = append(args, p.parseUnary(depth))
	}
	if len(args) == 1 {
		return args[0]
	}
	return And(args...)
}

func (p *parser) parseUnary(depth int) Cond {
	if !p.is("not") && !p.is("!") {
		return p.parsePrimary(depth)
	}
	if !p.nest(depth + 1) {
		return Cond{}
	}
	p.next()
	return Not(p.parseUnary(depth + 1))
}

func (p *parser) parsePrimary(depth int) Cond {
	switch {
	case p.is("("):
		p.next()
		c := p.parseOr(depth + 1)
		p.expect(")")
		return c
	case p.is("true"):
		p.next()
		return Always()
	case p.is("false"):
		p.next()
		return Never()
	case p.is("row_exists"):
		p.next()
		if p.expect("(") {
			p.expect(")")
		}
		return RowExists()
	case p.is("exists"), p.is("not_exists"):
		op := OpExists
		if p.is("not_exists") {
			op = OpNotExists
		}
		p.next()
		var path Path
		if p.expect("(") {
			path = p.parsePath()
			p.expect(")")
		}
		return Cond{Op: op, Path: path}
	case !p.is("$") && (p.tok.kind != tokIdent || isKeyword(p.tok.text)):
		p.fail("a condition")
		return Cond{}
	}
	path := p.parsePath()
	cmp := CmpOp(p.tok.text)
	switch cmp {
	case Eq, Ne, Lt, Le, Gt, Ge:
		if p.tok.kind == tokPunct {
			p.next()
			return Compare(path, cmp, p.parseLiteral())
		}
	}
	p.fail("a comparison operator (==, !=, <, <=, >, >=)")
	return Cond{}
}

func (p *parser) parsePath() Path {
	var path Path
	switch {
	case p.is("$"):
		p.next()
	case p.tok.kind == tokIdent && !isKeyword(p.tok.text):
		path = Path{p.tok.text}
		p.next()
	default:
		p.fail("a path")
		return nil
	}
	for p.err == nil {
		switch {
		case p.is("."):
			p.next()
			if p.tok.kind != tokIdent {
				p.fail("an identifier")
				return nil
			}
			path = append(path, p.tok.text)
			p.next()
		case p.is("["):
			p.next()
			if p.tok.kind != tokString {
				p.fail("a quoted string")
				return nil
			}
			path = append(path, p.tok.val.(string))
			p.next()
			p.expect("]")
		default:
			return path
		}
	}
	return path
}

func (p *parser) parseLiteral() any {
	t := p.tok
	switch {
	case t.kind == tokInt, t.kind == tokFloat, t.kind == tokString, t.kind == tokBytes:
		p.next()
		return t.val
	case p.is("true"), p.is("false"):
		p.next()
		return strings.EqualFold(t.text, "true")
	case p.is("null"):
		p.next()
		return nil
	}
	p.fail("a literal")
	return nil
}
