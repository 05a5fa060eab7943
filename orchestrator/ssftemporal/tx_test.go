package ssftemporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/internal/faults"
)

// reserve books the hotel and the flight of a trip in one transaction the workflow coordinates.
func reserve(ctx workflow.Context, hotel, flight string) (bool, error) {
	return RunTx(ctx, TxOptions{}, func(tx *Tx) error {
		h := tx.Go(ctx, "hotel", booking{Op: "book", Item: hotel})
		f := tx.Go(ctx, "flight", booking{Op: "book", Item: flight})
		if err := h.Get(ctx, nil); err != nil {
			return err
		}
		return f.Get(ctx, nil)
	})
}

func (f *fixture) checkNoLocks(t *testing.T, what string) {
	t.Helper()
	for name, rt := range f.rts {
		if locks, err := rt.Locks(context.Background()); err != nil || len(locks) > 0 {
			t.Fatalf("%s: %s holds locks %v (%v)", what, name, locks, err)
		}
	}
}

func TestTransactionCommitsOrAbortsEverywhere(t *testing.T) {
	f := newFixture(t, nil)
	f.setCapacity(t, "hotel", "h1", 1)
	f.setCapacity(t, "flight", "f1", 1)

	env := f.env(t)
	env.ExecuteWorkflow(reserve, "h1", "f1")
	var committed bool
	if err := env.GetWorkflowResult(&committed); err != nil || !committed {
		t.Fatalf("first reservation: committed %v, %v", committed, err)
	}
	if h, fl := f.item(t, "hotel", "cap", "h1"), f.item(t, "flight", "cap", "f1"); h != "0" || fl != "0" {
		t.Fatalf("after a committed reservation: hotel %s, flight %s left, want 0 and 0", h, fl)
	}
	f.checkNoLocks(t, "after commit")

	// The flight is sold out now: its participant aborts, and so does the hotel's booking.
	f.setCapacity(t, "hotel", "h2", 1)
	env = f.env(t)
	env.ExecuteWorkflow(reserve, "h2", "f1")
	if err := env.GetWorkflowResult(&committed); err != nil || committed {
		t.Fatalf("reservation of a sold-out flight: committed %v, %v", committed, err)
	}
	if h := f.item(t, "hotel", "cap", "h2"); h != "1" {
		t.Fatalf("after an aborted reservation the hotel has %s left, want 1", h)
	}
	f.checkNoLocks(t, "after abort")
}

// Two transactions in one workflow lock the same items in opposite orders: wait-die aborts the
// younger, RunTx retries it with its age, and both commit.
func TestConflictingTransactionsBothCommit(t *testing.T) {
	f := newFixture(t, nil)
	f.setCapacity(t, "hotel", "h", 2)
	f.setCapacity(t, "flight", "f", 2)
	env := f.env(t)
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		done := workflow.NewWaitGroup(ctx)
		var errs [2]error
		for i, order := range [2][2]string{{"hotel", "flight"}, {"flight", "hotel"}} {
			done.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer done.Done()
				committed, err := RunTx(ctx, TxOptions{Attempts: 50}, func(tx *Tx) error {
					for _, ssfName := range order {
						item := map[string]string{"hotel": "h", "flight": "f"}[ssfName]
						if err := tx.Call(ctx, ssfName, booking{Op: "book", Item: item}, nil); err != nil {
							return err
						}
					}
					return nil
				})
				if err == nil && !committed {
					err = fmt.Errorf("transaction %d did not commit", i)
				}
				errs[i] = err
			})
		}
		done.Wait(ctx)
		return errors.Join(errs[:]...)
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if h, fl := f.item(t, "hotel", "cap", "h"), f.item(t, "flight", "cap", "f"); h != "0" || fl != "0" {
		t.Fatalf("after two committed reservations: hotel %s, flight %s left, want 0 and 0", h, fl)
	}
	f.checkNoLocks(t, "after both")
}

// A worker crash at any point of the transaction (execution, commit propagation) ends with the
// same state as a clean run and no lock held.
func TestTransactionCrashAtEveryPoint(t *testing.T) {
	run := func(inj *faults.Injector) *fixture {
		f := newFixture(t, inj)
		f.setCapacity(t, "hotel", "h", 1)
		f.setCapacity(t, "flight", "f", 1)
		inj.Enable(true)
		env := f.env(t)
		env.ExecuteWorkflow(reserve, "h", "f")
		var committed bool
		if err := env.GetWorkflowResult(&committed); err != nil || !committed {
			t.Fatalf("crashes %v: committed %v, %v", inj.Crashes(), committed, err)
		}
		inj.Enable(false)
		return f
	}
	count := faults.At(0)
	run(count)
	for k := 1; k <= count.Points(); k++ {
		inj := faults.At(k)
		f := run(inj)
		if h, fl := f.item(t, "hotel", "cap", "h"), f.item(t, "flight", "cap", "f"); h != "0" || fl != "0" || len(inj.Crashes()) != 1 {
			t.Fatalf("crash at point %d (%v): hotel %s, flight %s left, want 0 and 0", k, inj.Crashes(), h, fl)
		}
		f.checkNoLocks(t, "after a crash")
	}
	t.Logf("crashed once at each of %d points", count.Points())
}

// A saga whose second step fails compensates the first, once.
func TestSagaCompensatesSucceededSteps(t *testing.T) {
	f := newFixture(t, nil)
	f.setCapacity(t, "hotel", "h", 1)
	env := f.env(t)
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		var saga Saga
		err := saga.Step(ctx, "hotel", booking{Op: "book", Item: "h"}, nil, "hotel", booking{Op: "cancel", Item: "h"})
		if err == nil {
			err = saga.Step(ctx, "flight", booking{Op: "book", Item: "sold-out"}, nil, "flight", booking{Op: "cancel", Item: "sold-out"})
		}
		if err == nil || !IsApplicationError(err) {
			return err
		}
		return saga.Compensate(ctx)
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if h, fl := f.item(t, "hotel", "cap", "h"), f.item(t, "flight", "cap", "sold-out"); h != "1" || fl != "" {
		t.Fatalf("after compensation: hotel %s left (want 1), flight %q (want untouched)", h, fl)
	}
}

// logRecords collects slog records, for tests of what is logged at which level.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// texts returns each record as one line: level, message and attributes.
func (l *logRecords) texts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		out = append(out, line)
	}
	return out
}

// A transaction dying in a wait-die conflict is normal under contention: neither the worker nor
// the SDK logs it as an error, but at INFO (ours) and DEBUG (the SDK's activity error). An
// application's error is still logged at ERROR.
func TestWaitDieConflictIsNotLoggedAsAnError(t *testing.T) {
	f := newFixture(t, nil)
	f.setCapacity(t, "hotel", "h", 2)
	logs := &logRecords{}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	env := s.NewTestWorkflowEnvironment()
	Register(env, f.host.Runtimes()...)
	env.SetTestTimeout(30 * time.Second)
	env.ExecuteWorkflow(func(ctx workflow.Context) (bool, error) {
		older := beginTx(ctx, 1) // older than any transaction RunTx begins
		if err := older.Call(ctx, "hotel", booking{Op: "book", Item: "h"}, nil); err != nil {
			return false, err
		}
		committed, err := RunTx(ctx, TxOptions{Attempts: 1}, func(tx *Tx) error {
			return tx.Call(ctx, "hotel", booking{Op: "book", Item: "h"}, nil)
		})
		if !errors.Is(err, ErrConflicts) {
			return false, fmt.Errorf("the younger transaction: committed %v, %v; want it to die", committed, err)
		}
		// A real error stays an error: a booking of an unknown item, outside a transaction.
		if err := Call(ctx, "hotel", booking{Op: "book", Item: "none"}, nil); !IsApplicationError(err) {
			return false, fmt.Errorf("booking an unknown item: %v, want an application error", err)
		}
		return older.End(ctx)
	})
	var committed bool
	if err := env.GetWorkflowResult(&committed); err != nil || !committed {
		t.Fatalf("workflow: committed %v, %v", committed, err)
	}
	conflictLogged, errorLogged := false, false
	for _, line := range logs.texts() {
		errorLogged = errorLogged || (strings.HasPrefix(line, "ERROR") && strings.Contains(line, ErrTypeApplication))
		mentions := strings.Contains(line, "wait-die") || strings.Contains(line, ErrTypeTxConflict)
		if mentions && strings.HasPrefix(line, "ERROR") {
			t.Errorf("a wait-die conflict logged as an error: %s", line)
		}
		conflictLogged = conflictLogged || (mentions && strings.HasPrefix(line, "INFO"))
	}
	if !errorLogged {
		t.Errorf("the application error was not logged as an error:\n%s", strings.Join(logs.texts(), "\n"))
	}
	if !conflictLogged {
		t.Errorf("no INFO record of the conflict:\n%s", strings.Join(logs.texts(), "\n"))
	}
}
