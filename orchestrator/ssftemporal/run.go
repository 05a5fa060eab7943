package ssftemporal

import (
	"runtime"
	"strconv"
	"sync"
	"weak"

	"go.temporal.io/sdk/workflow"
)

// stableIDsChange marks, in a workflow's history, that its helpers number their steps and
// transactions themselves (withStepID, txID) and name instances by run key. A history recorded
// before (no marker) keeps Temporal's activity ids, the run id and random transaction ids, so
// workflows started by an older ssfkit replay without nondeterminism errors and their
// in-flight activities stay the same SSF instances.
const stableIDsChange = "ssfkit.stable-step-ids"

// stableIDs reports whether this workflow uses stable step and transaction ids.
func stableIDs(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, stableIDsChange, workflow.DefaultVersion, 1) == 1
}

// idsStable is Invocation.IDs (and logOp.IDs) for stable ids; 0 is the legacy scheme.
const idsStable = 1

// instanceRun is the run part of an activity's instance id: the run key under stable ids, the
// run id under the legacy scheme (an invocation without IDs, from an older workflow).
func instanceRun(ids int, run, runID string) string {
	if ids == idsStable {
		return run
	}
	return runID
}

// runKey names the business execution a workflow run belongs to, for the ids of its SSF
// instances: empty for the first run of a workflow id, which a reset (to any point) and a
// start that reuses the id continue, and the run's original id for a run that continues
// another (continue-as-new, cron, a workflow retry), which is a new execution. So a reused id
// or a reset replays the steps the earlier run took instead of taking them again; a new
// business execution needs a new workflow id.
func runKey(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	if info.ContinuedExecutionRunID == "" {
		return ""
	}
	return info.OriginalRunID
}

// counters number what a workflow does through the helpers (SSF calls, transactions), per
// replay of its code: Temporal replays a workflow's code from its start on every worker that
// loads it and in every run a reset creates, so the n-th call is the same call in all of them
// (Temporal's own activity ids are event ids, which a reset shifts). The counts live as long
// as the workflow's Info (one replay), held weakly.
var counters sync.Map // weak.Pointer[workflow.Info] -> *map[string]int

// next returns how many times this replay of the workflow counted kind before.
func next(ctx workflow.Context, kind string) int {
	info := workflow.GetInfo(ctx)
	key := weak.Make(info)
	v, loaded := counters.LoadOrStore(key, &map[string]int{})
	if !loaded {
		runtime.AddCleanup(info, func(k weak.Pointer[workflow.Info]) { counters.Delete(k) }, key)
	}
	m := *v.(*map[string]int) // workflow code runs one coroutine at a time
	n := m[kind]
	m[kind] = n + 1
	return n
}

// withStepID gives the next activity a helper starts an id that is the same in every replay
// and reset of the run: the SSF instance id derives from it.
func withStepID(ctx workflow.Context, kind string) workflow.Context {
	o := workflow.GetActivityOptions(ctx)
	o.ActivityID = kind + "-" + strconv.Itoa(next(ctx, kind))
	return workflow.WithActivityOptions(ctx, o)
}

// txID is the id of the workflow's n-th transaction: the same in every replay and reset of
// the run, and in a start that reuses the workflow id.
func txID(ctx workflow.Context, n int) string {
	info := workflow.GetInfo(ctx)
	return digestID("wftx", info.Namespace, info.WorkflowExecution.ID, runKey(ctx), strconv.Itoa(n))
}
