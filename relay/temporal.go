package relay

import (
	"context"
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/workflows"
)

// TemporalStarter starts order workflows on a Temporal client.
type TemporalStarter struct {
	Client client.Client
}

// Start starts "order-<id>". REJECT_DUPLICATE makes a second start of the
// same order fail with "already started", even after the first finished,
// so an order never runs twice.
func (s TemporalStarter) Start(ctx context.Context, in workflows.OrderInput) (bool, error) {
	opts := client.StartWorkflowOptions{
		ID:                                       domain.WorkflowID(in.Order.OrderID),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    workflows.SearchAttributes(in.Order, domain.StatusPending),
		Memo:                                     map[string]any{"summary": workflows.Summary(in.Order, domain.StatusPending)},
		// Where a worker shares this client (dev mode, one process), the
		// first workflow task comes back with the start, saving a round
		// trip through the server; elsewhere the server starts it as usual.
		EnableEagerStart: true,
	}
	_, err := s.Client.ExecuteWorkflow(ctx, opts, workflows.OrderWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
