package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Four sessions take the lock five times each, concurrently: never two holders at once, and
// each holder's token newer than the previous holder's.
func TestLockMutualExclusion(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		const contenders, rounds = 4, 5
		var inside atomic.Int32
		var mu sync.Mutex
		var tokens []int64
		var wg sync.WaitGroup
		errs := make(chan error, contenders*rounds)
		for i := range contenders {
			s := dial(t, addr, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					lk, err := Acquire(context.Background(), s, "/mutex/locks/shared", fmt.Sprintf("c%d", i))
					if err != nil {
						errs <- err
						return
					}
					if n := inside.Add(1); n != 1 {
						errs <- fmt.Errorf("c%d round %d: %d holders at once", i, r, n)
					}
					mu.Lock()
					if len(tokens) > 0 && tokens[len(tokens)-1] >= lk.Token() {
						errs <- fmt.Errorf("c%d round %d: token %d not newer than the previous holder's %d", i, r, lk.Token(), tokens[len(tokens)-1])
					}
					tokens = append(tokens, lk.Token())
					mu.Unlock()
					time.Sleep(2 * time.Millisecond) // the critical section
					inside.Add(-1)
					if err := lk.Unlock(); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(tokens) != contenders*rounds {
			t.Errorf("%d acquisitions, want %d", len(tokens), contenders*rounds)
		}
	})
}

// A lock is released when its holder's session ends: closed (the waiter gets it at once), or
// expired behind a partition (the waiter gets it after the timeout, and the old holder's Lost
// is closed: it knows to stop).
func TestLockReleasedOnSessionLoss(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		for _, how := range []string{"closed", "partitioned"} {
			dir := "/loss/locks/" + how
			var p *proxy
			if how == "partitioned" {
				p = newProxy(addr)
			}
			holder := dial(t, addr, p)
			held, err := Acquire(context.Background(), holder, dir, "holder")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *Lock, 1)
			go func() {
				lk, err := Acquire(context.Background(), dial(t, addr, nil), dir, "waiter")
				if err != nil {
					t.Error(err)
				}
				got <- lk
			}()
			select {
			case <-got:
				t.Fatalf("%s: the waiter got the lock while it was held", how)
			case <-time.After(100 * time.Millisecond):
			}
			if p != nil {
				p.Cut()
			} else {
				holder.Close()
			}
			select {
			case lk := <-got:
				if lk != nil && lk.Token() <= held.Token() {
					t.Errorf("%s: the waiter's token %d is not newer than %d", how, lk.Token(), held.Token())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the waiter never got the lock", how)
			}
			select {
			case <-held.Lost():
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the old holder's Lost never closed", how)
			}
			if p != nil {
				p.Heal()
			}
		}
	})
}

// The lock's fencing test. Worker A takes the maintenance lock, reads the report, and pauses
// before publishing its roll-up; partitioned meanwhile, its session expires. B takes the lock
// and publishes a roll-up of later slots. A resumes and publishes what it computed from its
// old read, with its old token: the SSF refuses it, and the report does not go back. (Without
// the token check, A's publish overwrites B's newer report: a lost update.)
func TestStaleLockHolderIsFenced(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		a := newApp(t)
		leader := a.worker("L", dial(t, addr, nil), "/maint")
		start(t, leader) // ticks the schedule, so the cursor moves
		eventually(t, "the schedule running", func() bool { c, _, _ := a.state(t, "report"); return c.Done > 0 })

		p := newProxy(addr)
		wa := a.worker("A", dial(t, addr, p), "/maint")
		pauseA := newPause()
		var read Report
		wa.beforePublish = func(_ *Lock, r Report) { read = r; pauseA.point() }
		pauseA.arm()
		staleErr := make(chan error, 1)
		go func() {
			_, err := wa.Maintain(context.Background())
			staleErr <- err
		}()
		t.Cleanup(pauseA.resume)
		pauseA.awaitPaused(t)

		p.Cut()
		wb := a.worker("B", dial(t, addr, nil), "/maint")
		published, err := wb.Maintain(context.Background()) // waits for A's session to expire
		if err != nil {
			t.Fatal(err)
		}
		if published.Through <= read.Through {
			t.Fatalf("B's report through %d is not later than A's read through %d: the test needs the schedule to move", published.Through, read.Through)
		}
		p.Heal()
		pauseA.resume()
		select {
		case err := <-staleErr:
			if !IsFenced(err) {
				t.Errorf("the stale holder's publish: %v, want it fenced", err)
			} else {
				t.Logf("the stale holder's publish: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stale holder never published")
		}
		if _, _, rep := a.state(t, "report"); rep.Through != published.Through || rep.Holder != "B" {
			t.Errorf("report %+v, want B's through %d: a stale holder's write went through", rep, published.Through)
		}
	})
}
