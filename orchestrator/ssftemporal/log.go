package ssftemporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// Workflows reach the shared log through activities, since workflow code does no I/O of its own.
// Append is exactly once, like an SSF's AppendStep: its token names the workflow run and the
// activity, never the attempt, so an attempt that appended and was retried (its worker died, its
// report was lost) returns the first attempt's SN instead of appending again.

// WorkflowLog is a shared log as workflows use it: the activities RegisterLog registered under
// its name on the workers of the workflow's task queue.
type WorkflowLog struct{ name string }

// LogNamed is the log that RegisterLog registered as name.
func LogNamed(name string) WorkflowLog { return WorkflowLog{name: name} }

// logOp is a log activity's input.
type logOp struct {
	Color        string   `json:"color"`
	Parent       string   `json:"parent,omitempty"`
	SN           uint64   `json:"sn,omitempty"`
	Records      [][]byte `json:"records,omitempty"`
	Participant  string   `json:"participant,omitempty"`
	Note         []byte   `json:"note,omitempty"`
	Participants []string `json:"participants,omitempty"`
	IDs          int      `json:"ids,omitempty"` // as Invocation.IDs
	Run          string   `json:"run,omitempty"`
}

// readResult is ReadNext's result.
type readResult struct {
	Record sharedlog.Record `json:"record"`
	Found  bool             `json:"found"`
}

// The log's operations, as activity names' last part.
const (
	opAddColor  = "AddColor"
	opAppend    = "Append"
	opRead      = "Read"
	opReadNext  = "ReadNext"
	opCheckTail = "CheckTail"
	opArrive    = "Arrive"
	opAwait     = "Await"
)

func logActivityName(log, op string) string { return "sharedlog." + log + "." + op }

// logErrorTypes are the application error types of the log's refusals, which a retry would
// meet again.
var logErrorTypes = map[error]string{
	sharedlog.ErrNoColor:     "sharedlog.NoColor",
	sharedlog.ErrColorExists: "sharedlog.ColorExists",
	sharedlog.ErrTrimmed:     "sharedlog.Trimmed",
	sharedlog.ErrNotFound:    "sharedlog.NotFound",
	sharedlog.ErrInvalid:     "sharedlog.Invalid",
}

// IsLogError reports whether err, returned to a workflow by a WorkflowLog method, is the shared
// log's refusal target (sharedlog.ErrNoColor, ErrTrimmed, ...).
func IsLogError(err, target error) bool {
	typ, ok := logErrorTypes[target]
	return ok && hasType(err, typ)
}

// RegisterLog registers on w the activities that give workflows the shared log l under name
// (LogNamed(name)).
func RegisterLog(w worker.ActivityRegistry, name string, l *sharedlog.Log) {
	ops := map[string]func(context.Context, logOp) (any, error){
		opAddColor: func(ctx context.Context, op logOp) (any, error) { return nil, l.AddColor(ctx, op.Color, op.Parent) },
		opAppend: func(ctx context.Context, op logOp) (any, error) {
			info := activity.GetInfo(ctx)
			token := sharedlog.Token("wf", info.WorkflowNamespace, info.WorkflowExecution.ID, instanceRun(op.IDs, op.Run, info.WorkflowExecution.RunID), info.ActivityID)
			return l.AppendOnce(ctx, token, op.Color, op.Records...)
		},
		opRead: func(ctx context.Context, op logOp) (any, error) { return l.Read(ctx, op.Color, op.SN) },
		opReadNext: func(ctx context.Context, op logOp) (any, error) {
			rec, found, err := l.ReadNext(ctx, op.Color, op.SN)
			return readResult{Record: rec, Found: found}, err
		},
		opCheckTail: func(ctx context.Context, op logOp) (any, error) { return l.CheckTail(ctx, op.Color) },
		opArrive: func(ctx context.Context, op logOp) (any, error) {
			return nil, l.Arrive(ctx, op.Color, op.Participant, op.Note)
		},
		// An attempt that times out waiting is retried, and waits again.
		opAwait: func(ctx context.Context, op logOp) (any, error) { return l.Await(ctx, op.Color, op.Participants...) },
	}
	for op, fn := range ops {
		w.RegisterActivityWithOptions(func(ctx context.Context, in logOp) (json.RawMessage, error) {
			out, err := fn(ctx, in)
			for target, typ := range logErrorTypes {
				if errors.Is(err, target) {
					return nil, temporal.NewNonRetryableApplicationError(err.Error(), typ, err)
				}
			}
			if err != nil {
				return nil, err // a store error: retried
			}
			return json.Marshal(out)
		}, activity.RegisterOptions{Name: logActivityName(name, op)})
	}
}

// call runs one of the log's activities and decodes its result into out (nil: discard).
func (wl WorkflowLog) call(ctx workflow.Context, op string, in logOp, out any) error {
	ctx = withOptions(ctx)
	if stableIDs(ctx) {
		in.IDs, in.Run = idsStable, runKey(ctx)
		ctx = withStepID(ctx, "log")
	}
	var raw json.RawMessage
	if err := workflow.ExecuteActivity(ctx, logActivityName(wl.name, op), in).Get(ctx, &raw); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("ssftemporal: decoding the log's %s result %s: %w", op, raw, err)
	}
	return nil
}

// AddColor creates the color child under parent ("" for a top-level color); see
// sharedlog.Log.AddColor.
func (wl WorkflowLog) AddColor(ctx workflow.Context, child, parent string) error {
	return wl.call(ctx, opAddColor, logOp{Color: child, Parent: parent}, nil)
}

// Append appends records to color exactly once and returns the last record's SN.
func (wl WorkflowLog) Append(ctx workflow.Context, color string, records ...[]byte) (uint64, error) {
	var sn uint64
	err := wl.call(ctx, opAppend, logOp{Color: color, Records: records}, &sn)
	return sn, err
}

// Read reads color's record sn.
func (wl WorkflowLog) Read(ctx workflow.Context, color string, sn uint64) (sharedlog.Record, error) {
	var rec sharedlog.Record
	err := wl.call(ctx, opRead, logOp{Color: color, SN: sn}, &rec)
	return rec, err
}

// ReadNext reads color's first record at or after from.
func (wl WorkflowLog) ReadNext(ctx workflow.Context, color string, from uint64) (sharedlog.Record, bool, error) {
	var r readResult
	err := wl.call(ctx, opReadNext, logOp{Color: color, SN: from}, &r)
	return r.Record, r.Found, err
}

// CheckTail returns the SN of color's last record.
func (wl WorkflowLog) CheckTail(ctx workflow.Context, color string) (uint64, error) {
	var sn uint64
	err := wl.call(ctx, opCheckTail, logOp{Color: color}, &sn)
	return sn, err
}

// Arrive records at barrier that participant is done (arriving again is harmless).
func (wl WorkflowLog) Arrive(ctx workflow.Context, barrier, participant string, note []byte) error {
	return wl.call(ctx, opArrive, logOp{Color: barrier, Participant: participant, Note: note}, nil)
}

// Await waits until every one of participants has arrived at barrier and returns their notes.
// Each attempt waits until its StartToCloseTimeout and is then retried, so the workflow waits as
// long as its activity options' retry policy lets it.
func (wl WorkflowLog) Await(ctx workflow.Context, barrier string, participants ...string) (map[string][]byte, error) {
	var notes map[string][]byte
	err := wl.call(ctx, opAwait, logOp{Color: barrier, Participants: participants}, &notes)
	return notes, err
}
