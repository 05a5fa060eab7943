// Package schedules is a schedule explorer for the exactly-once runtime: a model checker in
// spirit. Several executions of one SSF instance (duplicate deliveries, redelivered starts,
// overlapping retries) run one store request at a time, and the explorer enumerates the order
// in which their requests reach the store, systematically, with preemption bounding (every
// schedule with at most P switches away from an execution that could have continued, the way
// CHESS bounds its search). Between any two requests it may also fire events: a write by
// another client, a pause of every execution past the garbage collector's bound T followed by
// collector passes, a transaction's commit by its coordinator. After each schedule the intent
// collector finishes whatever is left, the garbage collector runs past T, and the scenario's
// check holds the outcome to that of one execution: the result every execution reported, every
// effect and every log entry.
//
// What it covers: every interleaving of the executions' store requests and transport calls
// within the preemption bound, on the in-memory store, with the events at every boundary.
// What it cannot: interleavings with more preemptions than the bound (the long run raises it),
// schedules inside a single store request (the store's atomicity is assumed; the stores'
// conformance suite checks it), and stores whose scans are not snapshots (lincheck's paged
// scans cover those).
package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Bounds of the runtime under exploration. A pause event moves the clock past all of them.
const (
	Lifetime      = time.Minute
	GCBound       = 2 * time.Minute
	RelaunchDelay = time.Second
)

// App is the SSF whose instance the executions run; InstanceID is that instance.
const (
	App        = "app"
	InstanceID = "x"
)

// Scenario is one handler set and the executions and events to interleave.
type Scenario struct {
	Name string
	// SSFs are the handlers, by SSF name; App must be one of them. A request whose input is
	// {"set": {"TABLE/KEY": VALUE, ...}} writes those values instead of running the handler:
	// how Setup and events change data as another client would.
	SSFs map[string]ssf.Handler
	// RowCapacity of every SSF's DAALs (small values make the lists grow rows).
	RowCapacity int
	// Setup writes the initial state (through Set).
	Setup func(w *World) error
	// Executions are the requests to App, one per execution of the instance (the same
	// instance id: duplicates, redeliveries, retries).
	Executions []ssf.Request
	// Events may each fire once, at any boundary where Ready says they can.
	Events []Event
	// Crashes is how many executions a schedule may crash (at a boundary: before a request,
	// or after it, when it took effect and only its reply is lost).
	Crashes int
	// Hold, if set, is every SSF's Config.Hold (instances whose holder retries them).
	Hold func(ctx context.Context, holder string) (bool, error)
	// Tables gives each SSF a fresh, empty table; nil: the in-memory store.
	Tables func(ssfName string) *store.Table
	// Check holds the outcome to one execution's; it runs after the instance was finished and
	// collected.
	Check func(w *World, o Outcome) error
}

// Event is something that happens between two store requests.
type Event struct {
	Name  string
	Ready func(w *World) bool // nil: always
	Fire  func(w *World) error
}

// World is one run of a scenario: fresh stores, a manual clock, a sequential host.
type World struct {
	Host    *local.Host
	Clock   *testclock.Manual
	RT      map[string]*ssf.Runtime
	Returns []Return // what each execution returned, in Executions order
	fired   map[string]bool
	setN    int
}

// Return is what one execution returned to its client.
type Return struct {
	Finished bool // the execution returned (as opposed to never being scheduled to the end)
	Result   ssf.Result
	Err      error
}

// Outcome is the instance's outcome after the schedule and the collectors.
type Outcome struct {
	// Result is the instance's result: from its intent while it is kept, else the result the
	// executions reported.
	Result ssf.Result
	Known  bool
	// Items are every SSF's items after the garbage collector ran past T, keyed "SSF:TABLE/KEY".
	Items map[string]string
	// Locks still held, keyed "SSF:TABLE/KEY"; a finished instance must leave none.
	Locks map[string]string
}

// Fired reports whether the event named name has fired.
func (w *World) Fired(name string) bool { return w.fired[name] }

// Set writes values ("TABLE/KEY" -> JSON value) in SSF ssfName as a separate client would.
func (w *World) Set(ssfName string, values map[string]any) error {
	w.setN++
	in, err := json.Marshal(map[string]any{"set": values})
	if err != nil {
		return err
	}
	_, err = w.RT[ssfName].Handle(context.Background(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: fmt.Sprintf("set-%d", w.setN), Input: in})
	return err
}

// Pause moves the clock past every execution's lifetime and the GC's bound T, with collector
// passes in between, as if every running execution was paused (SIGSTOP, a VM migration, a GC
// pause) while the rest of the system went on: the intent collector relaunches what is
// unfinished (the relaunches run after the schedule) and removes index entries whose intent
// was never created, the garbage collector stamps finished instances, and T later collects them.
func (w *World) Pause() error {
	for range 2 {
		w.Clock.Advance(GCBound + Lifetime + time.Second)
		for _, name := range w.names() {
			if _, err := w.RT[name].CollectIntents(context.Background()); err != nil {
				return err
			}
			if _, err := w.RT[name].CollectGarbage(context.Background()); err != nil {
				return err
			}
		}
	}
	return nil
}

// ExpireKeys moves the clock past SSF name's key retention and runs its garbage collector: the
// answers of its instances collected so far are dropped, and a request for their ids gets
// ErrKeyExpired.
func (w *World) ExpireKeys(name string) error {
	w.Clock.Advance(w.RT[name].Config().KeyRetention + time.Second)
	_, err := w.RT[name].CollectGarbage(context.Background())
	return err
}

func (w *World) names() []string {
	names := make([]string, 0, len(w.RT))
	for n := range w.RT {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type threadKey struct{}

// scheduler runs one execution at a time: an execution blocks before each of its store
// requests and transport calls until the scheduler resumes it.
type scheduler struct {
	arrive  chan int // an execution reached a boundary (its index) or finished (-1-index)
	resume  []chan error
	started []bool
	done    []bool
	at      []ssf.FaultPoint // the boundary each execution waits at
}

// Inject blocks the execution at every boundary: before each store request and transport call,
// and after it (a pause between receiving a reply and acting on it). A crash resumes it with
// ErrCrashed.
func (s *scheduler) Inject(ctx context.Context, p ssf.FaultPoint) error {
	i, ok := ctx.Value(threadKey{}).(int)
	if !ok || p.Instance == ssf.CollectorGC || p.Instance == ssf.CollectorIC {
		return nil // events, collectors and the drain run unscheduled
	}
	s.at[i] = p // read by the scheduler after the send below
	s.arrive <- i
	return <-s.resume[i]
}

// OneAtATime makes the runtime send a transaction's ends one after another: an execution here
// is one thread, which Inject blocks at each boundary.
func (s *scheduler) OneAtATime() bool { return true }

// decision is one choice point of a schedule.
type decision struct {
	options    int
	taken      int
	preemptive bool // at this point, the current execution could have continued
}

// maxSteps bounds one schedule; a run that needs more is reported (an execution spinning).
const maxSteps = 2000

func quiet() *slog.Logger {
	if os.Getenv("SCHEDULES_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// option is what a decision can choose: run an execution to its next boundary, crash it there,
// or fire an event.
type option struct {
	exec  int // -1 for an event
	crash bool
	event Event
}

// view is what a chooser sees at a decision.
type view struct {
	index     int // the decision's number
	d         decision
	opts      []option
	preempted int              // preemptions taken so far
	at        []ssf.FaultPoint // the boundary each execution waits at
	done      []bool
}

// chooser picks the option taken at a decision.
type chooser func(v view) int

// prefix takes choices[i] at the i-th decision and 0 (continue the current execution when it
// can) beyond.
func prefix(choices []int) chooser {
	return func(v view) int {
		if v.index < len(choices) {
			return choices[v.index]
		}
		return 0
	}
}

// randomWithin switches to a random option at a decision with probability p, as long as the
// preemption bound allows: a seeded sample of the schedules within the bound.
func randomWithin(rng *rand.Rand, bound int, p float64) chooser {
	return func(v view) int {
		if v.d.options == 1 || rng.Float64() >= p || (v.d.preemptive && v.preempted >= bound) {
			return 0
		}
		return rng.IntN(v.d.options)
	}
}

// Step is one step of a scripted schedule: run execution Exec until it waits at a boundary
// Until holds for (nil: to its end), or crash it where it waits (Crash), or fire the event
// named Event.
type Step struct {
	Exec  int
	Until func(ssf.FaultPoint) bool
	Crash bool
	Event string
}

// scripted follows steps, then lets whatever is left run to its end. A run step whose
// execution already ended is passed over; an event or crash that cannot be taken is recorded
// in missed.
func scripted(steps []Step, missed *[]string) chooser {
	k, moved := 0, false
	return func(v view) int {
		for k < len(steps) {
			st := steps[k]
			find := func(match func(option) bool) int {
				for i, o := range v.opts {
					if match(o) {
						return i
					}
				}
				return -1
			}
			var i int
			switch {
			case st.Event != "":
				i = find(func(o option) bool { return o.exec < 0 && o.event.Name == st.Event })
			case st.Crash:
				i = find(func(o option) bool { return o.crash && o.exec == st.Exec })
			case v.done[st.Exec] || (moved && st.Until != nil && st.Until(v.at[st.Exec])):
				i = -1
			default:
				if i = find(func(o option) bool { return !o.crash && o.exec == st.Exec }); i >= 0 {
					moved = true
					return i
				}
			}
			if i < 0 && (st.Event != "" || st.Crash) {
				*missed = append(*missed, fmt.Sprintf("step %d (%+v)", k, st))
			}
			k, moved = k+1, false
			if i >= 0 {
				return i
			}
		}
		return 0
	}
}

// run executes one schedule, choosing with choose.
func run(sc Scenario, choose chooser) (trace []decision, labels []string, err error) {
	s := &scheduler{arrive: make(chan int), resume: make([]chan error, len(sc.Executions)),
		started: make([]bool, len(sc.Executions)), done: make([]bool, len(sc.Executions)),
		at: make([]ssf.FaultPoint, len(sc.Executions))}
	for i := range s.resume {
		s.resume[i] = make(chan error)
	}
	w, closeWorld, err := newWorld(sc, s)
	if err != nil {
		return nil, nil, err
	}
	defer closeWorld()
	// Executions that never reach their end (abandoned mid-schedule) are unblocked when the
	// run returns, so no goroutine is left behind.
	defer func() {
		for i := range sc.Executions {
			for s.started[i] && !s.done[i] {
				select {
				case s.resume[i] <- nil:
				case j := <-s.arrive:
					if j < 0 {
						s.done[-1-j] = true
					}
				}
			}
		}
	}()
	step := func(i int, crash error) {
		if !s.started[i] {
			s.started[i] = true
			go func() {
				ctx := context.WithValue(context.Background(), threadKey{}, i)
				res, err := w.RT[App].Handle(ctx, sc.Executions[i])
				w.Returns[i] = Return{Finished: true, Result: res, Err: err}
				s.arrive <- -1 - i
			}()
		} else {
			s.resume[i] <- crash
		}
		if j := <-s.arrive; j < 0 {
			s.done[-1-j] = true
		}
	}
	cur, crashes, preempted := -1, 0, 0
	for n := 0; ; n++ {
		if n > maxSteps {
			return trace, labels, fmt.Errorf("schedule longer than %d steps: an execution spins", maxSteps)
		}
		var opts []option
		if cur >= 0 && !s.done[cur] {
			opts = append(opts, option{exec: cur})
		}
		for i := range sc.Executions {
			if i != cur && !s.done[i] {
				opts = append(opts, option{exec: i})
			}
		}
		for _, e := range sc.Events {
			if !w.fired[e.Name] && (e.Ready == nil || e.Ready(w)) {
				opts = append(opts, option{exec: -1, event: e})
			}
		}
		for i := range sc.Executions {
			if crashes < sc.Crashes && s.started[i] && !s.done[i] {
				opts = append(opts, option{exec: i, crash: true})
			}
		}
		if len(opts) == 0 {
			break
		}
		d := decision{options: len(opts), preemptive: cur >= 0 && !s.done[cur]}
		d.taken = choose(view{index: len(trace), d: d, opts: opts, preempted: preempted, at: s.at, done: s.done})
		if d.preemptive && d.taken > 0 {
			preempted++
		}
		trace = append(trace, d)
		o := opts[d.taken]
		switch {
		case o.crash:
			labels = append(labels, fmt.Sprintf("crash-e%d", o.exec))
			crashes++
			step(o.exec, ssf.ErrCrashed)
			cur = o.exec
			continue
		case o.exec >= 0:
			labels = append(labels, fmt.Sprintf("e%d", o.exec))
			step(o.exec, nil)
			cur = o.exec
			continue
		}
		labels = append(labels, o.event.Name)
		w.fired[o.event.Name] = true
		if err := o.event.Fire(w); err != nil {
			return trace, labels, fmt.Errorf("event %s: %w", o.event.Name, err)
		}
	}
	out, err := w.finish()
	if err != nil {
		return trace, labels, err
	}
	if err := agree(w, out); err != nil {
		return trace, labels, err
	}
	if sc.Check != nil {
		err = sc.Check(w, out)
	}
	return trace, labels, err
}

// newWorld starts the scenario's SSFs on fresh in-memory stores, with faults (nil: none), and
// runs its Setup.
func newWorld(sc Scenario, faults ssf.FaultInjector) (*World, func(), error) {
	h := local.NewHost()
	h.Sequential = true
	w := &World{Host: h, Clock: testclock.New(time.Unix(1_700_000_000, 0)), RT: map[string]*ssf.Runtime{},
		Returns: make([]Return, len(sc.Executions)), fired: map[string]bool{}}
	capacity := sc.RowCapacity
	if capacity == 0 {
		capacity = 2
	}
	for name, handler := range sc.SSFs {
		tbl := store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://"+name)
		if sc.Tables != nil {
			tbl = sc.Tables(name)
		}
		rt, err := h.Add(ssf.Config{Name: name, Store: tbl,
			Handler: withSet(handler), RowCapacity: capacity, Lifetime: Lifetime, GCBound: GCBound,
			RelaunchDelay: RelaunchDelay, Clock: w.Clock, Faults: faults, Hold: sc.Hold, Logger: quiet(),
			MaxAttempts: -1}) // crashes and pauses are not deterministic failures: every instance must finish
		if err != nil {
			h.Close()
			return nil, nil, err
		}
		w.RT[name] = rt
	}
	if sc.Setup != nil {
		if err := sc.Setup(w); err != nil {
			h.Close()
			return nil, nil, fmt.Errorf("setup: %w", err)
		}
	}
	return w, h.Close, nil
}

// agree checks that every execution that answered its client answered with the instance's
// result, and that the runtime saw no corrupt state.
func agree(w *World, o Outcome) error {
	for i, r := range w.Returns {
		if r.Err != nil || !r.Finished {
			continue
		}
		if !o.Known {
			return fmt.Errorf("execution %d answered %s, but the instance's result is unknown", i, show(r.Result))
		}
		if show(r.Result) != show(o.Result) {
			return fmt.Errorf("execution %d answered %s, the instance's result is %s", i, show(r.Result), show(o.Result))
		}
	}
	for _, name := range w.names() {
		if c := w.RT[name].Stats().Corruptions; c > 0 {
			return fmt.Errorf("SSF %s detected corrupt state %d times", name, c)
		}
	}
	return nil
}

func show(r ssf.Result) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// finish lets the intent collectors finish every instance, then collects garbage past T, and
// returns the outcome.
func (w *World) finish() (Outcome, error) {
	ctx := context.Background()
	var o Outcome
	for round := 0; ; round++ {
		if round == 50 {
			return o, errors.New("instances still unfinished after 50 intent-collector rounds")
		}
		pending := 0
		for _, name := range w.names() {
			n, err := w.RT[name].Pending(ctx)
			if err != nil {
				return o, err
			}
			pending += n
		}
		if pending == 0 {
			break
		}
		// Far enough that an index entry whose intent a fenced execution never created is
		// removed within a few rounds (T after its launch).
		w.Clock.Advance(GCBound/4 + time.Second)
		for _, name := range w.names() {
			if _, err := w.RT[name].CollectIntents(ctx); err != nil {
				return o, err
			}
		}
		w.Host.Wait()
	}
	st, err := w.RT[App].Intent(ctx, InstanceID)
	if err != nil {
		return o, err
	}
	switch {
	case st.Exists && !st.Done:
		return o, errors.New("the instance is not done after the intent collector ran")
	case st.Done: // kept, or collected with its result
		o.Result, o.Known = st.Result, true
	default:
		for _, r := range w.Returns {
			if r.Finished && r.Err == nil {
				o.Result, o.Known = r.Result, true
				break
			}
		}
	}
	if err := w.Pause(); err != nil {
		return o, err
	}
	o.Items, o.Locks = map[string]string{}, map[string]string{}
	for _, name := range w.names() {
		items, err := w.RT[name].Items(ctx)
		if err != nil {
			return o, err
		}
		for k, v := range items {
			o.Items[name+":"+k] = string(v)
		}
		locks, err := w.RT[name].Locks(ctx)
		if err != nil {
			return o, err
		}
		for k, v := range locks {
			o.Locks[name+":"+k] = v
		}
	}
	return o, nil
}

// withSet wraps a handler with the {"set": ...} requests of World.Set.
func withSet(h ssf.Handler) ssf.Handler {
	return func(env *ssf.Env, in json.RawMessage) (any, error) {
		var req struct {
			Set map[string]json.RawMessage `json:"set"`
		}
		if json.Unmarshal(in, &req) == nil && req.Set != nil {
			keys := make([]string, 0, len(req.Set))
			for k := range req.Set {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				table, key, _ := strings.Cut(k, "/")
				if err := env.Write(table, key, req.Set[k]); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		return h(env, in)
	}
}

// Report summarises an exploration.
type Report struct {
	Schedules int
	Longest   int // decisions in the longest schedule
	Elapsed   time.Duration
}

// Violation is a schedule whose outcome no single execution could produce.
type Violation struct {
	Scenario string
	Choices  []int
	Labels   []string // who ran at each decision: e0, e1, ... or an event's name
	Err      error
}

func (v *Violation) Error() string {
	return fmt.Sprintf("scenario %s: schedule %v (%s): %v", v.Scenario, v.Choices, strings.Join(v.Labels, " "), v.Err)
}

// Explore runs every schedule of sc with at most preemptions preemptions (at most limit of
// them, if limit > 0), depth first, then samples more schedules with up to 2 more
// preemptions (random ones, seeded: the same every run), and returns the first violation.
func Explore(sc Scenario, preemptions, limit, random int) (rep Report, err error) {
	start := time.Now()
	check := func(trace []decision, labels []string, err error) error {
		rep.Schedules++
		rep.Longest = max(rep.Longest, len(trace))
		if err == nil {
			return nil
		}
		taken := make([]int, len(trace))
		for i, d := range trace {
			taken[i] = d.taken
		}
		return &Violation{Scenario: sc.Name, Choices: taken, Labels: labels, Err: err}
	}
	defer func() { rep.Elapsed = time.Since(start) }()
	var choices []int
	for {
		trace, labels, err := run(sc, prefix(choices))
		if err := check(trace, labels, err); err != nil {
			return rep, err
		}
		next, ok := nextSchedule(trace, preemptions)
		if !ok || (limit > 0 && rep.Schedules >= limit) {
			break
		}
		choices = next
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(sc.Name))))
	for range random {
		if err := check(run(sc, randomWithin(rng, preemptions+2, 0.08))); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Replay runs one schedule (a Violation's Choices).
func Replay(sc Scenario, choices []int) error {
	_, labels, err := run(sc, prefix(choices))
	if err != nil {
		return &Violation{Scenario: sc.Name, Choices: choices, Labels: labels, Err: err}
	}
	return nil
}

// Script runs one scripted schedule: a regression test that names its interleaving by the
// boundaries it stops at, so it means the same on every store.
func Script(sc Scenario, steps []Step) error {
	var missed []string
	trace, labels, err := run(sc, scripted(steps, &missed))
	if err == nil && len(missed) > 0 {
		err = fmt.Errorf("the script could not take %s", strings.Join(missed, ", "))
	}
	if err != nil {
		taken := make([]int, len(trace))
		for i, d := range trace {
			taken[i] = d.taken
		}
		return &Violation{Scenario: sc.Name, Choices: taken, Labels: labels, Err: err}
	}
	return nil
}

// nextSchedule returns the choices of the next schedule in depth-first order within the
// preemption bound: the deepest decision with an untried option is advanced.
func nextSchedule(trace []decision, bound int) ([]int, bool) {
	used := make([]int, len(trace)+1) // preemptions before decision i
	for i, d := range trace {
		used[i+1] = used[i]
		if d.preemptive && d.taken > 0 {
			used[i+1]++
		}
	}
	for i := len(trace) - 1; i >= 0; i-- {
		d := trace[i]
		if d.taken+1 >= d.options {
			continue
		}
		cost := used[i]
		if d.preemptive {
			cost++
		}
		if cost > bound {
			continue
		}
		next := make([]int, i+1)
		for j := range i {
			next[j] = trace[j].taken
		}
		next[i] = d.taken + 1
		return next, true
	}
	return nil, false
}
