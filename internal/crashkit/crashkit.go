// Package crashkit is what ssfkit's crash-injection suites share: an injector that kills
// executions at chosen points, a client that delivers requests the way a platform does, and
// a drain that lets the intent collectors finish what crashed.
package crashkit

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
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

// Injector crashes executions at chosen points: the k-th point passed, or at random with a
// budget. It starts disabled; Enable turns it on.
type Injector struct {
	mu      sync.Mutex
	enabled bool
	count   int
	crashAt int
	rng     *rand.Rand
	prob    float64
	budget  int
	crashes []ssf.FaultPoint
}

// At returns an injector that crashes at the k-th point it passes (0: never; it only counts).
func At(k int) *Injector { return &Injector{crashAt: k} }

// Random returns an injector that crashes each point with probability prob, at most budget
// times, drawing from seed.
func Random(seed int64, prob float64, budget int) *Injector {
	in := &Injector{}
	in.Rearm(seed, prob, budget)
	return in
}

// Rearm switches the injector to random crashes with a fresh budget.
func (in *Injector) Rearm(seed int64, prob float64, budget int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rng, in.prob, in.budget = rand.New(rand.NewSource(seed)), prob, budget
}

// Inject implements ssf.FaultInjector.
func (in *Injector) Inject(_ context.Context, p ssf.FaultPoint) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.enabled {
		return nil
	}
	in.count++
	crash := in.count == in.crashAt
	if in.rng != nil && in.budget > 0 && in.rng.Float64() < in.prob {
		crash = true
	}
	if !crash {
		return nil
	}
	in.budget--
	in.crashes = append(in.crashes, p)
	return ssf.ErrCrashed
}

// Enable turns injection on or off.
func (in *Injector) Enable(on bool) {
	in.mu.Lock()
	in.enabled = on
	in.mu.Unlock()
}

// Crashes returns the points crashed so far.
func (in *Injector) Crashes() []ssf.FaultPoint {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]ssf.FaultPoint(nil), in.crashes...)
}

// Points returns how many points were passed while enabled.
func (in *Injector) Points() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.count
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
