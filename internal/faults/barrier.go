package faults

import (
	"context"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Barrier holds the injection points it matches until n of them have arrived, so that n
// executions (or collector passes' requests) are at that point at once: the interleaving a test
// needs. A point that waited longer than wait goes on, and GaveUp reports it: the interleaving
// did not happen, which the test should report.
type Barrier struct {
	match   func(ssf.FaultPoint) bool
	n       int
	wait    time.Duration
	mu      sync.Mutex
	arrived int
	open    chan struct{}
	gaveUp  bool
}

// NewBarrier returns a barrier for n of the points match accepts.
func NewBarrier(n int, wait time.Duration, match func(ssf.FaultPoint) bool) *Barrier {
	return &Barrier{match: match, n: n, wait: wait, open: make(chan struct{})}
}

func (b *Barrier) Inject(_ context.Context, p ssf.FaultPoint) error {
	if !b.match(p) {
		return nil
	}
	b.mu.Lock()
	if b.arrived++; b.arrived == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-time.After(b.wait):
		b.mu.Lock()
		b.gaveUp = true
		b.mu.Unlock()
	}
	return nil
}

// Arrived reports how many matching points arrived.
func (b *Barrier) Arrived() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived
}

// GaveUp reports whether a point went on without the others.
func (b *Barrier) GaveUp() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gaveUp
}
