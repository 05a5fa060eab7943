package ssftemporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Long steps. An SSF activity that runs long can save its progress in the activity's heartbeat
// details and resume from it when Temporal retries the activity, instead of replaying every
// logged step and redoing every computation between them. Following R-Check, it checkpoints
// when the worker tells it to stop or its deadline nears (ShouldCheckpoint), not periodically:
// a checkpoint costs a flush of the read log and a heartbeat, and most executions never need
// one. A worker killed without notice leaves no checkpoint; the retry then replays from the
// logs, which is slower but just as exactly-once.

// checkpoint is what the heartbeat details hold.
type checkpoint struct {
	Step  int             `json:"step"`
	State json.RawMessage `json:"state"`
}

// ErrCheckpointed is the cause to pass to env.Stop after Checkpoint, to stop early: the
// execution ends unfinished, and Temporal's retry resumes from the checkpoint.
var ErrCheckpointed = errors.New("ssftemporal: stopped at a checkpoint; the retry resumes from it")

// checkpointMargin is how close to its deadline an activity is told to checkpoint: a fifth of
// its timeout, at most this much.
const checkpointMargin = 5 * time.Second

// ShouldCheckpoint reports whether the handler should checkpoint now: the worker is stopping
// (a deployment, a scale-in) or the activity's start-to-close deadline is near.
func ShouldCheckpoint(env *ssf.Env) bool {
	ctx := env.Context()
	if !activity.IsActivity(ctx) {
		return false
	}
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
	}
	info := activity.GetInfo(ctx)
	if info.Deadline.IsZero() {
		return false
	}
	margin := min(checkpointMargin, info.Deadline.Sub(info.StartedTime)/5)
	return time.Until(info.Deadline) < margin
}

// Checkpoint records state (JSON-encodable) with the execution's progress as the activity's
// heartbeat details. Call it between steps, with the state the handler needs to continue from
// exactly there; then stop (return nil, env.Stop(ErrCheckpointed)) or go on.
func Checkpoint(env *ssf.Env, state any) error {
	ctx := env.Context()
	if !activity.IsActivity(ctx) {
		return fmt.Errorf("%w: Checkpoint outside a Temporal activity", ssf.ErrBadInput)
	}
	step, err := env.Progress()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("%w: checkpoint state is not JSON-encodable: %v", ssf.ErrBadInput, err)
	}
	activity.RecordHeartbeat(ctx, checkpoint{Step: step, State: raw})
	return nil
}

// Resume restores the checkpoint an earlier attempt of this activity recorded, if any: it
// decodes the state into state and moves the execution to the checkpoint's step. It reports
// whether there was one; call it first thing in the handler.
func Resume(env *ssf.Env, state any) (bool, error) {
	ctx := env.Context()
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return false, nil
	}
	var cp checkpoint
	if err := activity.GetHeartbeatDetails(ctx, &cp); err != nil {
		return false, fmt.Errorf("ssftemporal: decoding the checkpoint: %w", err)
	}
	if err := json.Unmarshal(cp.State, state); err != nil {
		return false, fmt.Errorf("ssftemporal: decoding the checkpoint's state: %w", err)
	}
	return true, env.ResumeAt(cp.Step)
}
