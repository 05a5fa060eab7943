package scheduler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// SSF is the name of the application's one SSF, jobs: it runs the scheduled jobs the leader
// asks for, and keeps the report the maintenance task publishes under the lock. Every request
// carries a fencing token, and every item a holder of a role writes carries the newest token
// admitted for that role: an older token is refused (ErrFenced) in the same conditional write
// that would have changed the item, so a stale leader or lock holder changes nothing.
const SSF = "jobs"

// Request is the jobs SSF's input. Op is one of:
//
//	tick     (the leader) run Job for every slot after the last one run, up to Slot; answers
//	         a Ticked
//	report   read Job's report and cursor; answers a Status (no token needed)
//	publish  (a holder of the maintenance lock) replace Job's report by Report; answers the
//	         stored Report
//
// Token is the fencing token of the caller's role: the czxid of its election or lock znode.
type Request struct {
	Op     string  `json:"op"`
	Job    string  `json:"job"`
	Slot   int64   `json:"slot,omitempty"`
	Token  int64   `json:"token,omitempty"`
	Holder string  `json:"holder,omitempty"` // who sends it, for the record
	Report *Report `json:"report,omitempty"`
}

// Cursor is a job's schedule state (item cursors/JOB): the last slot run, and the newest
// leader's token. Version counts its writes; each write is conditional on it.
type Cursor struct {
	Done    int64  `json:"done"`
	Token   int64  `json:"token"`
	Leader  string `json:"leader"`
	Version int64  `json:"version"`
}

// Run records one slot's run (item runs/JOB/SLOT), written once, by the instance that advanced
// the cursor over the slot.
type Run struct {
	Slot   int64  `json:"slot"`
	Token  int64  `json:"token"`
	Leader string `json:"leader"`
}

// Ticked is a tick's answer: the slots this tick ran (none when From > Through) and the
// cursor after it.
type Ticked struct {
	From    int64 `json:"from"`
	Through int64 `json:"through"`
	Done    int64 `json:"done"`
}

// Report is a job's roll-up (item reports/JOB), computed by the maintenance task outside the
// SSF from what it read, and published under the lock: Through is the last slot it counts.
type Report struct {
	Through int64  `json:"through"`
	Runs    int64  `json:"runs"`
	Token   int64  `json:"token"`
	Holder  string `json:"holder"`
	Version int64  `json:"version"`
}

// Status is a report's answer.
type Status struct {
	Cursor Cursor `json:"cursor"`
	Report Report `json:"report"`
}

// MaxCatchUp bounds the slots one tick runs: a leader that finds the cursor further behind
// (the schedule was stopped a long time) runs only the last MaxCatchUp slots.
const MaxCatchUp = 1000

// ErrFenced begins the application error of a request whose token is older than one the SSF
// has admitted for the same role: its sender is no longer leader (or lock holder), whatever
// it believes.
var ErrFenced = errors.New("fenced")

// IsFenced reports whether err is the jobs SSF's refusal of a stale token.
func IsFenced(err error) bool {
	var app *ssf.AppError
	return errors.Is(err, ErrFenced) || errors.As(err, &app) && strings.HasPrefix(app.Message, ErrFenced.Error()+":")
}

// fencingOff disables the token checks; only the test that shows they matter sets it.
var fencingOff bool

// stale says whether token is older than admitted, the newest token the item has seen.
func stale(token, admitted int64) bool { return !fencingOff && token < admitted }

// Handlers returns the application's SSF.
func Handlers() map[string]ssf.Handler { return map[string]ssf.Handler{SSF: ssf.Typed(jobs)} }

func jobs(env *ssf.Env, r Request) (any, error) {
	if r.Job == "" || strings.Contains(r.Job, "/") {
		return nil, fmt.Errorf("%w: job name %q: not empty, no '/'", ssf.ErrBadInput, r.Job)
	}
	switch r.Op {
	case "tick":
		return tick(env, r)
	case "report":
		var st Status
		if _, err := env.ReadInto("cursors", r.Job, &st.Cursor); err != nil {
			return nil, err
		}
		_, err := env.ReadInto("reports", r.Job, &st.Report)
		return st, err
	case "publish":
		return publish(env, r)
	}
	return nil, fmt.Errorf("%w: unknown op %q (tick, report, publish)", ssf.ErrBadInput, r.Op)
}

// tick advances the job's cursor to r.Slot and runs the slots it passed over, exactly once
// each:
//
//   - the cursor's compare-and-swap (conditional on its Version) is the one point where a slot
//     is claimed, so two ticks racing over the same slots (a new leader and a stale one, or two
//     executions of one instance) claim each slot once; ssfkit makes this instance's steps,
//     including the writes of the runs after the claim, happen exactly once, and an instance
//     cut short is finished by the intent collector;
//   - the fencing check is made on the value the swap is conditional on, so a token older than
//     the cursor's is refused at the moment of the write, not at some earlier check: once a
//     newer leader's tick is in the cursor, nothing of an older leader's is ever written.
func tick(env *ssf.Env, r Request) (Ticked, error) {
	for {
		var c Cursor
		found, err := env.ReadInto("cursors", r.Job, &c)
		if err != nil {
			return Ticked{}, err
		}
		if stale(r.Token, c.Token) {
			return Ticked{}, fmt.Errorf("%w: token %d of %s is older than %d of %s, the leader since", ErrFenced, r.Token, r.Holder, c.Token, c.Leader)
		}
		next := Cursor{Done: max(c.Done, r.Slot), Token: max(c.Token, r.Token), Leader: c.Leader, Version: c.Version + 1}
		if r.Token >= c.Token {
			next.Leader = r.Holder
		}
		from := c.Done + 1
		switch {
		case !found:
			from = r.Slot // the schedule's first tick
		case r.Slot-from >= MaxCatchUp:
			from = r.Slot - MaxCatchUp + 1
		}
		if next == (Cursor{Done: c.Done, Token: c.Token, Leader: c.Leader, Version: c.Version + 1}) {
			return Ticked{From: from, Through: from - 1, Done: c.Done}, nil // nothing new: no write
		}
		expect := store.Equal(store.Attr("version"), c.Version)
		if !found {
			expect = store.Equal(nil, nil)
		}
		ok, err := env.CondWrite("cursors", r.Job, next, expect)
		if err != nil {
			return Ticked{}, err
		}
		if !ok {
			continue // another tick moved it: look again
		}
		through := r.Slot
		if r.Slot <= c.Done {
			through = from - 1 // only the token advanced
		}
		for s := from; s <= through; s++ {
			// The job's work for slot s goes here; this example records the run. Conditional
			// on absence, so a second run of a slot would be an error, not an overwrite.
			ran, err := env.CondWrite("runs", RunKey(r.Job, s), Run{Slot: s, Token: r.Token, Leader: r.Holder}, store.Equal(nil, nil))
			if err != nil {
				return Ticked{}, err
			}
			if !ran {
				return Ticked{}, fmt.Errorf("job %s: slot %d ran twice", r.Job, s)
			}
		}
		return Ticked{From: from, Through: through, Done: next.Done}, nil
	}
}

// publish replaces the job's report with r.Report if r.Token is not older than the token of the
// report it replaces: the check and the write are one conditional write on the report's
// Version, so a holder that lost the lock (paused, partitioned, its session expired) and
// publishes what it computed from an old read is refused instead of overwriting a newer
// report with an older one.
func publish(env *ssf.Env, r Request) (Report, error) {
	if r.Report == nil {
		return Report{}, fmt.Errorf("%w: publish needs a report", ssf.ErrBadInput)
	}
	for {
		var cur Report
		found, err := env.ReadInto("reports", r.Job, &cur)
		if err != nil {
			return Report{}, err
		}
		if stale(r.Token, cur.Token) {
			return Report{}, fmt.Errorf("%w: token %d of %s is older than %d of %s, who published since", ErrFenced, r.Token, r.Holder, cur.Token, cur.Holder)
		}
		next := *r.Report
		next.Token, next.Holder, next.Version = r.Token, r.Holder, cur.Version+1
		expect := store.Equal(store.Attr("version"), cur.Version)
		if !found {
			expect = store.Equal(nil, nil)
		}
		ok, err := env.CondWrite("reports", r.Job, next, expect)
		if err != nil || ok {
			return next, err
		}
	}
}

// RunKey is the key of slot's run of job in the runs table: the slot zero-padded, so keys sort
// by slot.
func RunKey(job string, slot int64) string { return fmt.Sprintf("%s/%020d", job, slot) }
