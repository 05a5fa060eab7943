package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Invoker sends a request to an SSF under an instance id, as a platform does; a request sent
// again with the same id runs once (local.Host.Invoke is one).
type Invoker func(ctx context.Context, ssfName, instanceID string, input any) (ssf.Result, error)

// Worker is one long-running worker process: it holds a ZooKeeper session, campaigns in the
// election, and while leader ticks the schedule of Job through the jobs SSF, once per Period;
// every MaintainEvery it also takes the maintenance lock, if free, and rolls up Job's report.
//
// The SSF is short-lived and holds no session: everything that needs one (the election, the
// lock) is here. What the SSF needs from them is the fencing token, which travels in each
// request.
type Worker struct {
	ID      string
	Session *Session
	Invoke  Invoker
	// Job is the scheduled job's name ("report" if empty).
	Job string
	// Election and LockDir are the election's and the maintenance lock's directories
	// (DefaultElection and DefaultLockDir if empty).
	Election, LockDir string
	// Period is the length of a schedule slot (1 s if zero); slot n covers [n·Period,
	// (n+1)·Period) of Unix time.
	Period time.Duration
	// MaintainEvery is how often the worker tries the maintenance (zero: never).
	MaintainEvery time.Duration
	// Logf, if set, is told what the worker does.
	Logf func(format string, args ...any)

	// Test hooks: called before a leader's tick and before a lock holder's publish; the tests
	// pause a worker there, as a GC pause or a slow network would.
	beforeTick    func(l *Leadership)
	afterTick     func(l *Leadership, slot int64, err error)
	beforePublish func(l *Lock, r Report)
	onLead        func(l *Leadership)
}

func (w *Worker) job() string {
	if w.Job == "" {
		return "report"
	}
	return w.Job
}

// The directories a Worker uses unless told otherwise.
const (
	DefaultElection = "/scheduler/election"
	DefaultLockDir  = "/scheduler/locks/maintenance"
)

func (w *Worker) election() string {
	if w.Election == "" {
		return DefaultElection
	}
	return w.Election
}

func (w *Worker) lockDir() string {
	if w.LockDir == "" {
		return DefaultLockDir
	}
	return w.LockDir
}

func (w *Worker) period() time.Duration {
	if w.Period <= 0 {
		return time.Second
	}
	return w.Period
}

func (w *Worker) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf("%s: "+format, append([]any{w.ID}, args...)...)
	}
}

// Run campaigns and leads until ctx ends, and runs the maintenance beside it.
func (w *Worker) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.maintainLoop(ctx)
	}()
	defer func() { <-done }()
	for ctx.Err() == nil {
		l, err := Campaign(ctx, w.Session, w.election(), w.ID)
		if err != nil {
			if ctx.Err() == nil {
				w.logf("campaign: %v", err)
				sleep(ctx, w.period())
			}
			continue
		}
		w.logf("leader (token %d)", l.Token())
		if w.onLead != nil {
			w.onLead(l)
		}
		fenced := w.lead(ctx, l)
		// Resign when stopping (the next worker leads at once) or fenced (a newer leader
		// exists: the znode is gone already, or must go). After a lost connection, campaign
		// again without resigning: if the session survived, the znode is still first.
		if ctx.Err() != nil || fenced {
			if err := l.Resign(); err != nil {
				w.logf("resign: %v", err)
			}
		}
		w.logf("no longer leader (token %d)", l.Token())
	}
}

// lead ticks the schedule every period until the leadership ends or the jobs SSF says a newer
// leader exists (fenced).
func (w *Worker) lead(ctx context.Context, l *Leadership) (fenced bool) {
	t := time.NewTicker(w.period())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-l.Lost():
			return false
		case <-t.C:
			if w.beforeTick != nil {
				w.beforeTick(l)
			}
			// A leader may be paused anywhere, here too, between its last look at Lost and
			// its call: the call may be a stale leader's. The jobs SSF's fencing decides.
			slot := time.Now().UnixNano() / int64(w.period())
			ticked, err := w.Tick(ctx, l, slot)
			if w.afterTick != nil {
				w.afterTick(l, slot, err)
			}
			switch {
			case IsFenced(err):
				w.logf("fenced: %v", err)
				return true
			case err != nil:
				w.logf("tick %d: %v (the next tick catches up)", slot, err)
			case ticked.From <= ticked.Through:
				w.logf("ran %s slots %d..%d (the last began at %s)", w.job(), ticked.From, ticked.Through,
					time.Unix(0, ticked.Through*int64(w.period())).Format("15:04:05.000"))
			}
		}
	}
}

// Tick asks the jobs SSF to run the schedule up to slot, as leader l. The instance id is the
// job, the slot and the leader's token: sent again (a timeout, a retry) it runs once; two
// leaders' ticks of one slot are two instances, and the cursor's conditional write decides
// which one runs the slot (the other finds it done, or is fenced). A slot-only id would not
// do: the token is part of the input, and ssfkit refuses an id reused with another input.
func (w *Worker) Tick(ctx context.Context, l *Leadership, slot int64) (Ticked, error) {
	var out Ticked
	id := fmt.Sprintf("%s-tick-%d-%d", w.job(), slot, l.Token())
	err := w.call(ctx, id, Request{Op: "tick", Job: w.job(), Slot: slot, Token: l.Token(), Holder: w.ID}, &out)
	return out, err
}

func (w *Worker) maintainLoop(ctx context.Context) {
	if w.MaintainEvery <= 0 {
		return
	}
	t := time.NewTicker(w.MaintainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if r, err := w.Maintain(ctx); err != nil {
				w.logf("maintenance: %v", err)
			} else {
				w.logf("maintenance: report through slot %d, %d runs", r.Through, r.Runs)
			}
		}
	}
}

// Maintain takes the maintenance lock (waiting for it), reads the job's report and cursor,
// rolls the report up to the cursor, and publishes it with the lock's token. The roll-up is
// computed here, outside the SSF, between a read and a write: the classic shape that needs a
// lock, and that needs fencing because a lock alone cannot stop a holder who lost it unawares.
func (w *Worker) Maintain(ctx context.Context) (Report, error) {
	lk, err := Acquire(ctx, w.Session, w.lockDir(), w.ID)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = lk.Unlock() }()
	var st Status
	if err := w.call(ctx, w.job()+"-read-"+nonce(), Request{Op: "report", Job: w.job()}, &st); err != nil {
		return Report{}, err
	}
	r := st.Report
	if st.Cursor.Done > r.Through {
		if r.Through == 0 {
			r.Through = st.Cursor.Done - 1 // the first roll-up counts the last slot only
		}
		r.Runs += st.Cursor.Done - r.Through
		r.Through = st.Cursor.Done
	}
	select {
	case <-lk.Lost():
		return Report{}, fmt.Errorf("lost the lock before publishing: %w", ErrSessionLost)
	default:
	}
	// The holder may be paused here, after its last look at Lost: the publish may be a stale
	// holder's. The jobs SSF's fencing decides.
	if w.beforePublish != nil {
		w.beforePublish(lk, r)
	}
	var out Report
	id := fmt.Sprintf("%s-publish-%d-%d", w.job(), lk.Token(), r.Through)
	err = w.call(ctx, id, Request{Op: "publish", Job: w.job(), Token: lk.Token(), Holder: w.ID, Report: &r}, &out)
	return out, err
}

// call invokes the jobs SSF and decodes its output into out.
func (w *Worker) call(ctx context.Context, id string, req Request, out any) error {
	res, err := w.Invoke(ctx, SSF, id, req)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Op, id, err)
	}
	return json.Unmarshal(res.Output, out)
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
