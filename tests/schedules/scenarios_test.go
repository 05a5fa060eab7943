package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The default run explores every schedule with at most one preemption, then 500 seeded random
// schedules with up to three; `make test-long` explores every schedule with up to two.
var (
	preemptions = flag.Int("schedules.preemptions", 1, "preemption bound of the systematic exploration")
	limit       = flag.Int("schedules.limit", 0, "most schedules explored systematically per scenario (0: all within the bound)")
	random      = flag.Int("schedules.random", 500, "seeded random schedules per scenario after the systematic ones, with up to 2 more preemptions")
	replay      = flag.String("schedules.replay", "", "run only the schedule with these choices (a violation's, e.g. 0,0,3,1), with -run naming its scenario's test")
)

func readInt(env *ssf.Env, table, key string) (int, error) {
	var v int
	_, err := env.ReadInto(table, key, &v)
	return v, err
}

func increment(env *ssf.Env, table, key string) (int, error) {
	c, err := readInt(env, table, key)
	if err != nil {
		return 0, err
	}
	return c + 1, env.Write(table, key, c+1)
}

func item(o Outcome, ssfName, tableKey string) int {
	var v int
	_ = json.Unmarshal([]byte(o.Items[ssfName+":"+tableKey]), &v)
	return v
}

func resultInt(o Outcome) (int, error) {
	if !o.Known {
		return 0, errors.New("the instance's result is unknown")
	}
	if o.Result.Error != "" {
		return 0, fmt.Errorf("the instance failed: %s", o.Result.Error)
	}
	var v int
	if err := json.Unmarshal(o.Result.Output, &v); err != nil {
		return 0, fmt.Errorf("result %s: %v", o.Result.Output, err)
	}
	return v, nil
}

// answered reports whether an execution has answered its client.
func answered(w *World) bool {
	for _, r := range w.Returns {
		if r.Finished && r.Err == nil {
			return true
		}
	}
	return false
}

// atMostOnce is what can be checked of an effect when the instance's result is unknown (no
// execution answered before it was collected, or the request was never accepted): one
// execution performs it at most once.
func atMostOnce(what string, times int) error {
	if times > 1 {
		return fmt.Errorf("%s %d times", what, times)
	}
	return nil
}

func noLocks(o Outcome) error {
	if len(o.Locks) > 0 {
		return fmt.Errorf("locks left held: %v", o.Locks)
	}
	return nil
}

func setK(v int) Event {
	return Event{Name: fmt.Sprintf("k=%d", v), Fire: func(w *World) error { return w.Set(App, map[string]any{"t/k": v}) }}
}

var pause = Event{Name: "pause+gc", Fire: func(w *World) error { return w.Pause() }}

func duplicates(n int, req ssf.Request) []ssf.Request {
	req.Kind, req.InstanceID = ssf.KindInvoke, InstanceID
	out := make([]ssf.Request, n)
	for i := range out {
		out[i] = req
	}
	return out
}

func setup(values map[string]any) func(w *World) error {
	return func(w *World) error { return w.Set(App, values) }
}

// branch reads k and acts only if it is 1: the bank's "check the balance; refuse, or debit".
func branch(env *ssf.Env, _ json.RawMessage) (any, error) {
	v, err := readInt(env, "t", "k")
	if err != nil {
		return nil, err
	}
	if v == 1 {
		if _, err := increment(env, "t", "acted"); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func checkBranch(_ *World, o Outcome) error {
	acted := item(o, App, "t/acted")
	if !o.Known {
		return atMostOnce("acted", acted)
	}
	v, err := resultInt(o)
	if err != nil {
		return err
	}
	want := 0
	if v == 1 {
		want = 1
	}
	if acted != want {
		return fmt.Errorf("the instance returned %d, but acted %d times", v, acted)
	}
	return nil
}

func branchScenario(name string, execs []ssf.Request, crashes int) Scenario {
	return Scenario{Name: name, SSFs: map[string]ssf.Handler{App: branch}, Setup: setup(map[string]any{"t/k": 1}),
		Executions: execs, Events: []Event{setK(2), pause}, Crashes: crashes, Check: checkBranch}
}

// Schedule 1: a result computed from a read no log holds. A reads 1 and pauses; k becomes 2; a
// duplicate delivery B reads 2, has no effect and finishes; A acts on 1.
func TestSchedule1ResultFromUnloggedRead(t *testing.T) {
	explore(t, branchScenario("branch-duplicates", duplicates(2, ssf.Request{}), 0))
}

// Schedule 2: a redelivered asynchronous start is a replay, never a fresh first run: the first
// start reads 1, acts and crashes before done; k becomes 2; the redelivery must replay 1.
func TestSchedule2RedeliveredAsyncStart(t *testing.T) {
	explore(t, branchScenario("branch-async-redelivered", duplicates(2, ssf.Request{Async: true}), 1))
}

// Schedule 3: a transaction participant with no caller (a workflow's tx.Call). Attempt 1
// stalls; attempt 2 reads a = 5, writes nothing and finishes; the coordinator commits; a later
// write sets a = 0; attempt 1 resumes. No lock may stay held, and b is written only by an
// attempt that read 0 in the transaction.
func txParticipantScenario() Scenario {
	tx := ssf.TxContext{ID: "tx1", Start: 1, Mode: ssf.TxExecute}
	sc := Scenario{Name: "tx-participant", Setup: setup(map[string]any{"t/a": 5}),
		SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			a, err := readInt(env, "t", "a")
			if err != nil {
				return nil, err
			}
			if a == 0 {
				if err := env.Write("t", "b", 1); err != nil {
					return nil, err
				}
			}
			return a, nil
		}},
		Executions: duplicates(2, ssf.Request{Tx: &tx}),
		Events: []Event{
			{Name: "commit", Ready: answered, Fire: func(w *World) error {
				end := tx
				end.Mode = ssf.TxCommit
				req, err := ssf.EndTxRequest("end-tx1", App, end)
				if err != nil {
					return err
				}
				res, err := w.RT[App].Handle(context.Background(), req)
				if err == nil {
					err = res.Err()
				}
				return err
			}},
			{Name: "a=0", Ready: func(w *World) bool { return w.Fired("commit") }, Fire: func(w *World) error {
				return w.Set(App, map[string]any{"t/a": 0})
			}},
		},
		Check: func(w *World, o Outcome) error {
			if err := noLocks(o); err != nil {
				return err
			}
			a, err := resultInt(o)
			if err != nil {
				return err
			}
			if b := item(o, App, "t/b"); a != 0 && b != 0 {
				return fmt.Errorf("the participant returned a = %d, but b = %d", a, b)
			}
			return nil
		}}
	return sc
}

func TestSchedule3ParticipantLockAfterCommit(t *testing.T) { explore(t, txParticipantScenario()) }

// Schedule 4: a workflow's Spawn (an asynchronous instance its holder, the workflow, retries)
// must finish after a crash: each retry replays what the crashed attempt logged.
func heldSpawnScenario() Scenario {
	sc := Scenario{Name: "held-spawn", Setup: setup(map[string]any{"t/k": 1}),
		SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			v, err := readInt(env, "t", "k")
			if err != nil {
				return nil, err
			}
			return v, env.Write("t", "out", v)
		}},
		Executions: duplicates(2, ssf.Request{Async: true, Holder: "workflow"}),
		Hold:       func(context.Context, string) (bool, error) { return true, nil },
		Events:     []Event{setK(2)},
		Crashes:    1,
		Check: func(w *World, o Outcome) error {
			if !o.Known {
				// The holder retries until the instance finishes: one more attempt must.
				res, err := w.RT[App].Handle(context.Background(), duplicates(1, ssf.Request{Async: true, Holder: "workflow"})[0])
				if err != nil {
					return fmt.Errorf("a retry after the schedule failed: %w", err)
				}
				o.Result, o.Known = res, true
			}
			v, err := resultInt(o)
			if err != nil {
				return err
			}
			if out := item(o, App, "t/out"); out != v {
				return fmt.Errorf("returned %d, wrote %d", v, out)
			}
			return nil
		}}
	return sc
}

func TestSchedule4HeldSpawnFinishes(t *testing.T) { explore(t, heldSpawnScenario()) }

// Schedule 5: a straggler paused inside a write (between its scan and its conditional update)
// past T must not apply the write again after the rows that logged it were collected: the
// final value is the last write of the clients that wrote after the instance finished.
func stragglerWriteScenario() Scenario {
	sc := Scenario{Name: "straggler-write", Setup: setup(map[string]any{"t/k": 0}),
		SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			return nil, env.Write("t", "k", 100)
		}},
		Executions: duplicates(2, ssf.Request{}),
		Events: []Event{
			{Name: "fill", Ready: func(w *World) bool { return !w.Fired("later") }, Fire: func(w *World) error { return w.Set(App, map[string]any{"t/k": 1}) }},
			{Name: "later", Ready: answered, Fire: func(w *World) error {
				for v := 2; v <= 4; v++ {
					if err := w.Set(App, map[string]any{"t/k": v}); err != nil {
						return err
					}
				}
				return nil
			}},
			{Name: "pause+gc", Ready: func(w *World) bool { return w.Fired("later") }, Fire: func(w *World) error { return w.Pause() }},
		},
		Check: func(w *World, o Outcome) error {
			if k := item(o, App, "t/k"); w.Fired("later") && k != 4 {
				return fmt.Errorf("k = %d after later writes ended with 4: a write was applied again", k)
			}
			return nil
		}}
	return sc
}

func TestSchedule5StragglerInsideWrite(t *testing.T) { explore(t, stragglerWriteScenario()) }

// Schedule 6: a delivery that read the intent as unfinished and paused past T, while the
// instance finished, other clients wrote after it and it was collected, must not run the
// handler again. Two earlier writes fill the item's head row, so the instance's write lands in
// a row the collector unlinks once later writes follow it.
func pausedAfterIntentReadScenario() Scenario {
	sc := Scenario{Name: "paused-after-intent-read",
		SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			return increment(env, "t", "n")
		}},
		Setup: func(w *World) error {
			for range 2 {
				if err := w.Set(App, map[string]any{"t/n": 0}); err != nil {
					return err
				}
			}
			return nil
		},
		Executions: duplicates(3, ssf.Request{}),
		Events: []Event{pause, {Name: "later", Ready: answered, Fire: func(w *World) error {
			for _, v := range []int{10, 11, 12} {
				if err := w.Set(App, map[string]any{"t/n": v}); err != nil {
					return err
				}
			}
			return nil
		}}},
		Check: func(w *World, o Outcome) error {
			n := item(o, App, "t/n")
			if w.Fired("later") {
				if n != 12 {
					return fmt.Errorf("n = %d after later writes ended with 12: the instance acted again", n)
				}
			} else if n > 1 || (o.Known && n != 1) { // unknown: the request may never have been accepted
				return fmt.Errorf("one increment applied %d times", n)
			}
			if v, err := resultInt(o); o.Known && (err != nil || v != 1) {
				return fmt.Errorf("result %d (%v), want 1", v, err)
			}
			return nil
		}}
	return sc
}

func TestSchedule6PausedAfterIntentRead(t *testing.T) { explore(t, pausedAfterIntentReadScenario()) }

func explore(t *testing.T, sc Scenario) {
	t.Helper()
	if *replay != "" {
		var choices []int
		for _, c := range strings.Split(*replay, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil {
				t.Fatalf("-schedules.replay: %q is not a choice", c)
			}
			choices = append(choices, n)
		}
		if err := Replay(sc, choices); err != nil {
			t.Fatal(err)
		}
		return
	}
	rep, err := Explore(sc, *preemptions, *limit, *random)
	t.Logf("%s: %d schedules (longest %d decisions) in %v", sc.Name, rep.Schedules, rep.Longest, rep.Elapsed.Round(1e6))
	if err != nil {
		t.Fatal(err)
	}
}

// call reads k and passes it to a callee that counts its runs: the callee must run once, with
// the value the caller's result reports. After a pause that collects what finished, the keys
// expire: a caller execution that runs after that finds the callee's result in its own log,
// where the callee's garbage collector put it (asking the callee would get ErrKeyExpired).
func TestScheduleSyncInvoke(t *testing.T) {
	sc := Scenario{Name: "sync-invoke", Setup: setup(map[string]any{"t/k": 1}),
		SSFs: map[string]ssf.Handler{
			App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
				v, err := readInt(env, "t", "k")
				if err != nil {
					return nil, err
				}
				out, err := env.SyncInvoke("callee", v)
				if err != nil {
					return nil, err
				}
				var r int
				if err := json.Unmarshal(out, &r); err != nil {
					return nil, err
				}
				return r, env.Write("t", "out", r)
			},
			"callee": func(env *ssf.Env, in json.RawMessage) (any, error) {
				var v int
				if err := json.Unmarshal(in, &v); err != nil {
					return nil, err
				}
				if _, err := increment(env, "t", "runs"); err != nil {
					return nil, err
				}
				return 10 * v, nil
			}},
		Executions: duplicates(2, ssf.Request{}), Crashes: 1,
		Events: []Event{setK(2), pause, {Name: "expire", Ready: func(w *World) bool { return w.Fired(pause.Name) }, Fire: func(w *World) error { return w.ExpireKeys("callee") }}},
		Check: func(w *World, o Outcome) error {
			runs, out := item(o, "callee", "t/runs"), item(o, App, "t/out")
			if runs > 1 || (o.Known && runs != 1) {
				return fmt.Errorf("the callee ran %d times", runs)
			}
			if v, err := resultInt(o); o.Known && (err != nil || v != out || (v != 10 && v != 20)) {
				return fmt.Errorf("result %d (%v), wrote %d", v, err, out)
			}
			return nil
		}}
	explore(t, sc)
}

// spawn starts a callee asynchronously only when it read 1: the callee runs once if the
// result is 1, never otherwise.
func TestScheduleAsyncInvoke(t *testing.T) {
	sc := Scenario{Name: "async-invoke", Setup: setup(map[string]any{"t/k": 1}),
		SSFs: map[string]ssf.Handler{
			App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
				v, err := readInt(env, "t", "k")
				if err != nil {
					return nil, err
				}
				if v == 1 {
					return v, env.AsyncInvoke("callee", v)
				}
				return v, nil
			},
			"callee": func(env *ssf.Env, _ json.RawMessage) (any, error) { return increment(env, "t", "runs") }},
		Executions: duplicates(2, ssf.Request{}), Events: []Event{setK(2), pause},
		Check: func(w *World, o Outcome) error {
			runs := item(o, "callee", "t/runs")
			if !o.Known {
				return atMostOnce("the callee ran", runs)
			}
			v, err := resultInt(o)
			if err != nil {
				return err
			}
			if (v == 1) != (runs == 1) || runs > 1 {
				return fmt.Errorf("returned %d, the callee ran %d times", v, runs)
			}
			return nil
		}}
	explore(t, sc)
}

// condWrite's logged outcome is the one the result reports, with three executions.
func TestScheduleCondWriteThreeExecutions(t *testing.T) {
	sc := Scenario{Name: "condwrite-3", Setup: setup(map[string]any{"t/k": 1}),
		SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
			ok, err := env.CondWrite("t", "k", 3, store.Equal(store.Attr("$"), int64(1)))
			if err != nil {
				return nil, err
			}
			if ok {
				if _, err := increment(env, "t", "acted"); err != nil {
					return nil, err
				}
			}
			return ok, nil
		}},
		Executions: duplicates(3, ssf.Request{}), Events: []Event{setK(2), pause},
		Check: func(w *World, o Outcome) error {
			acted := item(o, App, "t/acted")
			if !o.Known {
				return atMostOnce("acted", acted)
			}
			var ok bool
			if err := json.Unmarshal(o.Result.Output, &ok); err != nil {
				return err
			}
			if (acted == 1) != ok || acted > 1 {
				return fmt.Errorf("condition outcome %v, acted %d times", ok, acted)
			}
			return nil
		}}
	explore(t, sc)
}

// Schedule 7: an instance id used again after its instance was collected answers with the
// collected instance's result (marked replayed) while it is kept, then ErrKeyExpired while the
// id is recognised, never running; once the id is forgotten it runs
// as a new instance with all its effects, never replaying the old instance's log entries
// (still in the DAAL's head row).
func TestSchedule7ReusedIDAfterCollection(t *testing.T) { reusedIDAfterCollection(t, nil) }

func reusedIDAfterCollection(t *testing.T, tables func(string) *store.Table) {
	sc := Scenario{Tables: tables, SSFs: map[string]ssf.Handler{App: func(env *ssf.Env, in json.RawMessage) (any, error) {
		_, err := increment(env, "t", "n")
		return nil, err
	}}}
	w, done, err := newWorld(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ctx := context.Background()
	invoke := func() (ssf.Result, error) {
		return w.RT[App].Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: InstanceID, Input: json.RawMessage(`{}`)})
	}
	n := func() string {
		items, err := w.RT[App].Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(items["t/n"])
	}
	first, err := invoke()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Pause(); err != nil {
		t.Fatal(err)
	}
	again, err := invoke()
	if err != nil || show(again) != show(first) || n() != "1" || first.Replayed || !again.Replayed {
		t.Fatalf("a request for a collected instance answered %s (%v, replayed %v) with n = %s; want the first answer %s (replayed %v), n = 1", show(again), err, again.Replayed, n(), show(first), first.Replayed)
	}
	cfg := w.RT[App].Config()
	w.Clock.Advance(cfg.KeyRetention + time.Second)
	if _, err := w.RT[App].CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := w.RT[App].Intent(ctx, InstanceID); err != nil || !st.Expired {
		t.Fatalf("the key has not expired after KeyRetention: %+v %v", st, err)
	}
	if res, err := invoke(); !errors.Is(err, ssf.ErrKeyExpired) || !errors.Is(err, ssf.ErrInstanceCollected) || n() != "1" {
		t.Fatalf("a request for an expired key answered %s (%v) with n = %s; want ErrKeyExpired and n = 1", show(res), err, n())
	}
	w.Clock.Advance(cfg.ExpiredKeyRetention + time.Second)
	if _, err := w.RT[App].CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := w.RT[App].Intent(ctx, InstanceID); err != nil || st.Exists || st.Collected {
		t.Fatalf("the expired key is still there after ExpiredKeyRetention: %+v %v", st, err)
	}
	if _, err := invoke(); err != nil {
		t.Fatal(err)
	}
	if n() != "2" {
		t.Fatalf("n = %s after two instances with the same id, each incrementing once", n())
	}
}

// incrementC is a transaction's participant: it adds one to t/c.
func incrementC(env *ssf.Env, _ json.RawMessage) (any, error) { return increment(env, "t", "c") }

// txOwnerEndsInline is a transaction's owner, duplicated, with a participant: it reads and
// rewrites k under the lock, calls a callee that counts in the transaction, and ends the
// transaction in its own instance (its last steps: the commit of k, then the end of the callee's
// part). Whatever the interleaving, crash and pause: the commit happens once, all or nothing
// across both SSFs, and no lock stays held. rowCapacity sizes the DAAL rows.
func txOwnerEndsInline(name string, rowCapacity int) Scenario {
	return Scenario{Name: name, Setup: setup(map[string]any{"t/k": 1}), RowCapacity: rowCapacity,
		SSFs: map[string]ssf.Handler{
			App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
				if err := env.BeginTx(); err != nil {
					return nil, err
				}
				v, err := readInt(env, "t", "k")
				if err != nil {
					return nil, err
				}
				if err := env.Write("t", "k", v+10); err != nil {
					return nil, err
				}
				if _, err := env.SyncInvoke("callee", nil); err != nil {
					return nil, err
				}
				committed, err := env.EndTx()
				if err != nil || !committed {
					return nil, fmt.Errorf("committed %v: %v", committed, err)
				}
				return v, nil
			},
			"callee": incrementC},
		Executions: duplicates(2, ssf.Request{}), Events: []Event{pause}, Crashes: 1,
		Check: func(w *World, o Outcome) error {
			if err := noLocks(o); err != nil {
				return err
			}
			k, c := item(o, App, "t/k"), item(o, "callee", "t/c")
			if (k == 11) != (c == 1) || k != 1 && k != 11 || c > 1 {
				return fmt.Errorf("k = %d and c = %d: the commit was not all or nothing, or not once", k, c)
			}
			if v, err := resultInt(o); o.Known && (err != nil || v != 1 || k != 11) {
				return fmt.Errorf("result %d (%v) with k = %d", v, err, k)
			}
			return nil
		}}
}

// With rows of two entries the callee's lock step and write fill its row, so its end commits
// step by step (a successor row first).
func TestScheduleTxOwnerEndsInline(t *testing.T) {
	explore(t, txOwnerEndsInline("tx-owner-ends-inline", 0))
}

// With room in the row, the callee's end is one all-or-nothing batch on mem:// (its intent
// created done, its commit as a swap on the row its write left): the batch against every other
// step, duplicate, crash and pause.
func TestScheduleTxEndInOneBatch(t *testing.T) {
	explore(t, txOwnerEndsInline("tx-end-in-one-batch", 8))
}

// A transaction whose owner is itself called (its intent created by its first flush, marked as
// holding locks there, before it calls its participant): duplicated callers, a crash
// and a pause anywhere; the commit happens once, all or nothing, and no lock stays held.
func TestScheduleTxCalledOwner(t *testing.T) {
	sc := Scenario{Name: "tx-called-owner", Setup: setup(map[string]any{}),
		SSFs: map[string]ssf.Handler{
			App: func(env *ssf.Env, _ json.RawMessage) (any, error) {
				out, err := env.SyncInvoke("owner", nil)
				if err != nil {
					return nil, err
				}
				var committed bool
				return committed, json.Unmarshal(out, &committed)
			},
			"owner": func(env *ssf.Env, _ json.RawMessage) (any, error) {
				if err := env.BeginTx(); err != nil {
					return nil, err
				}
				if _, err := env.SyncInvoke("callee", nil); err != nil {
					return nil, err
				}
				return env.EndTx()
			},
			"callee": incrementC},
		Executions: duplicates(2, ssf.Request{}), Events: []Event{pause}, Crashes: 1,
		Check: func(w *World, o Outcome) error {
			if err := noLocks(o); err != nil {
				return err
			}
			c := item(o, "callee", "t/c")
			if c > 1 {
				return fmt.Errorf("c = %d: the callee's part committed more than once", c)
			}
			if o.Known && (string(o.Result.Output) != "true" || c != 1) {
				return fmt.Errorf("result %s (%v) with c = %d: want the transaction committed once", o.Result.Output, o.Result.Err(), c)
			}
			return nil
		}}
	explore(t, sc)
}
