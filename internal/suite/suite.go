// Package suite lets one test suite run both under `go test` and from `ssfkit conformance`
// against a live backend. Suites take a T — the part of *testing.T they use — and start
// subtests with suite.Run; *testing.T satisfies T as is, and Standalone is a T for running a
// suite in a plain program, collecting a result per (sub)test.
package suite

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// T is what the conformance and runtime suites need of a test.
type T interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	Context() context.Context
	TempDir() string
}

// Run runs f as a subtest of t named name and reports whether it passed.
func Run(t T, name string, f func(T)) bool {
	switch t := t.(type) {
	case *testing.T:
		return t.Run(name, func(t *testing.T) { f(t) })
	case *Standalone:
		return t.run(name, f)
	default:
		panic(fmt.Sprintf("suite.Run: unsupported T %T", t))
	}
}

// Parallel marks t as runnable in parallel with its siblings under go test; a Standalone runs
// its tests one at a time, so there it does nothing.
func Parallel(t T) {
	if t, ok := t.(*testing.T); ok {
		t.Parallel()
	}
}

// Result is the outcome of one test or subtest run by a Standalone.
type Result struct {
	Name     string // slash-separated, like go test's
	Passed   bool
	Duration time.Duration
	Log      string // what the test logged, including its failure messages
}

// Standalone is a T for running suites outside go test. Like testing.T, Fatal ends the calling
// goroutine, so a test must call it only from the goroutine running the test.
type Standalone struct {
	name     string
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	failed   bool
	log      strings.Builder
	cleanups []func()
	report   func(Result)
}

// RunStandalone runs f as a top-level test named name, calling report for every test and
// subtest as it finishes (subtests first), and reports whether f passed.
func RunStandalone(ctx context.Context, name string, f func(T), report func(Result)) bool {
	root := &Standalone{name: "", ctx: ctx, report: report}
	return root.run(name, f)
}

func (s *Standalone) run(name string, f func(T)) bool {
	full := name
	if s.name != "" {
		full = s.name + "/" + name
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sub := &Standalone{name: full, ctx: ctx, cancel: cancel, report: s.report}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				sub.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		f(sub)
	}()
	<-done
	sub.cancel()
	sub.runCleanups()
	res := Result{Name: full, Passed: !sub.Failed(), Duration: time.Since(start), Log: sub.logText()}
	if s.report != nil {
		s.report(res)
	}
	if !res.Passed {
		s.fail()
	}
	return res.Passed
}

func (s *Standalone) runCleanups() {
	for {
		s.mu.Lock()
		if len(s.cleanups) == 0 {
			s.mu.Unlock()
			return
		}
		fn := s.cleanups[len(s.cleanups)-1]
		s.cleanups = s.cleanups[:len(s.cleanups)-1]
		s.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.Errorf("panic in cleanup: %v", r)
				}
			}()
			fn()
		}()
	}
}

func (s *Standalone) fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *Standalone) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Helper implements T; Standalone does not trim call sites.
func (s *Standalone) Helper() {}

// Name implements T.
func (s *Standalone) Name() string { return s.name }

// Logf implements T.
func (s *Standalone) Logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&s.log, format, args...)
	s.log.WriteByte('\n')
}

// Error implements T.
func (s *Standalone) Error(args ...any) { s.Logf("%s", fmt.Sprint(args...)); s.fail() }

// Errorf implements T.
func (s *Standalone) Errorf(format string, args ...any) { s.Logf(format, args...); s.fail() }

// Fatal implements T.
func (s *Standalone) Fatal(args ...any) { s.Error(args...); runtime.Goexit() }

// Fatalf implements T.
func (s *Standalone) Fatalf(format string, args ...any) { s.Errorf(format, args...); runtime.Goexit() }

// Failed implements T.
func (s *Standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Cleanup implements T: functions run last-registered first when the test ends.
func (s *Standalone) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// Context implements T: it is canceled when the test ends, before cleanups run.
func (s *Standalone) Context() context.Context { return s.ctx }

// TempDir implements T: a fresh directory removed when the test ends.
func (s *Standalone) TempDir() string {
	dir, err := os.MkdirTemp("", "ssfkit-conformance-")
	if err != nil {
		s.Fatalf("TempDir: %v", err)
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
