package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/workflows"
)

// TraceparentMemo is the memo field of an order workflow that holds the
// W3C traceparent of the span that started it, when tracing is on.
const TraceparentMemo = "traceparent"

// TemporalStarter starts order workflows on a Temporal client.
type TemporalStarter struct {
	client client.Client
	// eager asks for eager starts (NewEagerTemporalStarter).
	eager bool

	// The SDK's lazy client fetches the server's capabilities on first use
	// and reads them unlocked when starting a workflow eagerly, which races
	// with a concurrent first use (go.temporal.io/sdk v1.50.0). Starts are
	// therefore serialised until one has reached the server.
	initMu      sync.Mutex
	initialized atomic.Bool
}

// NewTemporalStarter returns a starter on c whose starts the server hands
// to a worker through the task queue.
func NewTemporalStarter(c client.Client) *TemporalStarter { return &TemporalStarter{client: c} }

// NewEagerTemporalStarter returns a starter on c that asks for eager starts:
// the server hands each start's first workflow task back with its answer,
// to a worker of the same client with a free slot, sparing a dispatch
// through the task queue. Use it only where such a worker was started
// before the first start (seckill dev, seckill worker --relay). Without
// one there is nothing to hand back; and the SDK reads the client's
// capabilities unlocked on an eager start, which races with another first
// use of a lazy client, such as a worker starting on it later or a
// handler's first call (go.temporal.io/sdk v1.50.0; firstAlone covers only
// the starter's own starts). A worker's Start loads them first.
func NewEagerTemporalStarter(c client.Client) *TemporalStarter {
	return &TemporalStarter{client: c, eager: true}
}

// Start starts "order-<id>". REJECT_DUPLICATE makes a second start of the
// same order fail with "already started", even after the first finished,
// so an order never runs twice.
func (s *TemporalStarter) Start(ctx context.Context, in workflows.OrderInput) (created bool, err error) {
	err = s.firstAlone(func() error {
		created, err = s.start(ctx, in)
		return err
	})
	return created, err
}

// firstAlone runs start, alone until a start has reached the server.
func (s *TemporalStarter) firstAlone(start func() error) error {
	if s.initialized.Load() {
		return start()
	}
	s.initMu.Lock()
	if s.initialized.Load() {
		// Another start reached the server while this one waited.
		s.initMu.Unlock()
		return start()
	}
	defer s.initMu.Unlock()
	err := start()
	if err == nil {
		s.initialized.Store(true)
	}
	return err
}

func (s *TemporalStarter) start(ctx context.Context, in workflows.OrderInput) (bool, error) {
	opts := client.StartWorkflowOptions{
		ID:                                       domain.WorkflowID(in.Order.OrderID),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    workflows.SearchAttributes(in.Order, domain.StatusPending),
		Memo:                                     map[string]any{"summary": workflows.Summary(in.Order, "")},
		// Where a worker shares this client (NewEagerTemporalStarter), the
		// first workflow task comes back with the start, saving a round
		// trip through the server; elsewhere the server starts it as usual.
		EnableEagerStart: s.eager,
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// The order's trace context, kept with the workflow: the Web UI
		// shows it, and the api links a pay or cancel to the order's trace
		// through it.
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		opts.Memo[TraceparentMemo] = carrier["traceparent"]
	}
	_, err := s.client.ExecuteWorkflow(ctx, opts, workflows.OrderWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return false, s.sameOrder(ctx, in.Order)
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// CollisionError is a start that met an existing order-<id> workflow of
// another order (another sale or buyer): the id was minted twice. The
// intent is not acknowledged as started, since its order has no workflow.
type CollisionError struct {
	Order          domain.OrderRef
	SaleID, UserID string // the existing workflow's
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("order id %d collides: workflow %s belongs to sale %s, user %s, not sale %d, user %s",
		e.Order.OrderID, domain.WorkflowID(e.Order.OrderID), e.SaleID, e.UserID, e.Order.SaleID, e.Order.UserID)
}

// sameOrder checks that the existing workflow of the order's id is this
// order (docs/design.md §5): a repeated start of it (a retry, another
// relay) is acknowledged as done, a collision is a *CollisionError.
func (s *TemporalStarter) sameOrder(ctx context.Context, ref domain.OrderRef) error {
	d, err := s.client.DescribeWorkflowExecution(ctx, domain.WorkflowID(ref.OrderID), "")
	if err != nil {
		return fmt.Errorf("describe existing %s: %w", domain.WorkflowID(ref.OrderID), err)
	}
	fields := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	var sale, user string
	dc := converter.GetDefaultDataConverter()
	if p := fields[workflows.SaleIDKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &sale)
	}
	if p := fields[workflows.UserIDKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &user)
	}
	if sale != strconv.FormatInt(ref.SaleID, 10) || user != ref.UserID {
		return &CollisionError{Order: ref, SaleID: sale, UserID: user}
	}
	return nil
}
