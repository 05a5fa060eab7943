// Package testclock is a clock that tests move by hand, so that the garbage collector's bound T
// can pass without waiting for it.
package testclock

import (
	"sync"
	"time"
)

// Manual is a clock that only moves when Advance is called. It satisfies ssf.Clock.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Manual { return &Manual{t: start} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
