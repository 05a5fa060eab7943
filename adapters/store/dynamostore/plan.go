package dynamostore

import (
	"math"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// An update goes to DynamoDB in one of two forms. The fast form needs no read: the update
// expression says what each mutation does, and the condition adds the assumptions that make it
// right (a map being edited is a map, an integer being added to is one and will not
// overflow). The pinned form is for when the row is known (read, or returned by a failed
// condition): the final values are computed with store.Update.Apply, and the condition pins
// what the decision read. Either way the row's state at the write decides, atomically.

// cellKind is what an update does to one attribute (or map entry), as far as is known without
// the row.
type cellKind uint8

const (
	untouched cellKind = iota // not changed yet
	known                     // overwritten: value, or absent if !present
	added                     // the row's integer (absent counts as 0) plus delta
	edited                    // a map with entries changed (attributes only)
)

type cell struct {
	kind    cellKind
	value   any
	present bool
	delta   int64
	entries []*entry // edited, in order of first change
	// req is the type ("N" or "M") the row's value must have, if present, for the update not
	// to fail (Apply's errors): set by the first Add or entry change, kept when a later
	// mutation overwrites the value.
	req string
}

type entry struct {
	key string
	cell
}

// plan is an update compiled per attribute, in order of first change.
type plan struct {
	attrs []string
	cells map[string]*cell
}

// planUpdate compiles upd (validated), starting from an empty row when absent. ok is false
// when the outcome depends on the row in a way no update expression can say: adding to a map,
// a map entry of an integer, or an update that fails for some rows (Apply's errors).
func planUpdate(upd store.Update, absent bool) (p *plan, ok bool) {
	p = &plan{cells: map[string]*cell{}}
	for _, m := range upd {
		top := m.Path[0]
		c := p.cells[top]
		if c == nil {
			c = &cell{}
			if absent {
				c.kind = known
			}
			p.cells[top] = c
			p.attrs = append(p.attrs, top)
		}
		if !c.mutate(m.Path[1:], m.Kind, m.Value) {
			return nil, false
		}
	}
	return p, true
}

// mutate applies one mutation at sub (nothing, or a map entry's key) of the cell.
func (c *cell) mutate(sub store.Path, kind store.MutationKind, v any) bool {
	switch {
	case c.kind == known:
		// A known value changes exactly as store.Update.Apply says.
		doc := store.Attrs{}
		if c.present {
			doc["v"] = c.value
		}
		next, err := store.Update{{Kind: kind, Path: append(store.Path{"v"}, sub...), Value: v}}.Apply(doc)
		if err != nil {
			return false
		}
		c.value, c.present = next["v"]
	case len(sub) == 1:
		if c.kind == untouched {
			c.kind, c.req = edited, "M"
		}
		if c.kind != edited {
			return false // an entry of an integer
		}
		for _, e := range c.entries {
			if e.key == sub[0] {
				return e.mutate(nil, kind, v)
			}
		}
		e := &entry{key: sub[0]}
		c.entries = append(c.entries, e)
		return e.mutate(nil, kind, v)
	case kind == store.Set:
		*c = cell{kind: known, present: true, value: v, req: c.req}
	case kind == store.Remove:
		*c = cell{kind: known, req: c.req}
	case c.kind == untouched:
		c.kind, c.delta, c.req = added, v.(int64), "N"
	case c.kind == added:
		c.delta += v.(int64) // wraps like Apply's sums; the overflow guard keeps them equal
	default:
		return false // an Add to an edited map
	}
	return true
}

// lowerBound is what the plan alone says the row will hold, for the size check before sending.
func (p *plan) lowerBound() store.Attrs {
	out := store.Attrs{}
	for _, a := range p.attrs {
		switch c := p.cells[a]; c.kind {
		case known:
			if c.present {
				out[a] = c.value
			}
		case added:
			out[a] = int64(0)
		case edited:
			m := map[string]any{}
			for _, e := range c.entries {
				if e.kind == known && e.present {
					m[e.key] = e.value
				}
			}
			out[a] = m
		}
	}
	return out
}

// render returns the plan's update expression and the assumptions it makes about the row.
func (p *plan) render(b *builder) (string, cexpr, error) {
	u := updateExpr{b: b}
	var assume []cexpr
	emit := func(path string, c *cell) error {
		switch {
		case c.kind == added:
			u.sets = append(u.sets, path+" = if_not_exists("+path+", "+b.number(0)+") + "+b.number(c.delta))
			assume = append(assume, b.addable(path, c.delta))
			return nil
		case c.kind == edited:
			assume = append(assume, expr(b.hasType(path, "M"))) // SET m.k needs the map
			return nil
		case c.req != "":
			assume = append(assume, expr("(attribute_not_exists("+path+") OR "+b.hasType(path, c.req)+")"))
		}
		return u.assign(path, c.value, c.present)
	}
	for _, a := range p.attrs {
		c := p.cells[a]
		if err := emit(b.path(store.Path{a}), c); err != nil {
			return "", cexpr{}, err
		}
		for _, e := range c.entries {
			if err := emit(b.path(store.Path{a, e.key}), &e.cell); err != nil {
				return "", cexpr{}, err
			}
		}
	}
	return u.String(), and(assume...), nil
}

// addable holds when adding d to the integer at path (absent counts as 0) is what Apply does:
// the value is absent or a number, and the sum stays within int64, where Apply would wrap.
func (b *builder) addable(path string, d int64) cexpr {
	isInt := b.hasType(path, "N")
	switch {
	case d > 0:
		isInt = "(" + isInt + " AND " + path + " <= " + b.number(math.MaxInt64-d) + ")"
	case d < 0:
		isInt = "(" + isInt + " AND " + path + " >= " + b.number(math.MinInt64-d) + ")"
	}
	return expr("(attribute_not_exists(" + path + ") OR " + isInt + ")")
}

// pinned returns the update expression that writes next's values of the attributes upd
// changes, and the condition that the row still holds what the decision read from cur: its
// existence, the paths cond reads, and the attributes upd reads.
func pinned(b *builder, upd store.Update, cond store.Cond, cur store.Attrs, next store.Attrs) (string, cexpr, error) {
	u := updateExpr{b: b}
	reads := condPaths(cond, nil)
	seen := map[string]bool{}
	for _, m := range upd {
		top := m.Path[0]
		if seen[top] {
			continue
		}
		seen[top] = true
		if len(m.Path) > 1 || m.Kind == store.Add {
			reads = append(reads, store.Path{top}) // the new value depends on the old one
		}
		v, ok := next[top]
		if err := u.assign(b.path(store.Path{top}), v, ok); err != nil {
			return "", cexpr{}, err
		}
	}
	pins, err := b.pin(cur, reads)
	return u.String(), pins, err
}

// pin is a condition that holds while the row is as cur says (nil: absent) at paths.
func (b *builder) pin(cur store.Attrs, paths []store.Path) (cexpr, error) {
	pins := []cexpr{b.exists(nil, cur != nil)}
	seen := map[string]bool{}
	for _, p := range paths {
		path := b.path(p)
		if seen[path] {
			continue
		}
		seen[path] = true
		v, ok := store.Lookup(cur, p)
		if !ok {
			pins = append(pins, expr("attribute_not_exists("+path+")"))
			continue
		}
		av, err := encodeValue(v)
		if err != nil {
			return cexpr{}, err
		}
		pins = append(pins, expr(path+" = "+b.value(av)))
	}
	return and(pins...), nil
}

// updateExpr accumulates the clauses of an update expression.
type updateExpr struct {
	b             *builder
	sets, removes []string
}

func (u *updateExpr) assign(path string, v any, present bool) error {
	if !present {
		u.removes = append(u.removes, path)
		return nil
	}
	av, err := encodeValue(v)
	if err != nil {
		return err
	}
	u.sets = append(u.sets, path+" = "+u.b.value(av))
	return nil
}

func (u *updateExpr) String() string {
	var parts []string
	if len(u.sets) > 0 {
		parts = append(parts, "SET "+strings.Join(u.sets, ", "))
	}
	if len(u.removes) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(u.removes, ", "))
	}
	if len(parts) == 0 {
		// Nothing changes, but an update creates a missing row: remove an attribute no row has.
		return "REMOVE " + u.b.name(noopAttr)
	}
	return strings.Join(parts, " ")
}
