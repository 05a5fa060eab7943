package ssf

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
)

// Saga runs a sequence of steps that each take effect on their own, registering with each one a
// compensation that semantically undoes it; when a later step fails, Compensate undoes the steps
// that succeeded, latest first (Garcia-Molina and Salem, "Sagas", SIGMOD '87). It is the
// alternative to a transaction when holding locks across services for the whole sequence costs
// too much; docs/sagas.md weighs the two.
//
// A saga keeps no log of its own, and needs none. Its actions and compensations reach external
// state only through Env operations (SyncInvoke, Write, CondWrite, ...), which are exactly-once
// steps, and the handler is deterministic given what Env returns, so a re-execution after a
// crash registers the same compensations, replays every logged step and carries on from the
// first unlogged one. Each action and each compensation thus takes effect exactly once, in the
// same order, wherever executions crash, including in the middle of compensating.
//
// That holds only if a step's outcome is itself logged: an application error must come from a
// logged value (a callee's *AppError, a CondWrite that did not apply, a value read), not from an
// Env.External function's error, which is not logged and may differ in a re-execution.
//
// A Saga belongs to one execution of one handler and is not safe for concurrent use.
type Saga struct {
	env  *Env
	done []registered // the steps that succeeded, in order, with their compensations
}

type registered struct {
	name       string
	compensate func() error
}

// SagaStep is one step of Saga.Run.
type SagaStep struct {
	Name string
	// Action performs the step. If it fails with an application error it must have left
	// nothing to undo: its own compensation is not run.
	Action func() error
	// Compensate undoes a successful Action; nil means there is nothing to undo.
	Compensate func() error
}

// NewSaga starts a saga in env's execution.
func NewSaga(env *Env) *Saga { return &Saga{env: env} }

// Step runs action and, if it succeeds, registers compensate (nil: nothing to undo) to undo it.
//
// If action fails with an application error, Step returns that error and registers nothing: an
// action that fails must leave nothing behind (make it one call, or have it clean up before
// returning). The caller decides what follows, typically Compensate. A panic in action is
// turned into an application error, so that the saga is compensated rather than left half done.
//
// If the execution is poisoned (a store error, a crash, an unreachable callee, the lifetime
// exceeded), Step returns that infrastructure error, even if action swallowed it. Nothing must
// be compensated then: the execution is abandoned, and the intent collector's re-execution
// replays the saga to the same point and continues it. Compensate returns that error without
// running anything, so calling it on any error from Step is safe.
func (s *Saga) Step(name string, action, compensate func() error) error {
	if err := s.env.err; err != nil {
		return err
	}
	var err error
	if action == nil {
		err = fmt.Errorf("%w: saga step %q has no action", ErrBadInput, name)
	} else {
		err = s.call(name, "action", action)
	}
	if perr := s.env.err; perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	s.done = append(s.done, registered{name: name, compensate: compensate})
	return nil
}

// Compensate runs the compensations of the steps that succeeded, latest first. Each is
// unregistered before it runs, so calling Compensate again does not repeat any; steps run after
// Compensate register new compensations as usual.
//
// Compensations must be written to succeed (cancelling a booking that exists always can); the
// runtime already retries every transient failure by re-running the instance. A compensation
// that still fails with an application error has a logged, deterministic outcome that no retry
// would change, so Compensate does not retry it. Nor does it stop there: the remaining
// compensations undo other steps, and stopping would leave those in place with nobody left to
// undo them once the instance finishes. It returns the failures joined, each a
// *CompensationError naming its step, for the handler to return as its result: what is left to
// repair by hand. A compensation that relies on a later one having succeeded must check that
// itself.
//
// If the execution is poisoned, before or during compensation, Compensate stops at once and
// returns that infrastructure error: the re-execution replays the compensations already done
// and runs the rest. A panic in a compensation counts as its failing.
func (s *Saga) Compensate() error {
	var failed []error
	for len(s.done) > 0 {
		if err := s.env.err; err != nil {
			return err
		}
		last := s.done[len(s.done)-1]
		s.done = s.done[:len(s.done)-1]
		if last.compensate == nil {
			continue
		}
		if err := s.call(last.name, "compensation", last.compensate); err != nil && s.env.err == nil {
			failed = append(failed, &CompensationError{Step: last.name, Err: err})
		}
	}
	if err := s.env.err; err != nil {
		return err
	}
	return errors.Join(failed...)
}

// Run runs steps in order with Step. When an action fails with an application error, Run
// compensates the steps before it and returns a *SagaError; an infrastructure error is returned
// as it is and nothing is compensated (see Step). When every step succeeds, Run returns nil and
// the compensations stay registered, so a handler that later decides against the outcome can
// still call Compensate.
func (s *Saga) Run(steps ...SagaStep) error {
	for _, st := range steps {
		err := s.Step(st.Name, st.Action, st.Compensate)
		if err == nil {
			continue
		}
		cerr := s.Compensate() // runs nothing if the execution is poisoned
		if s.env.err != nil {
			return s.env.err
		}
		return &SagaError{Step: st.Name, Err: err, Compensation: cerr}
	}
	return nil
}

// call runs a step's action or compensation, turning a panic into an application error: the
// runtime would otherwise record the panic as the instance's result with the saga half done.
func (s *Saga) call(step, what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.env.rt.log.Error("saga "+what+" panicked", "instance", s.env.id, "step", step, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("saga step %q: %s panicked: %v", step, what, p)
		}
	}()
	return fn()
}

// SagaError reports a saga that Run rolled back: the step whose action failed, its error, and
// the compensations that failed. It unwraps to both, so errors.As finds a callee's *AppError.
type SagaError struct {
	Step string // the step whose action failed
	Err  error  // the action's error
	// Compensation is nil when every earlier step was undone, and otherwise the
	// *CompensationError of each compensation that failed, joined (errors.Join).
	Compensation error
}

func (e *SagaError) Error() string {
	msg := fmt.Sprintf("saga step %q failed: %v; ", e.Step, e.Err)
	if e.Compensation == nil {
		return msg + "earlier steps compensated"
	}
	// One line: errors.Join separates with newlines, and this becomes the instance's result.
	return msg + "compensation incomplete: " + strings.ReplaceAll(e.Compensation.Error(), "\n", "; ")
}

func (e *SagaError) Unwrap() []error {
	if e.Compensation == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Compensation}
}

// CompensationError reports a compensation that failed with an application error: its step's
// effect was not undone.
type CompensationError struct {
	Step string
	Err  error
}

func (e *CompensationError) Error() string {
	return fmt.Sprintf("compensating step %q: %v", e.Step, e.Err)
}

func (e *CompensationError) Unwrap() error { return e.Err }
