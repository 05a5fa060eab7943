package faults

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func pass(in *Injector, p ssf.FaultPoint) bool {
	return errors.Is(in.Inject(context.Background(), p), ssf.ErrCrashed)
}

func TestAtCrashesTheKthPointOnlyWhileEnabled(t *testing.T) {
	in := At(3)
	p := ssf.FaultPoint{SSF: "a", Instance: "i", Op: "get"}
	if pass(in, p) || in.Points() != 0 {
		t.Fatal("a disabled injector crashed or counted")
	}
	in.Enable(true)
	var got []bool
	for range 5 {
		got = append(got, pass(in, p))
	}
	if want := []bool{false, false, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("crashes %v, want %v", got, want)
	}
	if in.Points() != 5 || len(in.Crashes()) != 1 {
		t.Fatalf("%d points, %d crashes", in.Points(), len(in.Crashes()))
	}
}

func TestRandomKeepsItsBudgetAndItsSeed(t *testing.T) {
	run := func() []bool {
		in := Random(42, 0.5, 3)
		in.Enable(true)
		var got []bool
		for range 200 {
			got = append(got, pass(in, ssf.FaultPoint{SSF: "a", Instance: "i"}))
		}
		if n := len(in.Crashes()); n != 3 {
			t.Fatalf("%d crashes, want the budget of 3", n)
		}
		return got
	}
	if !slices.Equal(run(), run()) {
		t.Fatal("the same seed crashed different points")
	}
}

func TestCappedSparesCollectorsAndCapsEachInstance(t *testing.T) {
	in := Capped(7, 1, 2)
	in.Enable(true)
	for _, inst := range []string{ssf.CollectorIC, ssf.CollectorGC} {
		if pass(in, ssf.FaultPoint{SSF: "a", Instance: inst}) {
			t.Fatalf("a %s pass crashed", inst)
		}
	}
	crashes := 0
	for range 5 {
		for _, inst := range []string{"i1", "i2"} {
			if pass(in, ssf.FaultPoint{SSF: "a", Instance: inst, Op: "update", After: inst == "i1"}) {
				crashes++
			}
		}
	}
	s := in.Stats()
	if crashes != 4 || s.Total != 4 || s.Points != 10 || s.AfterEffect != 2 || s.BySSF["a"] != 4 || s.ByOp["update"] != 4 {
		t.Fatalf("%d crashes, stats %+v; want 2 per instance over 10 points, 2 after effect", crashes, s)
	}
}
