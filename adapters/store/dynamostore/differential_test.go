package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

// TestDifferential runs random conditional updates, deletes and projected scans on DynamoDB
// and on memstore, which evaluates with store.Cond.Eval and store.Update.Apply, and requires
// the same results. The operations mix the awkward cases: comparisons across types and with
// missing paths, literals DynamoDB cannot compare exactly (which the driver evaluates on a read
// row), map entries of maps that do not exist or are not maps, additions that overflow,
// several mutations of one attribute, and attribute names that collide with the key's.
func TestDifferential(t *testing.T) {
	const ops = 300
	seed := crashkit.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	dyn := testtables.Dynamo(t, "diff").Driver()
	mem := memstore.New(memstore.DefaultMaxRowBytes)
	g := gen{rng}
	for i := range ops {
		key := store.Key{Partition: "p", Sort: fmt.Sprint("row", rng.Intn(3))}
		what := fmt.Sprintf("op %d (seed %d, rerun with SSFKIT_SEED=%d)", i, seed, seed)
		switch n := rng.Intn(10); {
		case n < 7:
			cond, upd := g.cond(2), g.update()
			want, wantErr := mem.Update(ctx, key, cond, upd)
			got, err := dyn.Update(ctx, key, cond, upd)
			if !sameErr(err, wantErr) || got.Applied != want.Applied || !equalAttrs(got.Attrs, want.Attrs) {
				t.Fatalf("%s: Update%s if %s: %v\n got %+v, %v\nwant %+v, %v", what, key, cond, upd, got, err, want, wantErr)
			}
		case n < 9:
			cond := g.cond(2)
			want, _ := mem.Delete(ctx, key, cond)
			got, err := dyn.Delete(ctx, key, cond)
			if err != nil || got != want {
				t.Fatalf("%s: Delete%s if %s = %v, %v; want %v", what, key, cond, got, err, want)
			}
		default:
			all, _ := mem.Scan(ctx, "p", store.ScanOptions{})
			var proj []store.Path
			for range rng.Intn(4) {
				if p := g.path(); len(p) != 2 || !entryless(all, p[0]) {
					proj = append(proj, p)
				}
			}
			want, _ := mem.Scan(ctx, "p", store.ScanOptions{Projection: proj})
			got, err := dyn.Scan(ctx, "p", store.ScanOptions{Projection: proj})
			if err != nil || len(got) != len(want) {
				t.Fatalf("%s: Scan projecting %v = %v, %v; want %v", what, proj, got, err, want)
			}
			for j := range got {
				if got[j].Key != want[j].Key || !equalAttrs(got[j].Attrs, want[j].Attrs) {
					t.Fatalf("%s: Scan projecting %v: row %d = %+v, want %+v", what, proj, j, got[j], want[j])
				}
			}
		}
	}
}

// entryless reports whether some row holds a number, binary or boolean in attr: moto fails
// (HTTP 500) projecting a map entry of one of those.
func entryless(rows []store.Row, attr string) bool {
	for _, r := range rows {
		switch r.Attrs[attr].(type) {
		case int64, []byte, bool:
			return true
		}
	}
	return false
}

type gen struct{ rng *rand.Rand }

func (g gen) pick(n int) int { return g.rng.Intn(n) }

var (
	attrNames = []string{"a", "s", "m", "pk", "~x"}
	entryKeys = []string{"k", "j"}
	scalars   = []any{int64(0), int64(1), int64(-7), int64(math.MaxInt64), int64(math.MinInt64), "", "x", "abc", []byte{}, []byte{1, 2}, true, false}
	// Comparison literals beyond row values: floats (exact, huge, not a number), other number
	// types, invalid UTF-8, null, a map.
	literals = append([]any{0.5, 1.0, -2.5, 1e300, math.NaN(), int(1), int32(-7), "\xff", nil, map[string]any{"k": int64(1)}}, scalars...)
)

func (g gen) path() store.Path {
	switch n := g.pick(12); {
	case n == 0:
		return store.Path{}
	case n == 1:
		return store.Path{"m", "k", "z"}
	case n < 6:
		return store.Path{attrNames[g.pick(len(attrNames))], entryKeys[g.pick(len(entryKeys))]}
	}
	return store.Attr(attrNames[g.pick(len(attrNames))])
}

func (g gen) value(top bool) any {
	if top && g.pick(4) == 0 {
		m := map[string]any{}
		for range g.pick(3) {
			m[entryKeys[g.pick(len(entryKeys))]] = scalars[g.pick(len(scalars))]
		}
		return m
	}
	return scalars[g.pick(len(scalars))]
}

var cmpOps = []store.CmpOp{store.Eq, store.Ne, store.Lt, store.Le, store.Gt, store.Ge}

func (g gen) cond(depth int) store.Cond {
	n := g.pick(12)
	if depth > 0 && n < 4 {
		args := make([]store.Cond, g.pick(3))
		for i := range args {
			args[i] = g.cond(depth - 1)
		}
		switch n {
		case 0:
			return store.And(args...)
		case 1:
			return store.Or(args...)
		case 2:
			return store.Not(g.cond(depth - 1))
		}
		return store.Cond{Op: store.OpNot, Args: args} // malformed unless one argument
	}
	switch n % 6 {
	case 0:
		return []store.Cond{store.Always(), store.Never(), store.RowExists(), store.RowAbsent()}[g.pick(4)]
	case 1:
		return store.Exists(g.path())
	case 2:
		return store.NotExists(g.path())
	}
	return store.Compare(g.path(), cmpOps[g.pick(len(cmpOps))], literals[g.pick(len(literals))])
}

func (g gen) update() store.Update {
	var u store.Update
	for range g.pick(4) {
		top := attrNames[g.pick(len(attrNames))]
		p := store.Attr(top)
		if g.pick(2) == 0 {
			p = p.Entry(entryKeys[g.pick(len(entryKeys))])
		}
		switch g.pick(3) {
		case 0:
			u = append(u, store.SetAttr(p, g.value(len(p) == 1)))
		case 1:
			u = append(u, store.RemoveAttr(p))
		default:
			u = append(u, store.AddInt(p, []int64{1, -2, math.MaxInt64, math.MinInt64}[g.pick(4)]))
		}
	}
	return u
}

func sameErr(a, b error) bool {
	for _, s := range []error{store.ErrInvalid, store.ErrTooLarge} {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

// equalAttrs compares by value and exact type; a nil []byte equals an empty one.
func equalAttrs(a, b map[string]any) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			return false
		}
		switch x := av.(type) {
		case []byte:
			y, ok := bv.([]byte)
			if !ok || !bytes.Equal(x, y) {
				return false
			}
		case map[string]any:
			y, ok := bv.(map[string]any)
			if !ok || !equalAttrs(x, y) {
				return false
			}
		default:
			if av != bv {
				return false
			}
		}
	}
	return true
}
