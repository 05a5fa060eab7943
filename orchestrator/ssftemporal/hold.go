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

// holder is the workflow execution an SSF activity instance belongs to (ssf.Request.Holder):
// while it is open, Temporal may retry the activity, even after the instance finished (the
// worker died before reporting the completion), and the retry must find the instance's intent
// to return the same result instead of running again.
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
// keeps a finished activity instance while its workflow execution is open, and for grace after
// it closed (an attempt handed to a worker just before the close may still reach the SSF; use
// the SSF's GCBound). Instances of workflows Temporal no longer knows (past their retention)
// are not held.
func HoldWhileOpen(c client.Client, grace time.Duration) func(ctx context.Context, holder string) (bool, error) {
	return func(ctx context.Context, raw string) (bool, error) {
		var h holder
		if err := json.Unmarshal([]byte(raw), &h); err != nil || h.WorkflowID == "" {
			return false, fmt.Errorf("ssftemporal: holder %q is not a workflow execution", raw)
		}
		resp, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: h.Namespace,
			Execution: &commonpb.WorkflowExecution{WorkflowId: h.WorkflowID, RunId: h.RunID},
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
