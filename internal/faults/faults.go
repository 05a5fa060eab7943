// Package faults kills SSF executions at chosen injection points: it is the ssf.FaultInjector
// the crash suites use (at the k-th point, or at random with a budget) and the demo uses (at
// random, a few times per instance at most, sparing collector passes). Its Barrier holds
// executions at a point instead, until enough of them are there (tests' interleavings).
//
// It imports only orchestrator/ssf: it is production code, since `ssfkit demo` crashes the
// executions it shows.
package faults

import (
	"context"
	randv1 "math/rand"
	"math/rand/v2"
	"sync"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Injector crashes executions at chosen points. It starts disabled; Enable turns it on.
type Injector struct {
	mu      sync.Mutex
	enabled bool
	crashAt int // crash at this point passed (0: never)
	// draw, if set, crashes each point with probability prob while budget lasts (<0: no limit).
	draw   func() float64
	prob   float64
	budget int
	// perInstance caps the crashes of one instance (0: no cap), so its later executions run
	// clean and every instance finishes whatever the rate.
	perInstance    int
	spareCollector bool
	crashed        map[string]int // by SSF/instance
	points         int
	crashes        []ssf.FaultPoint
}

// At returns an injector that crashes at the k-th point it passes (0: never; it only counts).
func At(k int) *Injector { return &Injector{crashAt: k} }

// Random returns an injector that crashes each point with probability prob, at most budget
// times, drawing from seed. The crash suites print their seed, so a failure reproduces.
func Random(seed int64, prob float64, budget int) *Injector {
	in := &Injector{}
	in.Rearm(seed, prob, budget)
	return in
}

// Rearm switches the injector to random crashes with a fresh budget.
func (in *Injector) Rearm(seed int64, prob float64, budget int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.draw, in.prob, in.budget = randv1.New(randv1.NewSource(seed)).Float64, prob, budget
}

// Capped returns the demo's injector: each point of an SSF execution crashes with probability
// prob, drawn from seed, at most perInstance times per instance. Collector passes never crash.
func Capped(seed uint64, prob float64, perInstance int) *Injector {
	return &Injector{
		// A stream apart from the workload's, so changing the rate keeps the same requests.
		draw: rand.New(rand.NewPCG(seed, 1)).Float64, prob: prob, budget: -1,
		perInstance: perInstance, spareCollector: true, crashed: map[string]int{},
	}
}

// Inject implements ssf.FaultInjector.
func (in *Injector) Inject(_ context.Context, p ssf.FaultPoint) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.enabled || in.spareCollector && (p.Instance == ssf.CollectorIC || p.Instance == ssf.CollectorGC) {
		return nil
	}
	in.points++
	crash := in.points == in.crashAt
	if in.draw != nil && in.budget != 0 && in.draw() < in.prob {
		crash = true
		if in.budget > 0 {
			in.budget--
		}
	}
	if !crash {
		return nil
	}
	if in.perInstance > 0 {
		inst := p.SSF + "/" + p.Instance
		if in.crashed[inst] >= in.perInstance {
			return nil
		}
		in.crashed[inst]++
	}
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

// Points returns how many points that could crash were passed while enabled.
func (in *Injector) Points() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.points
}

// Stats counts the crashes so far.
type Stats struct {
	Total, Points int
	// AfterEffect counts crashes after an operation took effect: only its reply was lost.
	AfterEffect int
	BySSF, ByOp map[string]int
}

// Stats returns the counts so far.
func (in *Injector) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := Stats{Total: len(in.crashes), Points: in.points, BySSF: map[string]int{}, ByOp: map[string]int{}}
	for _, p := range in.crashes {
		s.BySSF[p.SSF]++
		s.ByOp[p.Op]++
		if p.After {
			s.AfterEffect++
		}
	}
	return s
}
