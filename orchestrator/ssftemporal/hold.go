package ssftemporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// holder is the workflow an SSF activity instance belongs to (ssf.Request.Holder): while a run
// of it is open, Temporal may retry the activity, even after the instance finished (the worker
// died before reporting the completion), and a reset run may ask for the same instance; they
// must find its intent to return the same result instead of running again. RunID is the run
// that created the instance, for the record.
type holder struct {
	Namespace  string `json:"ns"`
	WorkflowID string `json:"wf"`
	RunID      string `json:"run"`
}

func (h holder) String() string {
	b, _ := json.Marshal(h) // strings only
	return string(b)
}

// HoldWhileOpen is an ssf.Config.Hold for SSFs that run as activities: the garbage collector
// keeps an activity instance while the latest run of its workflow is open (the run that
// created it, or one a reset or a reused id started since), and for grace after it closed (an
// attempt handed to a worker just before the close may still reach the SSF; use the SSF's
// GCBound). Instances of workflows Temporal no longer knows (past their retention) are not
// held. An unfinished instance whose workflow closed is recorded as abandoned (ssf.ErrAbandoned).
func HoldWhileOpen(c client.Client, grace time.Duration) func(ctx context.Context, holder string) (bool, error) {
	return func(ctx context.Context, raw string) (bool, error) {
		var h holder
		if err := json.Unmarshal([]byte(raw), &h); err != nil || h.WorkflowID == "" {
			return false, fmt.Errorf("ssftemporal: holder %q is not a workflow execution", raw)
		}
		resp, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: h.Namespace,
			Execution: &commonpb.WorkflowExecution{WorkflowId: h.WorkflowID}, // the latest run
		})
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			return false, nil
		case err != nil:
			return true, err
		}
		info := resp.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return true, nil
		}
		closed := info.GetCloseTime().AsTime()
		return time.Since(closed) < grace, nil
	}
}
