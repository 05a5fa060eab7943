// Package logtest is the shared log's suite, run on every store: the API, holes from writers that
// stop after reserving, tenant isolation, barriers, exactly-once appends, multi-color atomicity with a crash
// at every step, and linearizability of one color under concurrent appenders (some crashing),
// readers and trimmers, checked by porcupine.
package logtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// Options size the suite for a backend: HoleTimeout, and Appenders, Appends, Readers and
// Reads for the linearizability run (zero: the defaults). The store matrix's rows carry each
// backend's (testtables.Backends).
type Options = testtables.LogOptions

// defaults fills o's zero fields with the defaults.
func defaults(o *Options) {
	if o.HoleTimeout == 0 {
		o.HoleTimeout = 200 * time.Millisecond
	}
	if o.Appenders == 0 {
		o.Appenders, o.Appends, o.Readers, o.Reads = 4, 25, 3, 40
	}
}

// errCrash is what the injected faults return.
var errCrash = errors.New("injected crash")

// Run runs the suite with tables from newTable.
func Run(t suite.T, newTable testtables.Factory, o Options) {
	defaults(&o)
	open := func(t suite.T, tbl *store.Table, tenant string, fault func(string) error) *sharedlog.Log {
		t.Helper()
		l, err := sharedlog.New(tbl, tenant, sharedlog.Options{HoleTimeout: o.HoleTimeout, Poll: 2 * time.Millisecond, Fault: fault})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	suite.Run(t, "API", func(t suite.T) { testAPI(t, open(t, newTable(t, "logapi"), "acme", nil)) })
	suite.Run(t, "Holes", func(t suite.T) { testHoles(t, newTable(t, "logholes"), open, o) })
	suite.Run(t, "Tenants", func(t suite.T) {
		tbl := newTable(t, "logtenants")
		testTenants(t, open(t, tbl, "acme", nil), open(t, tbl, "globex", nil))
	})
	suite.Run(t, "Barrier", func(t suite.T) { testBarrier(t, open(t, newTable(t, "logbarrier"), "acme", nil)) })
	suite.Run(t, "ExactlyOnce", func(t suite.T) { testExactlyOnce(t, open(t, newTable(t, "logonce"), "acme", nil)) })
	suite.Run(t, "MultiColorCrashes", func(t suite.T) { testMultiColorCrashes(t, newTable(t, "logmulti"), open, o) })
	suite.Run(t, "Linearizable", func(t suite.T) { testLinearizable(t, newTable(t, "loglin"), open, o) })
}

type opener func(t suite.T, tbl *store.Table, tenant string, fault func(string) error) *sharedlog.Log

// check fails the test on an error; its methods pass the value on (Go cannot spread a call's
// results into a call with more arguments, so the test travels in the receiver).
type check struct{ t suite.T }

func chk(t suite.T) check { return check{t} }

func (c check) ok(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c check) sn(v uint64, err error) uint64                      { c.t.Helper(); c.ok(err); return v }
func (c check) sns(v []uint64, err error) []uint64                 { c.t.Helper(); c.ok(err); return v }
func (c check) rec(v sharedlog.Record, err error) sharedlog.Record { c.t.Helper(); c.ok(err); return v }
func (c check) strs(v []string, err error) []string                { c.t.Helper(); c.ok(err); return v }
func (c check) report(v sharedlog.CollectReport, err error) sharedlog.CollectReport {
	c.t.Helper()
	c.ok(err)
	return v
}

func testAPI(t suite.T, l *sharedlog.Log) {
	ctx := context.Background()
	if err := l.AddColor(ctx, "orders", "nowhere"); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("AddColor under a missing parent: %v", err)
	}
	for _, c := range [][2]string{{"main", ""}, {"orders", "main"}, {"orders", "main"}} {
		if err := l.AddColor(ctx, c[0], c[1]); err != nil {
			t.Fatalf("AddColor(%s, %s): %v", c[0], c[1], err)
		}
	}
	if err := l.AddColor(ctx, "orders", ""); !errors.Is(err, sharedlog.ErrColorExists) {
		t.Fatalf("AddColor with another parent: %v", err)
	}
	if _, err := l.Append(ctx, "nothing", []byte("x")); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("Append to a missing color: %v", err)
	}
	if tail := chk(t).sn(l.CheckTail(ctx, "orders")); tail != 0 {
		t.Fatalf("tail of an empty color: %d", tail)
	}
	last := chk(t).sn(l.Append(ctx, "orders", []byte("a"), []byte("b"), []byte("c")))
	if last != 3 {
		t.Fatalf("three records end at SN %d, want 3", last)
	}
	if sn := chk(t).sn(l.Append(ctx, "orders", []byte("d"))); sn != 4 {
		t.Fatalf("next append got SN %d, want 4", sn)
	}
	if r := chk(t).rec(l.Read(ctx, "orders", 2)); string(r.Data) != "b" {
		t.Fatalf("Read 2: %q", r.Data)
	}
	if _, err := l.Read(ctx, "orders", 9); !errors.Is(err, sharedlog.ErrNotFound) {
		t.Fatalf("Read beyond the tail: %v", err)
	}
	if r, ok, err := l.ReadNext(ctx, "orders", 3); err != nil || !ok || string(r.Data) != "c" {
		t.Fatalf("ReadNext 3: %+v %v %v", r, ok, err)
	}
	if _, ok, err := l.ReadNext(ctx, "orders", 5); err != nil || ok {
		t.Fatalf("ReadNext beyond the tail: %v %v", ok, err)
	}
	if r, ok, err := l.ReadPrev(ctx, "orders", 100); err != nil || !ok || r.SN != 4 {
		t.Fatalf("ReadPrev from beyond the tail: %+v %v %v", r, ok, err)
	}
	if tail := chk(t).sn(l.CheckTail(ctx, "orders")); tail != 4 {
		t.Fatalf("tail %d, want 4", tail)
	}
	// Subscribe delivers in order and resumes where it stopped.
	var got []string
	stop := errors.New("stop")
	err := l.Subscribe(ctx, "orders", 1, func(r sharedlog.Record) error {
		got = append(got, string(r.Data))
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
	subCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	go func() { _, _ = l.Append(ctx, "orders", []byte("e")) }() // arrives while subscribed
	err = l.Subscribe(subCtx, "orders", 3, func(r sharedlog.Record) error {
		got = append(got, string(r.Data))
		if len(got) == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || strings.Join(got, "") != "abcde" {
		t.Fatalf("subscriptions saw %q (%v), want abcde", got, err)
	}
	// Trim: reads of trimmed SNs fail at once; Collect deletes them.
	if err := l.Trim(ctx, "orders", 99); !errors.Is(err, sharedlog.ErrInvalid) {
		t.Fatalf("Trim beyond the tail: %v", err)
	}
	if err := l.Trim(ctx, "orders", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ctx, "orders", 2); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("Read of a trimmed SN: %v", err)
	}
	if _, _, err := l.ReadNext(ctx, "orders", 1); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("ReadNext from a trimmed SN: %v", err)
	}
	rep := chk(t).report(l.Collect(ctx))
	if rep.RecordsDeleted != 2 {
		t.Fatalf("Collect: %+v, want 2 records deleted", rep)
	}
	if _, err := l.Read(ctx, "orders", 1); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("Read of a collected SN: %v", err)
	}
	if r := chk(t).rec(l.Read(ctx, "orders", 3)); string(r.Data) != "c" {
		t.Fatalf("Read after Collect: %q", r.Data)
	}
	if colors := chk(t).strs(l.Colors(ctx)); strings.Join(colors, ",") != "main,orders" {
		t.Fatalf("colors %v", colors)
	}
}

// A writer that stops after reserving leaves a pending SN: readers wait, then fill it with a
// hole, and a late writer appends again instead of reordering the log.
func testHoles(t suite.T, tbl *store.Table, open opener, o Options) {
	ctx := context.Background()
	crashing := open(t, tbl, "acme", func(p string) error {
		if p == sharedlog.FaultReserved {
			return errCrash
		}
		return nil
	})
	l := open(t, tbl, "acme", nil)
	chk(t).ok(l.AddColor(ctx, "c", ""))
	chk(t).sn(l.Append(ctx, "c", []byte("one")))
	if _, err := crashing.Append(ctx, "c", []byte("lost")); !errors.Is(err, errCrash) {
		t.Fatalf("crashing append: %v", err)
	}
	start := time.Now()
	if _, err := l.Read(ctx, "c", 2); !errors.Is(err, sharedlog.ErrNotFound) {
		t.Fatalf("Read of a dead writer's SN: %v", err)
	}
	if waited := time.Since(start); waited < o.HoleTimeout {
		t.Fatalf("the reader filled the hole after %v, before the hole timeout %v", waited, o.HoleTimeout)
	}
	if sn := chk(t).sn(l.Append(ctx, "c", []byte("three"))); sn != 3 {
		t.Fatalf("append after the hole got SN %d, want 3", sn)
	}
	if r, ok, err := l.ReadNext(ctx, "c", 2); err != nil || !ok || r.SN != 3 {
		t.Fatalf("ReadNext over the hole: %+v %v %v", r, ok, err)
	}
	// A slow writer: held after reserving until a reader has filled its SN.
	release, reserved := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := open(t, tbl, "acme", func(p string) error {
		if p == sharedlog.FaultReserved {
			once.Do(func() { close(reserved); <-release })
		}
		return nil
	})
	result := make(chan uint64, 1)
	go func() {
		sn, err := slow.Append(ctx, "c", []byte("late"))
		if err != nil {
			t.Error(err)
		}
		result <- sn
	}()
	<-reserved
	if _, err := l.Read(ctx, "c", 4); !errors.Is(err, sharedlog.ErrNotFound) {
		t.Fatalf("Read of a slow writer's SN: %v", err)
	}
	close(release)
	sn := <-result
	if sn <= 4 {
		t.Fatalf("the late writer's record got SN %d; SN 4 is a hole", sn)
	}
	if r := chk(t).rec(l.Read(ctx, "c", sn)); string(r.Data) != "late" {
		t.Fatalf("Read %d: %q", sn, r.Data)
	}
	if _, err := l.Read(ctx, "c", 4); !errors.Is(err, sharedlog.ErrNotFound) {
		t.Fatalf("SN 4 after the late write: %v", err)
	}
	if h := l.Stats().HolesFilled; h != 2 {
		t.Fatalf("%d holes filled, want 2", h)
	}
}

// One tenant cannot see, append to or trim another's colors.
func testTenants(t suite.T, a, b *sharedlog.Log) {
	ctx := context.Background()
	chk(t).ok(a.AddColor(ctx, "secrets", ""))
	chk(t).sn(a.Append(ctx, "secrets", []byte("a's")))
	if _, err := b.Read(ctx, "secrets", 1); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("another tenant's Read: %v", err)
	}
	if _, err := b.Append(ctx, "secrets", []byte("b's")); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("another tenant's Append: %v", err)
	}
	if err := b.Trim(ctx, "secrets", 1); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("another tenant's Trim: %v", err)
	}
	if _, _, err := b.ReadNext(ctx, "secrets", 1); !errors.Is(err, sharedlog.ErrNoColor) {
		t.Fatalf("another tenant's ReadNext: %v", err)
	}
	// The same color name is a different log per tenant.
	chk(t).ok(b.AddColor(ctx, "secrets", ""))
	chk(t).sn(b.Append(ctx, "secrets", []byte("b's")))
	if r := chk(t).rec(a.Read(ctx, "secrets", 1)); string(r.Data) != "a's" {
		t.Fatalf("a's record became %q", r.Data)
	}
	if colors := chk(t).strs(b.Colors(ctx)); len(colors) != 1 {
		t.Fatalf("b sees colors %v", colors)
	}
	// The table's collector (what an SSF's garbage collector runs) finds both tenants and
	// deletes what each trimmed, and only that.
	chk(t).sn(a.Append(ctx, "secrets", []byte("a's second")))
	chk(t).ok(a.Trim(ctx, "secrets", 1))
	chk(t).ok(b.Trim(ctx, "secrets", 1))
	rep := chk(t).report(sharedlog.CollectTable(ctx, a.Table(), sharedlog.Options{}))
	if rep.Tenants != 2 || rep.RecordsDeleted != 2 {
		t.Fatalf("CollectTable: %+v, want 2 tenants and 2 records deleted", rep)
	}
	if r := chk(t).rec(a.Read(ctx, "secrets", 2)); string(r.Data) != "a's second" {
		t.Fatalf("a's untrimmed record became %q", r.Data)
	}
	if _, err := sharedlog.New(nil, "a|b", sharedlog.Options{}); !errors.Is(err, sharedlog.ErrInvalid) {
		t.Fatalf("a tenant name with a separator: %v", err)
	}
}

// A barrier orders colors causally: once Await returns, what every participant appended before
// arriving is readable, whatever the order of awaiting and arriving.
func testBarrier(t suite.T, l *sharedlog.Log) {
	ctx := context.Background()
	participants := []string{"m0", "m1", "m2"}
	type awaited struct {
		notes map[string][]byte
		err   error
	}
	done := make(chan awaited, 1)
	go func() {
		notes, err := l.Await(ctx, "stage", participants...)
		done <- awaited{notes, err}
	}()
	var wg sync.WaitGroup
	for _, p := range participants {
		wg.Go(func() {
			if err := l.AddColor(ctx, p, ""); err != nil {
				t.Error(err)
				return
			}
			if _, err := l.Append(ctx, p, []byte(p+"'s output")); err != nil {
				t.Error(err)
				return
			}
			if err := l.Arrive(ctx, "stage", p, []byte(p+" done")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	chk(t).ok(l.Arrive(ctx, "stage", "m1", []byte("m1 again"))) // a re-run participant
	a := <-done
	chk(t).ok(a.err)
	for _, p := range participants {
		if string(a.notes[p]) != p+" done" {
			t.Fatalf("%s's note: %q", p, a.notes[p])
		}
		if r, found, err := l.ReadNext(ctx, p, 1); err != nil || !found || string(r.Data) != p+"'s output" {
			t.Fatalf("after the barrier, %s's color gives %q, %v, %v", p, r.Data, found, err)
		}
	}
	// Awaiting one who never arrives ends with the context, saying who is missing (the wait is
	// long enough for a slow emulator to read the three arrivals first).
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := l.Await(short, "stage", "m0", "m1", "m2", "m3"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "3 of 4") {
		t.Fatalf("Await with a participant missing: %v", err)
	}
	if err := l.Arrive(ctx, "stage", "", nil); !errors.Is(err, sharedlog.ErrInvalid) {
		t.Fatalf("an arrival without a participant: %v", err)
	}
	if _, err := l.Await(ctx, "stage"); !errors.Is(err, sharedlog.ErrInvalid) {
		t.Fatalf("Await of no one: %v", err)
	}
}

// AppendOnce with a token appends once, however often it is retried.
func testExactlyOnce(t suite.T, l *sharedlog.Log) {
	ctx := context.Background()
	chk(t).ok(l.AddColor(ctx, "events", ""))
	first := chk(t).sn(l.AppendOnce(ctx, "step-1", "events", []byte("x"), []byte("y")))
	again := chk(t).sn(l.AppendOnce(ctx, "step-1", "events", []byte("x"), []byte("y")))
	if first != again || first != 2 {
		t.Fatalf("AppendOnce returned %d then %d, want 2 twice", first, again)
	}
	if _, err := l.AppendOnce(ctx, "step-1", "events", []byte("other")); !errors.Is(err, sharedlog.ErrInvalid) {
		t.Fatalf("a token reused for other records: %v", err)
	}
	if tail := chk(t).sn(l.CheckTail(ctx, "events")); tail != 2 {
		t.Fatalf("tail %d after a retried append of two records, want 2", tail)
	}
}

// A multi-color append cut at every step: before its row exists nothing appears; after, every
// part appears exactly once, finished by a retry, by a reader that met a part, or by Collect;
// and a reader that sees one part sees all.
func testMultiColorCrashes(t suite.T, tbl *store.Table, open opener, o Options) {
	ctx := context.Background()
	colors := []string{"red", "green", "blue"}
	setup := open(t, tbl, "acme", nil)
	for _, c := range colors {
		chk(t).ok(setup.AddColor(ctx, c, ""))
	}
	points := []string{sharedlog.FaultMultiCreated, sharedlog.FaultPartReserved, sharedlog.FaultPartWritten}
	run := 0
	for _, point := range points {
		for nth := 1; nth <= 3; nth++ {
			if point == sharedlog.FaultMultiCreated && nth > 1 {
				break
			}
			for _, finisher := range []string{"retry", "reader", "collector"} {
				run++
				id := fmt.Sprintf("m%d", run)
				var parts []sharedlog.Part
				for _, c := range colors {
					parts = append(parts, sharedlog.Part{Color: c, Data: []byte(id + "-" + c)})
				}
				var seen atomic.Int32
				crashing := open(t, tbl, "acme", func(p string) error {
					if p == point && seen.Add(1) == int32(nth) {
						return errCrash
					}
					return nil
				})
				if _, err := crashing.MultiAppend(ctx, id, parts); !errors.Is(err, errCrash) {
					t.Fatalf("%s: crash at %s #%d: %v", id, point, nth, err)
				}
				fresh := open(t, tbl, "acme", nil) // another process: nothing cached
				switch finisher {
				case "retry":
					chk(t).sns(fresh.MultiAppend(ctx, id, parts))
				case "reader":
					// Whatever is visible: if one part is, all are.
					visible := 0
					for _, p := range parts {
						if partVisible(t, fresh, p) {
							visible++
						}
					}
					if visible != 0 && visible != len(parts) {
						t.Fatalf("%s: %d of %d parts visible after a crash at %s #%d", id, visible, len(parts), point, nth)
					}
					if visible == 0 {
						time.Sleep(o.HoleTimeout)
						chk(t).report(fresh.Collect(ctx))
					}
				case "collector":
					time.Sleep(o.HoleTimeout)
					if rep := chk(t).report(fresh.Collect(ctx)); rep.Finished == 0 {
						t.Fatalf("%s: Collect finished nothing after a crash at %s #%d", id, point, nth)
					}
				}
				for _, p := range parts {
					if !partVisible(t, open(t, tbl, "acme", nil), p) {
						t.Fatalf("%s (%s): part %s missing after a crash at %s #%d", id, finisher, p.Color, point, nth)
					}
				}
			}
		}
	}
	// Exactly once: every color holds each run's part once, in the order of the runs.
	check := open(t, tbl, "acme", nil)
	for _, c := range colors {
		var got []string
		for sn := uint64(1); ; sn++ {
			r, ok, err := check.ReadNext(ctx, c, sn)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, string(r.Data))
			sn = r.SN
		}
		var want []string
		for i := 1; i <= run; i++ {
			want = append(want, fmt.Sprintf("m%d-%s", i, c))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("%s holds %v, want %v", c, got, want)
		}
	}
}

// partVisible reports whether the color's last record is the part (runs append in turn, so a
// visible part is its color's last record).
func partVisible(t suite.T, l *sharedlog.Log, p sharedlog.Part) bool {
	t.Helper()
	r, found, err := l.ReadPrev(context.Background(), p.Color, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	return found && bytes.Equal(r.Data, p.Data)
}

// LeaveTrimmed leaves a log in tbl whose trimmed records a collector has yet to delete, for
// tests of the hosts that collect the logs in an SSF's table; it returns how many there are.
func LeaveTrimmed(t suite.T, tbl *store.Table) int {
	t.Helper()
	ctx := context.Background()
	l, err := sharedlog.New(tbl, "hosted", sharedlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chk(t).ok(l.AddColor(ctx, "events", ""))
	chk(t).sn(l.Append(ctx, "events", []byte("a"), []byte("b"), []byte("c")))
	chk(t).ok(l.Trim(ctx, "events", 2))
	return 2
}
