package testenv

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// ResetWorkflow resets the workflow's current run to its first or its last
// completed workflow task, as the Temporal Web UI's Reset does. A run whose
// first task has not completed yet cannot be reset: that is an error.
func ResetWorkflow(ctx context.Context, tc client.Client, workflowID string, first bool) error {
	var point int64
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			point = ev.GetEventId()
			if first {
				break
			}
		}
	}
	if point == 0 {
		return fmt.Errorf("%s has no completed workflow task yet", workflowID)
	}
	_, err := tc.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: workflowID},
		Reason:                    "reset as from the Web UI",
		WorkflowTaskFinishEventId: point,
		RequestId:                 fmt.Sprintf("reset-%s-%d", workflowID, time.Now().UnixNano()),
	})
	if err != nil {
		return fmt.Errorf("reset %s to event %d: %w", workflowID, point, err)
	}
	return nil
}
