package main

import (
	"context"
	"maps"
	"math/rand/v2"
	"sync"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// maxCrashesPerInstance caps the crashes one instance suffers. Its later executions run clean,
// so every instance finishes and the demo converges whatever the crash rate; re-executions
// still pass through every injection point, replaying their logged steps, before the cap ends.
const maxCrashesPerInstance = 3

// crashInjector is an ssf.FaultInjector that kills executions at random injection points with
// a fixed probability, drawn from a seeded generator, and counts what it did.
type crashInjector struct {
	mu      sync.Mutex
	rng     *rand.Rand
	rate    float64
	enabled bool
	// perInstance counts crashes by SSF and instance ("callback:ID" while recording a callback).
	perInstance map[string]int
	stats       crashStats
}

// crashStats counts injected crashes.
type crashStats struct {
	Total int
	// Points counts the injection points passed while enabled.
	Points int
	// AfterEffect counts crashes after an operation took effect: only its reply was lost.
	AfterEffect int
	BySSF, ByOp map[string]int
}

func newCrashInjector(seed uint64, rate float64) *crashInjector {
	return &crashInjector{
		// A stream apart from the workload's, so changing the rate keeps the same transfers.
		rng:         rand.New(rand.NewPCG(seed, 1)),
		rate:        rate,
		perInstance: map[string]int{},
		stats:       crashStats{BySSF: map[string]int{}, ByOp: map[string]int{}},
	}
}

// Inject implements ssf.FaultInjector.
func (c *crashInjector) Inject(_ context.Context, p ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The demo crashes SSF executions; the test suites crash collector passes too.
	if !c.enabled || p.Instance == ssf.CollectorIC || p.Instance == ssf.CollectorGC {
		return nil
	}
	c.stats.Points++
	if c.rng.Float64() >= c.rate {
		return nil
	}
	inst := p.SSF + "/" + p.Instance
	if c.perInstance[inst] >= maxCrashesPerInstance {
		return nil
	}
	c.perInstance[inst]++
	c.stats.Total++
	c.stats.BySSF[p.SSF]++
	c.stats.ByOp[p.Op]++
	if p.After {
		c.stats.AfterEffect++
	}
	return ssf.ErrCrashed
}

func (c *crashInjector) setEnabled(on bool) {
	c.mu.Lock()
	c.enabled = on
	c.mu.Unlock()
}

// snapshot returns a copy of the counts so far.
func (c *crashInjector) snapshot() crashStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.BySSF, s.ByOp = maps.Clone(s.BySSF), maps.Clone(s.ByOp)
	return s
}
