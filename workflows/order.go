// Package workflows holds the order saga. It is deterministic orchestration
// only: every side effect happens in an activity.
package workflows

import (
	"fmt"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// TaskQueue is where order workflows and their activities run.
const TaskQueue = "seckill-orders"

// Signal and query names of OrderWorkflow.
const (
	SignalPay    = "pay"
	SignalCancel = "cancel"
	QueryStatus  = "status"
)

// DefaultPaymentTimeout is how long a buyer has to pay.
const DefaultPaymentTimeout = 15 * time.Minute

// Search attributes, so the Temporal Web UI can list and filter orders.
var (
	SaleIDKey      = temporal.NewSearchAttributeKeyKeyword("SaleId")
	UserIDKey      = temporal.NewSearchAttributeKeyKeyword("UserId")
	OrderStatusKey = temporal.NewSearchAttributeKeyKeyword("OrderStatus")
)

// SearchAttributes returns the search attributes of an order in status.
func SearchAttributes(ref domain.OrderRef, status domain.Status) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		SaleIDKey.ValueSet(strconv.FormatInt(ref.SaleID, 10)),
		UserIDKey.ValueSet(ref.UserID),
		OrderStatusKey.ValueSet(string(status)),
	)
}

// Summary is the one-line memo shown for an order in the Web UI.
func Summary(ref domain.OrderRef, status domain.Status) string {
	return fmt.Sprintf("order %d: user %s, sale %d, %d cents: %s", ref.OrderID, ref.UserID, ref.SaleID, ref.AmountCents, status)
}

// OrderInput starts an order saga.
type OrderInput struct {
	Order domain.OrderRef
	// ReservedAt is when Redis admitted the order.
	ReservedAt time.Time
	// PaymentTimeout is how long the buyer has to pay; 0 means
	// DefaultPaymentTimeout.
	PaymentTimeout time.Duration
}

// OrderState is what the status query answers and the workflow returns.
type OrderState struct {
	Status domain.Status
	Reason string
}

// CancelRequest is the payload of the cancel signal.
type CancelRequest struct {
	Reason string
}

// Activity options. The forward steps and Notify are short database and
// Redis calls, so they run as local activities: inside the workflow task,
// without a round trip through the Temporal server each, which is where a
// saga's time goes. They retry infrastructure errors with backoff for a
// bounded time, then the saga compensates. Compensations are ordinary
// activities that retry until they succeed, because a unit that is never
// given back is lost.
var (
	forwardOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeOutOfStock, activities.ErrTypeInvalidOrder},
		},
	}
	compensationOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    0, // until it succeeds
		},
	}
	// A lost push is not a lost result: the buyer's socket gets a snapshot
	// of their orders on connect. So Notify gives up after a few tries.
	notifyOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumAttempts:    5,
		},
	}
)

// Local activities are called by name, so the worker runs the registered
// *activities.Activities, which holds the database and Redis clients.
const (
	deductStock = "DeductStock"
	createOrder = "CreateOrder"
	notify      = "Notify"
)

// a is only used to name activity methods; the worker registers the real one.
var a *activities.Activities

// OrderWorkflow turns an admitted reservation into an order:
//
//	DeductStock → CreateOrder → Notify(AWAITING_PAYMENT) → wait for pay, cancel
//	or the payment timeout → MarkPaid + Notify(PAID)
//
// and on any failure, cancellation or timeout it runs the compensations in
// reverse on a disconnected context (RestoreStock, CancelOrder), releases the
// Redis reservation and tells the buyer.
func OrderWorkflow(ctx workflow.Context, in OrderInput) (OrderState, error) {
	o := &order{ref: in.Order, state: OrderState{Status: domain.StatusPending}}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (OrderState, error) { return o.state, nil }); err != nil {
		return o.state, err
	}
	timeout := in.PaymentTimeout
	if timeout <= 0 {
		timeout = DefaultPaymentTimeout
	}
	pay := workflow.GetSignalChannel(ctx, SignalPay)
	cancel := workflow.GetSignalChannel(ctx, SignalCancel)

	fctx := workflow.WithLocalActivityOptions(ctx, forwardOptions)
	if err := workflow.ExecuteLocalActivity(fctx, deductStock, o.ref).Get(ctx, nil); err != nil {
		return o.fail(ctx, err, "deduct stock")
	}
	o.compensations = append(o.compensations, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, a.RestoreStock, o.ref).Get(ctx, nil)
	})
	// CancelOrder, CreateOrder's compensation, runs in every unhappy ending
	// (see end), so it needs no entry in the list.
	if err := workflow.ExecuteLocalActivity(fctx, createOrder, o.ref).Get(ctx, nil); err != nil {
		return o.fail(ctx, err, "create order")
	}
	o.set(ctx, domain.StatusAwaitingPayment, "")

	var (
		paid      bool
		cancelReq CancelRequest
		cancelled bool
		expired   bool
	)
	tctx, stopTimer := workflow.WithCancel(ctx)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(pay, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); paid = true })
	sel.AddReceive(cancel, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &cancelReq); cancelled = true })
	sel.AddFuture(workflow.NewTimer(tctx, timeout), func(f workflow.Future) {
		// A cancelled workflow cancels the timer too: that is a cancellation.
		if f.Get(ctx, nil) == nil {
			expired = true
		} else {
			cancelled = true
			cancelReq.Reason = "order workflow cancelled"
		}
	})
	sel.Select(ctx)
	stopTimer()

	switch {
	case paid:
		// Payment must not be lost once accepted: retry until recorded.
		pctx := workflow.WithActivityOptions(ctx, compensationOptions)
		if err := workflow.ExecuteActivity(pctx, a.MarkPaid, o.ref).Get(ctx, nil); err != nil {
			return o.fail(ctx, err, "mark paid")
		}
		o.set(ctx, domain.StatusPaid, "")
		return o.state, nil
	case expired:
		return o.end(ctx, domain.StatusExpired, "payment timeout")
	case cancelled:
		reason := cancelReq.Reason
		if reason == "" {
			reason = "cancelled by buyer"
		}
		return o.end(ctx, domain.StatusCancelled, reason)
	}
	return o.end(ctx, domain.StatusFailed, "unreachable")
}

type order struct {
	ref           domain.OrderRef
	state         OrderState
	compensations []func(ctx workflow.Context) error
}

// set records a new status: query state, search attribute, memo, buyer.
func (o *order) set(ctx workflow.Context, status domain.Status, reason string) {
	o.state = OrderState{Status: status, Reason: reason}
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, OrderStatusKey.ValueSet(string(status))); err != nil {
		logger.Warn("upsert search attribute", "err", err)
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{"summary": Summary(o.ref, status)}); err != nil {
		logger.Warn("upsert memo", "err", err)
	}
	nctx := workflow.WithLocalActivityOptions(ctx, notifyOptions)
	in := activities.NotifyInput{Ref: o.ref, Status: status, Reason: reason}
	if err := workflow.ExecuteLocalActivity(nctx, notify, in).Get(ctx, nil); err != nil {
		logger.Warn("notify buyer", "order_id", o.ref.OrderID, "status", status, "err", err)
	}
}

// fail ends the order as FAILED (or CANCELLED if the workflow itself was
// cancelled while a step ran).
func (o *order) fail(ctx workflow.Context, err error, step string) (OrderState, error) {
	if temporal.IsCanceledError(err) {
		return o.end(ctx, domain.StatusCancelled, "order workflow cancelled during "+step)
	}
	return o.end(ctx, domain.StatusFailed, step+": "+rootMessage(err))
}

// end runs the compensations in reverse, records the ending, releases the
// Redis reservation and tells the buyer. It runs on a disconnected context
// so it completes even when the workflow has been cancelled.
func (o *order) end(ctx workflow.Context, status domain.Status, reason string) (OrderState, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	cctx := workflow.WithActivityOptions(dctx, compensationOptions)
	// CancelOrder compensates the last forward step, CreateOrder, so it runs
	// first. It also writes the row of an order that never got one, so every
	// admitted order ends in a final status in the database.
	finish := activities.FinishInput{Ref: o.ref, Status: status, Reason: reason}
	if err := workflow.ExecuteActivity(cctx, a.CancelOrder, finish).Get(cctx, nil); err != nil {
		return o.state, err // unreachable with unlimited retries
	}
	for i := len(o.compensations) - 1; i >= 0; i-- {
		if err := o.compensations[i](cctx); err != nil {
			return o.state, err
		}
	}
	// Redis gets the unit back last: until then it holds fewer units than
	// the database, the side on which nothing can be oversold.
	if err := workflow.ExecuteActivity(cctx, a.ReleaseReservation, o.ref).Get(cctx, nil); err != nil {
		return o.state, err
	}
	o.set(dctx, status, reason)
	return o.state, nil
}

// rootMessage is the message of the innermost error, which is the one that
// says what went wrong (not "activity error").
func rootMessage(err error) string {
	for {
		next := unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

func unwrap(err error) error {
	u, ok := err.(interface{ Unwrap() error })
	if !ok {
		return nil
	}
	return u.Unwrap()
}

// SearchAttributeTypes are the custom search attributes a namespace needs
// before order workflows can start.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	SaleIDKey.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	UserIDKey.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	OrderStatusKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}
