package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

const period = 20 * time.Millisecond

// start runs w until the test ends.
func start(t *testing.T, w *Worker) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func (a *app) worker(id string, s *Session, dir string) *Worker {
	return &Worker{ID: id, Session: s, Invoke: a.host.Invoke, Period: period, Election: dir + "/election", LockDir: dir + "/locks/maintenance"}
}

// terms records the leaderships the workers enter, and checks each entry against the ones
// before: the previous leaders' terms have all ended (their Lost is closed), and the token is
// newer than every earlier one.
type terms struct {
	mu      sync.Mutex
	all     []*Leadership
	leaders []string
	errs    []string
}

func (r *terms) onLead(id string) func(l *Leadership) {
	return func(l *Leadership) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, prev := range r.all {
			// Ended: its Lost is closed, or about to be (its session's is).
			if !isClosed(prev.Lost()) && !isClosed(prev.session) {
				r.errs = append(r.errs, fmt.Sprintf("%s became leader (token %d) while %s's term (token %d) had not ended", id, l.Token(), r.leaders[i], prev.Token()))
			}
			if prev.Token() >= l.Token() && prev.Node() != l.Node() {
				r.errs = append(r.errs, fmt.Sprintf("%s's token %d is not newer than %s's earlier %d", id, l.Token(), r.leaders[i], prev.Token()))
			}
		}
		r.all = append(r.all, l)
		r.leaders = append(r.leaders, id)
	}
}

func (r *terms) get(i int) (string, *Leadership) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.all) {
		return "", nil
	}
	return r.leaders[i], r.all[i]
}

func (r *terms) check(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
}

// Four workers; the leader is killed (its session closed, as a crashed process's would be
// after its timeout, or a stopping one's at once) three times, each time after it ran a slot;
// the second time in the middle of a tick: its session is closed just before its call to the
// SSF, which it still makes, deposed (it runs the slot, if the next leader has not, or is
// fenced). One leader at a time, in
// token order, and the schedule ran every slot exactly once across the failovers.
func TestFailoverRunsEachSlotOnce(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		a := newApp(t)
		rec := &terms{}
		sessions := map[string]*Session{}
		var midSlot sync.Map // worker id -> true: close the session in the next tick
		for i := range 4 {
			id := fmt.Sprintf("w%d", i)
			s := dial(t, addr, nil)
			sessions[id] = s
			w := a.worker(id, s, "/failover")
			w.onLead = rec.onLead(id)
			w.beforeTick = func(*Leadership) {
				if _, ok := midSlot.LoadAndDelete(id); ok {
					s.Close() // the tick goes on: a deposed leader's call
				}
			}
			start(t, w)
		}
		ranUnder := func(l *Leadership) func() bool {
			return func() bool { c, _, _ := a.state(t, "report"); return l != nil && c.Token == l.Token() }
		}
		for kill := range 3 {
			eventually(t, fmt.Sprintf("leader %d ticking", kill+1), func() bool {
				_, l := rec.get(kill)
				return ranUnder(l)()
			})
			id, l := rec.get(kill)
			if kill == 1 {
				midSlot.Store(id, true)
				eventually(t, "the mid-slot kill", func() bool { return isClosed(l.session) })
			} else {
				sessions[id].Close()
			}
		}
		eventually(t, "the last leader ticking", func() bool { _, l := rec.get(3); return ranUnder(l)() })
		c, _, _ := a.state(t, "report")
		eventually(t, "more slots", func() bool { c2, _, _ := a.state(t, "report"); return c2.Done >= c.Done+3 })
		for _, s := range sessions {
			s.Close()
		}
		rec.check(t)
		c, runs := a.settledState(t, "report")
		tokens := checkRuns(t, c, runs)
		if len(tokens) < 2 {
			t.Errorf("runs under %d leaders' tokens, want several", len(tokens))
		}
	})
}

// A leader whose connection drops and comes back within its session stops leading (it cannot
// know the session survived until it reconnects), then finds its znode still first: it leads
// again with the same token, and no one else led in between.
func TestLeaderKeepsItsTokenAcrossAReconnect(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		a := newApp(t)
		rec := &terms{}
		p := newProxy(addr)
		// go-zookeeper waits a second before it tries its only server again: a session of
		// three seconds survives that.
		wa := a.worker("A", dialTimeout(t, addr, p, 3*time.Second), "/reconnect")
		wa.onLead = rec.onLead("A")
		start(t, wa)
		eventually(t, "A leading", func() bool { _, l := rec.get(0); return l != nil })
		wb := a.worker("B", dial(t, addr, nil), "/reconnect")
		wb.onLead = rec.onLead("B")
		start(t, wb)
		p.Reset()
		eventually(t, "A's second term", func() bool { _, l := rec.get(1); return l != nil })
		id0, l0 := rec.get(0)
		id1, l1 := rec.get(1)
		if id0 != "A" || id1 != "A" || l0.Token() != l1.Token() || l0.Node() != l1.Node() {
			t.Errorf("terms %s %d %s, then %s %d %s: want A twice on one znode", id0, l0.Token(), l0.Node(), id1, l1.Token(), l1.Node())
		}
		if !isClosed(l0.Lost()) {
			t.Error("A's first term never ended")
		}
		time.Sleep(5 * period)
		if id, _ := rec.get(2); id != "" {
			t.Errorf("%s led after A's second term began", id)
		}
		rec.check(t)
	})
}

// The fencing test. Leader A pauses between its last look at its leadership and its call to
// the jobs SSF (a GC pause, a stalled VM), and is partitioned from ZooKeeper meanwhile: its
// session expires, B becomes leader and runs slots. Then A resumes, a slot later than B's last,
// and makes its call with its old token: the SSF refuses it, and no slot ever runs under A's
// token after one ran under B's. (Without the token check, A's call runs that slot: the
// interleaving this test catches.)
func TestStaleLeaderIsFenced(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		a := newApp(t)
		rec := &terms{}
		p := newProxy(addr)

		pauseA := newPause()
		staleErr := make(chan error, 1)
		wa := a.worker("A", dial(t, addr, p), "/stale")
		wa.onLead = rec.onLead("A")
		wa.beforeTick = func(*Leadership) { pauseA.point() }
		wa.afterTick = func(_ *Leadership, _ int64, err error) {
			if pauseA.wasPaused() {
				select {
				case staleErr <- err:
				default:
				}
			}
		}
		start(t, wa)
		t.Cleanup(pauseA.resume) // runs before the worker is stopped
		eventually(t, "A leading and ticking", func() bool {
			_, l := rec.get(0)
			c, _, _ := a.state(t, "report")
			return l != nil && c.Token == l.Token()
		})
		pauseA.arm()
		pauseA.awaitPaused(t)

		pauseB := newPause()
		wb := a.worker("B", dial(t, addr, nil), "/stale")
		wb.onLead = rec.onLead("B")
		wb.beforeTick = func(*Leadership) { pauseB.point() }
		start(t, wb)
		t.Cleanup(pauseB.resume)

		p.Cut() // A's session expires on the server; B's watch on A's znode fires
		eventually(t, "B leading and ticking", func() bool {
			_, l := rec.get(1)
			c, _, _ := a.state(t, "report")
			return l != nil && c.Token == l.Token()
		})
		pauseB.arm()
		pauseB.awaitPaused(t)
		before, _, _ := a.state(t, "report")
		time.Sleep(3 * period) // A's slot, taken when it resumes, is after B's last
		p.Heal()
		pauseA.resume()
		select {
		case err := <-staleErr:
			if !IsFenced(err) {
				t.Errorf("the stale leader's tick: %v, want it fenced", err)
			} else {
				t.Logf("the stale leader's tick: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stale leader never made its call")
		}
		pauseB.resume()
		eventually(t, "B ticking again", func() bool { c, _, _ := a.state(t, "report"); return c.Done >= before.Done+3 })
		_, lb := rec.get(1)
		c, runs := a.settledState(t, "report")
		if c.Token != lb.Token() || c.Leader != "B" {
			t.Errorf("cursor %+v, want B's token %d", c, lb.Token())
		}
		checkRuns(t, c, runs)
		rec.check(t)
	})
}

// pause is a point in a worker's loop where the test can hold it.
type pause struct {
	mu      sync.Mutex
	armed   bool
	paused  chan struct{}
	resumed chan struct{}
	was     bool
}

func newPause() *pause { return &pause{paused: make(chan struct{}), resumed: make(chan struct{})} }

func (p *pause) arm() { p.mu.Lock(); p.armed = true; p.mu.Unlock() }

// point holds the caller, once, if armed.
func (p *pause) point() {
	p.mu.Lock()
	hold := p.armed
	p.armed = false
	p.mu.Unlock()
	if hold {
		close(p.paused)
		<-p.resumed
		p.mu.Lock()
		p.was = true
		p.mu.Unlock()
	}
}

// wasPaused reports (once) whether the caller came through the pause.
func (p *pause) wasPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.was
	p.was = false
	return was
}

func (p *pause) awaitPaused(t *testing.T) {
	t.Helper()
	select {
	case <-p.paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never reached its pause")
	}
}

func (p *pause) resume() {
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}
