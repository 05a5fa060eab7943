// Package crashkit is what ssfkit's crash-injection suites share besides the injector
// (internal/faults): the seed, a client that delivers requests the way a platform does, and a
// drain that lets the intent collectors finish what crashed, and a check of provenance exports.
package crashkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Seed returns the base seed: SSFKIT_SEED if set, else a fixed one, so failures reproduce.
func Seed(t suite.T) int64 {
	if s := os.Getenv("SSFKIT_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("SSFKIT_SEED=%q is not an integer", s)
		}
		return n
	}
	return 20201104 // Beldi's OSDI date
}

// Submit delivers a top-level request the way a platform does: retried until it is accepted,
// that is, until its intent is registered. A crash after that is the intent collector's to
// finish.
func Submit(t suite.T, h *local.Host, rt *ssf.Runtime, id string, input any) {
	ctx := context.Background()
	for attempt := 0; attempt < 100; attempt++ {
		if _, err := h.Invoke(ctx, rt.Name(), id, input); err == nil {
			return
		}
		st, err := rt.Intent(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Exists {
			return
		}
	}
	t.Fatalf("request %s never accepted", id)
}

// Drain runs the intent collectors, moving clock past their relaunch delay each round, until
// no instance of rts is unfinished. Collector passes may crash; the next pass finishes them.
func Drain(t suite.T, h *local.Host, clock *testclock.Manual, rts map[string]*ssf.Runtime) {
	ctx := context.Background()
	for round := 0; ; round++ {
		h.Wait()
		pending := 0
		for _, rt := range rts {
			n, err := rt.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pending += n
		}
		if pending == 0 {
			return
		}
		if round == 1000 {
			t.Fatalf("%d instances still unfinished after %d intent-collector rounds", pending, round)
		}
		clock.Advance(time.Millisecond)
		for _, rt := range rts {
			if _, err := rt.CollectIntents(ctx); err != nil && !errors.Is(err, ssf.ErrCrashed) {
				t.Fatal(err)
			}
		}
	}
}

// NewBatches wraps sink.
func NewBatches(sink provenance.Sink) *Batches {
	return &Batches{Sink: sink, byName: map[string][]string{}}
}

// Batches passes provenance exports on to a sink and checks what a sink without keys (objects named
// after their batch) relies on: a batch exported again carries the same instances, and no
// instance is in two batches.
type Batches struct {
	provenance.Sink
	mu     sync.Mutex
	byName map[string][]string
	err    error
}

func (b *Batches) Export(ctx context.Context, batch string, recs []provenance.Record) error {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Invocation.SSF + "/" + r.Invocation.ID + "#" + r.Invocation.Incarnation
	}
	b.mu.Lock()
	if prev, ok := b.byName[batch]; ok && !slices.Equal(prev, keys) && b.err == nil {
		b.err = fmt.Errorf("batch %s exported again with other records: %v, then %v", batch, prev, keys)
	}
	b.byName[batch] = keys
	b.mu.Unlock()
	return b.Sink.Export(ctx, batch, recs)
}

// Check reports the first violation seen.
func (b *Batches) Check() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	in := map[string]string{}
	for name, keys := range b.byName {
		for _, k := range keys {
			if other, dup := in[k]; dup {
				return fmt.Errorf("instance %s exported in two batches, %s and %s: an object store would keep it twice", k, other, name)
			}
			in[k] = name
		}
	}
	return nil
}
