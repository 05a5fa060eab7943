package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The trip-booking application: "trip" runs a saga over three SSFs that each own their state:
// reserve a hotel room, reserve a flight seat, charge the customer.

const tripID = "trip-1"

type tripOrder struct {
	Customer string `json:"customer"`
	Hotel    string `json:"hotel"`
	Flight   string `json:"flight"`
	Price    int64  `json:"price"`
}

// stockOp is the input of "hotels" and "flights".
type stockOp struct {
	Op   string `json:"op"` // open, reserve, cancel
	Item string `json:"item"`
	Trip string `json:"trip,omitempty"`
	N    int64  `json:"n,omitempty"`
}

// payOp is the input of "payments".
type payOp struct {
	Op       string `json:"op"` // open, charge, refund
	Customer string `json:"customer"`
	Trip     string `json:"trip,omitempty"`
	Amount   int64  `json:"amount"`
}

// addInt adds delta to an integer item with a compare-and-swap loop of logged reads and
// conditional writes; it reports false, writing nothing, if the result would be negative.
func addInt(env *ssf.Env, table, key string, delta int64) (bool, error) {
	for {
		var cur int64
		found, err := env.ReadInto(table, key, &cur)
		if err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("no %s %q", table, key)
		}
		if cur+delta < 0 {
			return false, nil
		}
		if ok, err := env.CondWrite(table, key, cur+delta, store.Equal(nil, cur)); err != nil || ok {
			return ok, err
		}
	}
}

// inventory is the handler of "hotels" and "flights". Cancelling is deliberately not idempotent
// (it always gives the room back): a compensation that ran twice would show in the capacity.
func inventory(kind string) ssf.Handler {
	return func(env *ssf.Env, in json.RawMessage) (any, error) {
		var op stockOp
		if err := json.Unmarshal(in, &op); err != nil {
			return nil, err
		}
		switch op.Op {
		case "open":
			return env.CondWrite("capacity", op.Item, op.N, store.Equal(nil, nil))
		case "reserve":
			ok, err := addInt(env, "capacity", op.Item, -1)
			if err != nil || !ok {
				if err == nil {
					err = fmt.Errorf("%s %s is full", kind, op.Item)
				}
				return nil, err
			}
			return nil, env.Write("bookings", op.Trip, op.Item)
		case "cancel":
			if _, err := addInt(env, "capacity", op.Item, 1); err != nil {
				return nil, err
			}
			return nil, env.Write("bookings", op.Trip, "cancelled")
		}
		return nil, fmt.Errorf("unknown operation %q", op.Op)
	}
}

func payments(env *ssf.Env, in json.RawMessage) (any, error) {
	var op payOp
	if err := json.Unmarshal(in, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "open":
		return env.CondWrite("wallets", op.Customer, op.Amount, store.Equal(nil, nil))
	case "charge":
		ok, err := addInt(env, "wallets", op.Customer, -op.Amount)
		if err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("card of %s declined", op.Customer)
			}
			return nil, err
		}
		return nil, env.Write("charges", op.Trip, op.Amount)
	case "refund":
		if _, err := addInt(env, "wallets", op.Customer, op.Amount); err != nil {
			return nil, err
		}
		return nil, env.Write("charges", op.Trip, "refunded")
	}
	return nil, fmt.Errorf("unknown operation %q", op.Op)
}

// tripHooks observes the trip handler from the test (observation only: the handler's control
// flow does not depend on it).
type tripHooks struct {
	compensating  atomic.Bool  // a compensation is running
	compensations atomic.Int64 // compensations entered, over all executions
	// misreported counts crashes that Run reported as a failed saga instead of as they are.
	misreported atomic.Int64
}

func tripHandler(hooks *tripHooks) ssf.Handler {
	return func(env *ssf.Env, in json.RawMessage) (any, error) {
		var o tripOrder
		if err := json.Unmarshal(in, &o); err != nil {
			return nil, err
		}
		id := env.InstanceID()
		call := func(callee string, op any) func() error {
			return func() error { _, err := env.SyncInvoke(callee, op); return err }
		}
		undo := func(callee string, op any) func() error {
			return func() error {
				hooks.compensations.Add(1)
				hooks.compensating.Store(true)
				defer hooks.compensating.Store(false)
				return call(callee, op)()
			}
		}
		err := ssf.NewSaga(env).Run(
			ssf.SagaStep{Name: "hotel",
				Action:     call("hotels", stockOp{Op: "reserve", Item: o.Hotel, Trip: id}),
				Compensate: undo("hotels", stockOp{Op: "cancel", Item: o.Hotel, Trip: id})},
			ssf.SagaStep{Name: "flight",
				Action:     call("flights", stockOp{Op: "reserve", Item: o.Flight, Trip: id}),
				Compensate: undo("flights", stockOp{Op: "cancel", Item: o.Flight, Trip: id})},
			ssf.SagaStep{Name: "payment",
				Action:     call("payments", payOp{Op: "charge", Customer: o.Customer, Trip: id, Amount: o.Price}),
				Compensate: undo("payments", payOp{Op: "refund", Customer: o.Customer, Trip: id, Amount: o.Price})},
		)
		var se *ssf.SagaError
		if errors.Is(err, ssf.ErrCrashed) && errors.As(err, &se) {
			hooks.misreported.Add(1)
		}
		if err != nil {
			return nil, err
		}
		return "booked", env.Write("trips", id, o)
	}
}

// sagaInjector crashes the crashAt-th injection point (or, with crashIf, the first point it
// accepts), once, and counts points, and those passed while compensating.
type sagaInjector struct {
	mu           sync.Mutex
	hooks        *tripHooks
	enabled      bool
	count        int
	compensating int
	crashAt      int
	crashIf      func(ssf.FaultPoint) bool
	crashes      []ssf.FaultPoint
}

func (in *sagaInjector) Inject(_ context.Context, p ssf.FaultPoint) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.enabled {
		return nil
	}
	in.count++
	if in.hooks != nil && in.hooks.compensating.Load() {
		in.compensating++
	}
	crash := in.count == in.crashAt || (in.crashIf != nil && in.crashIf(p))
	if !crash || len(in.crashes) > 0 {
		return nil
	}
	in.crashes = append(in.crashes, p)
	return ssf.ErrCrashed
}

func (in *sagaInjector) set(enabled bool) {
	in.mu.Lock()
	in.enabled = enabled
	in.mu.Unlock()
}

// sagaWorld is a sequential host with a manual clock, mem stores and crash injection.
type sagaWorld struct {
	host  *local.Host
	rts   map[string]*ssf.Runtime
	clock *testclock.Manual
	inj   *sagaInjector
}

func newSagaWorld(t *testing.T, inj *sagaInjector, handlers map[string]ssf.Handler) *sagaWorld {
	t.Helper()
	w := &sagaWorld{host: local.NewHost(), rts: map[string]*ssf.Runtime{}, clock: testclock.New(time.Unix(1e9, 0)), inj: inj}
	w.host.Sequential = true
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.host.Logger = quiet
	t.Cleanup(w.host.Close)
	for name, h := range handlers {
		rt, err := w.host.Add(ssf.Config{Name: name, Store: newTable(), Handler: h, RowCapacity: 2,
			RelaunchDelay: time.Nanosecond, Clock: w.clock, Faults: inj, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		w.rts[name] = rt
	}
	return w
}

func (w *sagaWorld) invoke(t *testing.T, name, id string, input any) ssf.Result {
	t.Helper()
	res, err := w.host.Invoke(context.Background(), name, id, input)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// submit delivers a request as a platform does: retried until its intent is registered. A crash
// after that is the intent collector's to finish.
func (w *sagaWorld) submit(t *testing.T, name, id string, input any) {
	t.Helper()
	for attempt := 0; attempt < 10; attempt++ {
		if _, err := w.host.Invoke(context.Background(), name, id, input); err == nil {
			return
		}
		if st, err := w.rts[name].Intent(context.Background(), id); err != nil || st.Exists {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("request %s never accepted", id)
}

// drain runs the intent collectors until no instance is unfinished, moving the clock past
// RelaunchDelay before each round.
func (w *sagaWorld) drain(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for round := 0; ; round++ {
		w.host.Wait()
		pending := 0
		for _, rt := range w.rts {
			n, err := rt.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pending += n
		}
		if pending == 0 {
			return
		}
		if round == 100 {
			t.Fatalf("%d instances unfinished after %d intent-collector rounds", pending, round)
		}
		w.clock.Advance(time.Millisecond)
		for _, rt := range w.rts {
			if _, err := rt.CollectIntents(ctx); err != nil && !errors.Is(err, ssf.ErrCrashed) {
				t.Fatal(err)
			}
		}
	}
}

// result returns a finished instance's result.
func (w *sagaWorld) result(t *testing.T, name, id string) ssf.Result {
	t.Helper()
	st, err := w.rts[name].Intent(context.Background(), id)
	if err != nil || !st.Done {
		t.Fatalf("%s %s not finished (err %v)", name, id, err)
	}
	return st.Result
}

// state is every SSF's items, "table/key" -> JSON value.
func (w *sagaWorld) state(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for name, rt := range w.rts {
		items, err := rt.Items(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[name] = map[string]string{}
		for k, v := range items {
			out[name][k] = string(v)
		}
		if c := rt.Stats().Corruptions; c != 0 {
			t.Fatalf("%s detected %d corruptions", name, c)
		}
	}
	return out
}

type tripScenario struct {
	name          string
	seats, wallet int64
	result        ssf.Result
	state         map[string]map[string]string
}

var tripOrderAnn = tripOrder{Customer: "ann", Hotel: "H1", Flight: "F1", Price: 300}

var tripScenarios = []tripScenario{
	{
		name: "booked", seats: 1, wallet: 500,
		result: ssf.Result{Output: json.RawMessage(`"booked"`)},
		state: map[string]map[string]string{
			"hotels":   {"capacity/H1": "1", "bookings/" + tripID: `"H1"`},
			"flights":  {"capacity/F1": "0", "bookings/" + tripID: `"F1"`},
			"payments": {"wallets/ann": "200", "charges/" + tripID: "300"},
			"trip":     {"trips/" + tripID: `{"customer":"ann","hotel":"H1","flight":"F1","price":300}`},
		},
	},
	{
		name: "flight full", seats: 0, wallet: 500,
		result: ssf.Result{Error: `saga step "flight" failed: flights F1 is full; earlier steps compensated`},
		state: map[string]map[string]string{
			"hotels":   {"capacity/H1": "2", "bookings/" + tripID: `"cancelled"`},
			"flights":  {"capacity/F1": "0"},
			"payments": {"wallets/ann": "500"},
			"trip":     {},
		},
	},
	{
		name: "payment declined", seats: 1, wallet: 100,
		result: ssf.Result{Error: `saga step "payment" failed: card of ann declined; earlier steps compensated`},
		state: map[string]map[string]string{
			"hotels":   {"capacity/H1": "2", "bookings/" + tripID: `"cancelled"`},
			"flights":  {"capacity/F1": "1", "bookings/" + tripID: `"cancelled"`},
			"payments": {"wallets/ann": "100"},
			"trip":     {},
		},
	},
}

type tripOutcome struct {
	result ssf.Result
	state  map[string]map[string]string
	hooks  *tripHooks
}

// bookTrip opens the inventories and the wallet (no crashes), then books a trip with crash
// injection on and lets the intent collectors finish it.
func bookTrip(t *testing.T, sc tripScenario, inj *sagaInjector) tripOutcome {
	t.Helper()
	hooks := &tripHooks{}
	inj.hooks = hooks
	w := newSagaWorld(t, inj, map[string]ssf.Handler{
		"trip": tripHandler(hooks), "hotels": inventory("hotels"), "flights": inventory("flights"), "payments": payments,
	})
	w.invoke(t, "hotels", "open-H1", stockOp{Op: "open", Item: "H1", N: 2})
	w.invoke(t, "flights", "open-F1", stockOp{Op: "open", Item: "F1", N: sc.seats})
	w.invoke(t, "payments", "open-ann", payOp{Op: "open", Customer: "ann", Amount: sc.wallet})
	inj.set(true)
	w.submit(t, "trip", tripID, tripOrderAnn)
	w.drain(t)
	inj.set(false)
	return tripOutcome{result: w.result(t, "trip", tripID), state: w.state(t), hooks: hooks}
}

func checkTrip(t *testing.T, what string, sc tripScenario, got tripOutcome, crashes []ssf.FaultPoint) {
	t.Helper()
	if string(got.result.Output) != string(sc.result.Output) || got.result.Error != sc.result.Error {
		t.Fatalf("%s: result %+v, want %+v (crashes %v)", what, got.result, sc.result, crashes)
	}
	if !reflect.DeepEqual(got.state, sc.state) {
		t.Fatalf("%s: state\n%v\nwant\n%v\n(crashes %v)", what, got.state, sc.state, crashes)
	}
}

func TestSagaTripBooking(t *testing.T) {
	for _, sc := range tripScenarios {
		t.Run(sc.name, func(t *testing.T) {
			got := bookTrip(t, sc, &sagaInjector{})
			checkTrip(t, "clean run", sc, got, nil)
			wantComp := map[string]int64{"booked": 0, "flight full": 1, "payment declined": 2}[sc.name]
			if n := got.hooks.compensations.Load(); n != wantComp {
				t.Fatalf("%d compensations ran, want %d", n, wantComp)
			}
		})
	}
}

// TestSagaCrashAtEveryPoint crashes the trip once at each injection point of a clean run in
// turn (every store operation, call and callback of every SSF, before and after), lets the
// intent collector finish, and requires the clean run's result and state: each action and
// compensation took effect exactly once, whatever the crash interrupted.
func TestSagaCrashAtEveryPoint(t *testing.T) {
	for _, sc := range tripScenarios {
		t.Run(sc.name, func(t *testing.T) {
			inj := &sagaInjector{}
			clean := bookTrip(t, sc, inj)
			checkTrip(t, "clean run", sc, clean, nil)
			points, compensating := inj.count, inj.compensating
			if sc.name == "booked" && compensating != 0 || sc.name != "booked" && compensating < 20 {
				t.Fatalf("%d of the clean run's %d injection points are in compensations", compensating, points)
			}
			t.Logf("%d injection points, %d of them compensating", points, compensating)
			for k := 1; k <= points; k++ {
				inj := &sagaInjector{crashAt: k}
				got := bookTrip(t, sc, inj)
				what := fmt.Sprintf("crash at point %d/%d", k, points)
				if len(inj.crashes) != 1 {
					t.Fatalf("%s: %d crashes", what, len(inj.crashes))
				}
				checkTrip(t, what, sc, got, inj.crashes)
				// A crash is never compensated (the re-execution finishes the saga), and Run
				// returns it as it is.
				if n := got.hooks.compensations.Load(); sc.name == "booked" && n != 0 {
					t.Fatalf("%s: %d compensations ran in a saga that succeeded (crash %v)", what, n, inj.crashes)
				}
				if got.hooks.misreported.Load() != 0 {
					t.Fatalf("%s: Run reported the crash as a failed saga (crash %v)", what, inj.crashes)
				}
			}
		})
	}
}

// The planner runs a saga of journal entries, as its input describes, to check ordering and
// error semantics; the journal SSF appends entries (or refuses them) per planner instance.

type planStep struct {
	Name     string `json:"name"`
	Fail     bool   `json:"fail,omitempty"`      // the action fails (application error)
	Panic    bool   `json:"panic,omitempty"`     // the action panics
	FailUndo bool   `json:"fail_undo,omitempty"` // the compensation fails
	NoUndo   bool   `json:"no_undo,omitempty"`   // nothing to compensate
	// Opaque: the action flattens its error into a new one (%v), as careless code does.
	Opaque bool `json:"opaque,omitempty"`
}

type plan struct {
	Steps []planStep `json:"steps"`
	// Run uses Saga.Run; otherwise Step, then Compensate on the first error.
	Run bool `json:"run,omitempty"`
	// UndoAfter calls Compensate after the saga succeeded.
	UndoAfter bool `json:"undo_after,omitempty"`
}

// planOutcome reports what the saga API returned, as seen by the handler.
type planOutcome struct {
	Err         string   `json:"err,omitempty"`
	SagaError   bool     `json:"saga_error,omitempty"` // errors.As *SagaError
	AppError    bool     `json:"app_error,omitempty"`  // errors.As *AppError (the journal's refusal)
	Failed      string   `json:"failed,omitempty"`     // SagaError.Step
	FailedUndos []string `json:"failed_undos,omitempty"`
	Again       string   `json:"again,omitempty"` // a second Compensate's error
}

type journalEntry struct {
	Entry string `json:"entry"`
	Fail  bool   `json:"fail,omitempty"`
}

func journal(env *ssf.Env, in json.RawMessage) (any, error) {
	var e journalEntry
	if err := json.Unmarshal(in, &e); err != nil {
		return nil, err
	}
	if e.Fail {
		return nil, fmt.Errorf("%s refused", e.Entry)
	}
	var entries []string
	if _, err := env.ReadInto("entries", "log", &entries); err != nil {
		return nil, err
	}
	return nil, env.Write("entries", "log", append(entries, e.Entry))
}

// plannerHooks observes the planner: what it is doing, and what the saga returned.
type plannerHooks struct {
	mu            sync.Mutex
	phase         string
	compensations int
	stepErrs      []error
	compErrs      []error
	lateActions   int     // actions of the "late" step run
	lateErrs      []error // what Step returned for it
}

func (h *plannerHooks) enter(phase string) {
	h.mu.Lock()
	h.phase = phase
	h.mu.Unlock()
}

func (h *plannerHooks) current() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.phase
}

func planner(hooks *plannerHooks) ssf.Handler {
	return func(env *ssf.Env, in json.RawMessage) (any, error) {
		var p plan
		if err := json.Unmarshal(in, &p); err != nil {
			return nil, err
		}
		note := func(entry string, fail bool) error {
			hooks.enter(entry)
			_, err := env.SyncInvoke("journal", journalEntry{Entry: entry, Fail: fail})
			return err
		}
		saga := ssf.NewSaga(env)
		steps := make([]ssf.SagaStep, len(p.Steps))
		for i, st := range p.Steps {
			steps[i] = ssf.SagaStep{Name: st.Name, Action: func() error {
				if st.Panic {
					panic("boom")
				}
				err := note("do "+st.Name, st.Fail)
				if err != nil && st.Opaque {
					err = fmt.Errorf("step %s: %v", st.Name, err)
				}
				return err
			}}
			if !st.NoUndo {
				steps[i].Compensate = func() error {
					hooks.mu.Lock()
					hooks.compensations++
					hooks.mu.Unlock()
					return note("undo "+st.Name, st.FailUndo)
				}
			}
		}
		var err error
		if p.Run {
			err = saga.Run(steps...)
		} else {
			for _, st := range steps {
				if err = saga.Step(st.Name, st.Action, st.Compensate); err != nil {
					hooks.mu.Lock()
					hooks.stepErrs = append(hooks.stepErrs, err)
					hooks.mu.Unlock()
					// Safe on any error: an infrastructure error comes back without compensating.
					cerr := saga.Compensate()
					hooks.mu.Lock()
					hooks.compErrs = append(hooks.compErrs, cerr)
					hooks.mu.Unlock()
					if cerr != nil {
						err = errors.Join(err, cerr)
					}
					// A step after an infrastructure error must not even run its action.
					lateErr := saga.Step("late", func() error {
						hooks.mu.Lock()
						hooks.lateActions++
						hooks.mu.Unlock()
						return nil
					}, nil)
					hooks.mu.Lock()
					hooks.lateErrs = append(hooks.lateErrs, lateErr)
					hooks.mu.Unlock()
					break
				}
			}
		}
		if err == nil && p.UndoAfter {
			err = saga.Compensate()
		}
		var out planOutcome
		if err != nil {
			out.Err = err.Error()
			var se *ssf.SagaError
			var ae *ssf.AppError
			out.SagaError, out.AppError = errors.As(err, &se), errors.As(err, &ae)
			if se != nil {
				out.Failed = se.Step
			}
			out.FailedUndos = failedUndos(err)
			if again := saga.Compensate(); again != nil {
				out.Again = again.Error()
			}
		}
		return out, env.Write("outcomes", env.InstanceID(), out)
	}
}

// failedUndos returns the steps of the CompensationErrors in err's tree, in order.
func failedUndos(err error) []string {
	var ce *ssf.CompensationError
	if errors.As(err, &ce) && err == error(ce) {
		return []string{ce.Step}
	}
	var steps []string
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			steps = append(steps, failedUndos(e)...)
		}
	case interface{ Unwrap() error }:
		steps = failedUndos(u.Unwrap())
	}
	return steps
}

func newPlannerWorld(t *testing.T, inj *sagaInjector, hooks *plannerHooks) *sagaWorld {
	return newSagaWorld(t, inj, map[string]ssf.Handler{"planner": planner(hooks), "journal": journal})
}

func journalOf(t *testing.T, w *sagaWorld) []string {
	t.Helper()
	var entries []string
	if raw := w.state(t)["journal"]["entries/log"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &entries); err != nil {
			t.Fatal(err)
		}
	}
	return entries
}

func TestSagaCompensationSemantics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plan    plan
		journal []string
		out     planOutcome
	}{
		{
			name:    "Run compensates in reverse order",
			plan:    plan{Run: true, Steps: []planStep{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d", Fail: true}, {Name: "e"}}},
			journal: []string{"do a", "do b", "do c", "undo c", "undo b", "undo a"},
			out: planOutcome{Err: `saga step "d" failed: do d refused; earlier steps compensated`,
				SagaError: true, AppError: true, Failed: "d"},
		},
		{
			name:    "a failing compensation does not stop the others; nil compensations are skipped",
			plan:    plan{Run: true, Steps: []planStep{{Name: "a"}, {Name: "b", FailUndo: true}, {Name: "c", NoUndo: true}, {Name: "d", FailUndo: true}, {Name: "e", Fail: true}}},
			journal: []string{"do a", "do b", "do c", "do d", "undo a"},
			out: planOutcome{Err: `saga step "e" failed: do e refused; compensation incomplete: compensating step "d": undo d refused; compensating step "b": undo b refused`,
				SagaError: true, AppError: true, Failed: "e", FailedUndos: []string{"d", "b"}},
		},
		{
			name:    "Step and Compensate",
			plan:    plan{Steps: []planStep{{Name: "a"}, {Name: "b", FailUndo: true}, {Name: "c", Fail: true}}},
			journal: []string{"do a", "do b", "undo a"},
			out: planOutcome{Err: "do c refused\ncompensating step \"b\": undo b refused",
				AppError: true, FailedUndos: []string{"b"}},
		},
		{
			name:    "a panicking action is compensated",
			plan:    plan{Run: true, Steps: []planStep{{Name: "a"}, {Name: "b", Panic: true}}},
			journal: []string{"do a", "undo a"},
			out:     planOutcome{Err: `saga step "b" failed: saga step "b": action panicked: boom; earlier steps compensated`, SagaError: true, Failed: "b"},
		},
		{
			name:    "compensations stay registered after success",
			plan:    plan{Run: true, UndoAfter: true, Steps: []planStep{{Name: "a"}, {Name: "b"}}},
			journal: []string{"do a", "do b", "undo b", "undo a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooks := &plannerHooks{}
			w := newPlannerWorld(t, &sagaInjector{}, hooks)
			res := w.invoke(t, "planner", "plan-1", tc.plan)
			var out planOutcome
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatalf("result %+v: %v", res, err)
			}
			if !reflect.DeepEqual(out, tc.out) {
				t.Fatalf("outcome\n%+v\nwant\n%+v", out, tc.out)
			}
			if got := journalOf(t, w); !reflect.DeepEqual(got, tc.journal) {
				t.Fatalf("journal %q, want %q", got, tc.journal)
			}
		})
	}
}

// TestSagaInfrastructureFailureIsNotCompensated crashes the third step's call after the callee
// ran (its reply lost), in an action that turns the crash into an error of its own: Step must
// still return the crash, the execution must compensate nothing, and the re-execution must
// finish the saga, not undo it.
func TestSagaInfrastructureFailureIsNotCompensated(t *testing.T) {
	hooks := &plannerHooks{}
	inj := &sagaInjector{crashIf: func(p ssf.FaultPoint) bool {
		return p.SSF == "planner" && p.Op == "call" && p.After && hooks.current() == "do c"
	}}
	w := newPlannerWorld(t, inj, hooks)
	inj.set(true)
	_, err := w.host.Invoke(context.Background(), "planner", "plan-1", plan{Steps: []planStep{{Name: "a"}, {Name: "b"}, {Name: "c", Opaque: true}}})
	var ee *ssf.ExecutionError
	if !errors.As(err, &ee) || !errors.Is(err, ssf.ErrCrashed) || len(inj.crashes) != 1 {
		t.Fatalf("want the execution abandoned by the injected crash, got %v (crashes %v)", err, inj.crashes)
	}
	hooks.mu.Lock()
	stepErrs, compErrs, compensations := hooks.stepErrs, hooks.compErrs, hooks.compensations
	lateActions, lateErrs := hooks.lateActions, hooks.lateErrs
	hooks.mu.Unlock()
	if len(stepErrs) != 1 || !errors.Is(stepErrs[0], ssf.ErrCrashed) {
		t.Fatalf("Step returned %v, want the crash", stepErrs)
	}
	if len(compErrs) != 1 || compErrs[0] != stepErrs[0] {
		t.Fatalf("Compensate returned %v, want the crash it was called on (%v)", compErrs, stepErrs[0])
	}
	if compensations != 0 {
		t.Fatalf("%d compensations ran in an execution poisoned by a crash", compensations)
	}
	if lateActions != 0 || len(lateErrs) != 1 || lateErrs[0] != stepErrs[0] {
		t.Fatalf("a step after the crash ran its action %d times and returned %v", lateActions, lateErrs)
	}
	if got := journalOf(t, w); !reflect.DeepEqual(got, []string{"do a", "do b", "do c"}) {
		t.Fatalf("journal after the crash %q", got)
	}
	w.drain(t)
	if res := w.result(t, "planner", "plan-1"); string(res.Output) != "{}" || res.Error != "" {
		t.Fatalf("re-execution result %+v, want a finished saga", res)
	}
	if got := journalOf(t, w); !reflect.DeepEqual(got, []string{"do a", "do b", "do c"}) {
		t.Fatalf("journal after the re-execution %q", got)
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if hooks.compensations != 0 || len(hooks.stepErrs) != 1 {
		t.Fatalf("the re-execution compensated (%d) or failed a step (%v)", hooks.compensations, hooks.stepErrs)
	}
}
