package schedules

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The schedules of issue 14, each scripted by the boundaries it stops at, so that it means the
// same interleaving on every store, and run on every store the default test run covers. Each
// failed on the code before its fix (see docs/protocol.md). The stores are the matrix's
// (testtables.Backends).

// at holds at the boundary of op (any op if "") on a partition with prefix, before or after.
func at(op, prefix string, after bool) func(ssf.FaultPoint) bool {
	return func(p ssf.FaultPoint) bool {
		return (op == "" || p.Op == op) && p.After == after && strings.HasPrefix(p.Key.Partition, prefix)
	}
}

// then holds at the first boundary where second holds after one where first held.
func then(first, second func(ssf.FaultPoint) bool) func(ssf.FaultPoint) bool {
	seen := false
	return func(p ssf.FaultPoint) bool {
		if seen && second(p) {
			return true
		}
		seen = seen || first(p)
		return false
	}
}

// beforeDone holds before the request that marks the instance done.
func beforeDone(p ssf.FaultPoint) bool {
	return !p.After && p.Key.Partition == "i|"+InstanceID && p.Key.Sort == "intent" && (p.Op == "update" || p.Op == "batch")
}

type regression struct {
	name     string
	scenario func() Scenario
	steps    func() []Step // fresh: predicates keep state
	// noTx: the interleaving stops inside a write, which a store transaction makes one
	// request (SQLite, PostgreSQL): it cannot happen there.
	noTx bool
}

var regressions = []regression{
	{"1-result-from-unlogged-read", func() Scenario { return branchScenario("branch", duplicates(2, ssf.Request{}), 0) },
		func() []Step {
			return []Step{{Exec: 0, Until: at("scan", "d|t|k", true)}, {Event: "k=2"}, {Exec: 1}, {Exec: 0}}
		}, false},
	// Schedule 1 where the item A acts on exists already: A's write finds its tail with a scan,
	// so on PostgreSQL its read-log entry, the write and the commit go in one final batch,
	// which must not commit over B's entry for the read.
	{"1b-result-from-unlogged-read-existing-item", func() Scenario {
		sc := branchScenario("branch-existing", duplicates(2, ssf.Request{}), 0)
		sc.Setup = setup(map[string]any{"t/k": 1, "t/acted": 0})
		return sc
	}, func() []Step {
		return []Step{{Exec: 0, Until: at("scan", "d|t|k", true)}, {Event: "k=2"}, {Exec: 1}, {Exec: 0}}
	}, false},
	{"2-redelivered-async-start", func() Scenario {
		return branchScenario("branch-async", duplicates(2, ssf.Request{Async: true}), 1)
	}, func() []Step {
		return []Step{{Exec: 0, Until: then(at("", "d|t|acted", true), beforeDone)}, {Exec: 0, Crash: true}, {Event: "k=2"}, {Exec: 1}}
	}, false},
	{"3-participant-lock-after-commit", txParticipantScenario, func() []Step {
		return []Step{{Exec: 0, Until: at("update", "x|", false)}, {Exec: 1}, {Event: "commit"}, {Event: "a=0"}, {Exec: 0}}
	}, false},
	{"4-held-spawn-finishes", heldSpawnScenario, func() []Step {
		return []Step{{Exec: 0, Until: then(at("", "d|t|out", true), beforeDone)}, {Exec: 0, Crash: true}, {Event: "k=2"}, {Exec: 1}}
	}, false},
	{"5-straggler-inside-write", stragglerWriteScenario, func() []Step {
		return []Step{{Exec: 0, Until: at("update", "d|t|k", false)}, {Event: "fill"}, {Exec: 1}, {Event: "later"}, {Event: "pause+gc"}, {Exec: 0}}
	}, true},
	{"6-paused-after-intent-read", pausedAfterIntentReadScenario, func() []Step {
		return []Step{{Exec: 0, Until: at("scan", "d|t|n", false)}, {Exec: 1, Until: at("get", "i|", true)}, {Exec: 0}, {Event: "later"}, {Event: "pause+gc"}, {Exec: 1}}
	}, false},
	// A called instance runs before its intent is written (ssf's deferredIntent); it pauses
	// before its first write, and the caller's duplicate calls it again, which writes the
	// intent and pauses before done. The first must lose its creation and replay, not commit
	// its done mark over the other's intent (on PostgreSQL, created done in one commit).
	{"8-deferred-creation-loses", deferredCreationScenario, func() []Step {
		return []Step{{Exec: 0, Until: calleeWrite(false)}, {Exec: 1, Until: calleeWrite(true)}, {Exec: 0}, {Exec: 1}}
	}, false},
	// Schedule 1 with the straggler paused past the garbage collector's bound: A reads 1 and
	// stops at the request that writes acted (where the store allows, its read-log entry goes
	// in that one request: a batch on SQLite and mem://, a final batch on PostgreSQL); k
	// becomes 2; B reads 2 and finishes; the collectors remove the instance's logs; A's one
	// request in flight goes out. Its read's entry finds no row to conflict with, so only a
	// condition on the instance itself can stop the write.
	{"9-straggler-flush-with-write", func() Scenario {
		sc := branchScenario("branch-straggler", duplicates(2, ssf.Request{}), 0)
		sc.Setup = setup(map[string]any{"t/k": 1, "t/acted": 0})
		return sc
	}, func() []Step {
		return []Step{{Exec: 0, Until: func(p ssf.FaultPoint) bool { return !p.After && p.Writes("d|t|acted") }},
			{Event: "k=2"}, {Exec: 1}, {Event: "pause+gc"}, {Exec: 0}}
	}, false},
}

// calleeWrite holds at a write request of the SSF "callee", before or after it.
func calleeWrite(after bool) func(ssf.FaultPoint) bool {
	return func(p ssf.FaultPoint) bool {
		return p.SSF == "callee" && p.After == after && (p.Op == "batch" || p.Op == "update")
	}
}

func deferredCreationScenario() Scenario {
	return Scenario{Name: "deferred-creation", Setup: setup(map[string]any{"t/k": 1}),
		SSFs: map[string]ssf.Handler{
			App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
				v, err := readInt(env, "t", "k")
				if err != nil {
					return nil, err
				}
				return env.SyncInvoke("callee", v)
			},
			"callee": func(env *ssf.Env, in json.RawMessage) (any, error) {
				var v int
				if err := json.Unmarshal(in, &v); err != nil {
					return nil, err
				}
				w, err := readInt(env, "t", "w")
				return 10*v + w, err
			}},
		Executions: duplicates(2, ssf.Request{}),
		Check: func(w *World, o Outcome) error {
			if v, err := resultInt(o); err != nil || v != 10 {
				return fmt.Errorf("result %d (%v), want 10", v, err)
			}
			return nil
		}}
}

func TestRegressionSchedulesOnEveryStore(t *testing.T) {
	for _, st := range testtables.Backends {
		t.Run(st.Name, func(t *testing.T) {
			factory := st.Tables(t)
			tables := func(name string) *store.Table { return factory(t, name) }
			for _, r := range regressions {
				if r.noTx && st.Transactions {
					continue
				}
				t.Run(r.name, func(t *testing.T) {
					sc := r.scenario()
					sc.Tables = tables
					if err := Script(sc, r.steps()); err != nil {
						t.Fatal(err)
					}
				})
			}
			t.Run("7-reused-id-after-collection", func(t *testing.T) { reusedIDAfterCollection(t, tables) })
		})
	}
}
