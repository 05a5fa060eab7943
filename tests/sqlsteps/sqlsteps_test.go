package sqlsteps

import (
	"flag"
	"testing"

	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

// The default run crashes and pauses every sixth point on SQLite (the pure-Go SQLite is slow
// under the race detector) and every third on PostgreSQL; `make test-long` every point on both.
var everyPoint = flag.Bool("sqlsteps.every", false, "crash and pause at every injection point on every store")

// The suite on the relational rows of the store matrix.
func TestSQLSteps(t *testing.T) {
	sizes := map[string]Options{
		"sqlite":   {Stride: 6, Rounds: 3},
		"postgres": {Stride: 3, Rounds: 5},
	}
	if *everyPoint {
		for name, o := range sizes {
			o.Stride, o.Rounds = 1, 20
			sizes[name] = o
		}
	}
	ran := 0
	for _, b := range testtables.Backends {
		opts, relational := sizes[b.Name]
		if !relational {
			continue
		}
		ran++
		t.Run(b.Name, func(t *testing.T) {
			if b.Server != "" {
				t.Parallel()
			}
			Run(t, b.Tables(t), opts)
		})
	}
	if ran != len(sizes) {
		t.Fatalf("the store matrix has %d of the %d relational rows this suite sizes", ran, len(sizes))
	}
}
