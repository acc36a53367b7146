// Package workflows holds the order saga. It is deterministic orchestration
// only: every side effect happens in an activity.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// TaskQueue is where order workflows and their activities run.
const TaskQueue = "seckill-orders"

// PaymentTaskQueue is where the calls to a payment provider run (starting,
// cancelling and refunding a payment): a queue of their own, so that the
// server can hold every worker's calls to one rate, the provider's
// (worker.Options.PaymentRate). The queue is not part of a workflow's
// commands' identity: histories recorded before it replay unchanged.
const PaymentTaskQueue = "seckill-payments"

// Update and query names of OrderWorkflow.
const (
	// UpdatePay and UpdateCancel decide an order awaiting payment. The
	// caller waits for the outcome: the order's state once the transition
	// ran, or an ApplicationError of type ErrTypeInvalidState, whose detail
	// is the order's actual status, when the state did not allow it.
	UpdatePay    = "pay"
	UpdateCancel = "cancel"
	QueryStatus  = "status"

	// SignalPay and SignalCancel are how workflows started before
	// VersionUpdates were paid and cancelled; those still accept them.
	SignalPay    = "pay"
	SignalCancel = "cancel"
)

// ErrTypeInvalidState is the ApplicationError type with which pay and
// cancel are refused when the order is not awaiting payment. Its detail is
// the domain.Status the order has, or is already committed to.
const ErrTypeInvalidState = "InvalidState"

// DefaultPaymentTimeout is how long a buyer has to pay.
const DefaultPaymentTimeout = 15 * time.Minute

// OrderInput starts an order saga.
type OrderInput struct {
	Order domain.OrderRef
	// ReservedAt is when Redis admitted the order.
	ReservedAt time.Time
	// PaymentTimeout is how long the buyer has to pay; 0 means
	// DefaultPaymentTimeout.
	PaymentTimeout time.Duration
	// Provider is the payment provider the order pays at ("builtin",
	// "stripe": its Name()), from VersionPayments on (payments.go); ""
	// pays without one, as version 6 did: the pay update decides PAID.
	Provider string `json:",omitempty"`
	// PaymentGrace bounds how long, past the deadline, the unit is held
	// while the provider cannot be reached to cancel a pending payment;
	// 0 means DefaultPaymentGrace.
	PaymentGrace time.Duration `json:",omitempty"`
}

// OrderState is what the status query answers and the workflow returns.
type OrderState struct {
	Status domain.Status
	Reason string
	// Payment is what the buyer's client needs to complete the payment at
	// the provider: set in the pay update's answer of an order paid at a
	// provider (VersionPayments), which stays AWAITING_PAYMENT until the
	// provider says the payment was captured.
	Payment *PaymentAction `json:",omitempty"`
	// PaidAt is when a PAID order was paid, as its row says (MarkPaid's
	// answer): the pay update's answer carries it, so the api answers a
	// pay without reading the row again. Nil when MarkPaid gave no time: a
	// row already PAID at the order's ending, a repeat on a row changed
	// since it was paid (store.RecordPaid), or a MarkPaid recorded before
	// it answered with the time.
	PaidAt *time.Time `json:",omitempty"`
}

// CancelRequest is the payload of the cancel update (and of the cancel
// signal of workflows started before VersionUpdates).
type CancelRequest struct {
	Reason string
}

// OrderWorkflow turns an admitted reservation into an order (at
// latestVersion; earlier eras in versions.go):
//
//	PlaceOrder (the unit and the row, one transaction; the buyer told
//	AWAITING_PAYMENT) → wait for the pay or cancel update, or the payment
//	timeout → MarkPaid (local, in the deciding task; the ordinary activity
//	if that fails) + Notify(PAID)
//
// and on any failure, cancellation or timeout it ends the order on a
// disconnected context in one activity, EndOrder (the row's end and the
// unit's return, then the Redis release), and tells the buyer.
//
// The decision between pay, cancel, the timer and an operator's cancel is
// taken once, inside the workflow: whichever comes first decides, and every
// later request is refused with the decided status. A payment, once
// decided, is recorded whatever happens next, and an ending never
// compensates a paid order.
func OrderWorkflow(ctx workflow.Context, in OrderInput) (OrderState, error) {
	o := &order{ref: in.Order, state: OrderState{Status: domain.StatusPending}}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (OrderState, error) { return o.state, nil }); err != nil {
		return o.state, err
	}
	o.era = eraOf(workflow.GetVersion(ctx, VersionUpdates, workflow.DefaultVersion, latestVersion))
	o.decisions = workflow.NewBufferedChannel(ctx, 1)
	if o.payments && in.Provider != "" && !freeOrder(ctx, in.Order) {
		o.listenPayments(ctx, in)
	}
	if err := o.handleUpdates(ctx); err != nil {
		return o.state, err
	}
	state, err := o.run(ctx, in)
	o.done = true
	// An update accepted in the last workflow task gets its answer before
	// the workflow completes.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if werr := workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) }); werr != nil && err == nil {
		err = werr
	}
	if o.provider != nil {
		// A capture delivered up to the last workflow task is refunded,
		// not lost with the workflow.
		o.settlePayments(dctx)
	}
	return state, err
}

type order struct {
	ref           domain.OrderRef
	state         OrderState
	compensations []func(ctx workflow.Context) error
	era           // what the version it started at decides (versions.go)
	// deadline is when the payment timer fires; zero until it is set.
	deadline time.Time
	// decided is the outcome chosen while awaiting payment (PAID,
	// CANCELLED or EXPIRED) and reason its reason; empty until then.
	decided domain.Status
	reason  string
	// decisions wakes the wait when an update (or a payment) decides.
	decisions workflow.Channel
	// byUpdate: the decision came from a pay or cancel update, or from a
	// payment's signal, which a Reset re-delivers to the new run. written:
	// the decision is in the database (the row's final status). done is
	// set once the order's final state is recorded.
	byUpdate, written, done bool
	// provider is the order's payment at its provider (payments.go); nil
	// for an order paid without one.
	provider *payments
}

func (o *order) run(ctx workflow.Context, in OrderInput) (OrderState, error) {
	timeout := in.PaymentTimeout
	if timeout <= 0 {
		timeout = DefaultPaymentTimeout
	}
	restore := func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, a.RestoreStock, o.ref).Get(ctx, nil)
	}
	// RestoreStock is registered before DeductStock runs: a deduction whose
	// local activity is cancelled may still commit after the workflow moved
	// on, and a restore that finds no deduction leaves a tombstone that
	// makes such a late deduction back off (store.RestoreStock).
	if o.v1 {
		o.compensations = append(o.compensations, restore)
	}
	fctx := workflow.WithLocalActivityOptions(ctx, forwardOptions)
	if o.lean {
		// One local activity, one transaction: the unit and the row, and
		// the buyer told. A refusal left nothing behind but what the
		// registered RestoreStock finds (its tombstone).
		err := workflow.ExecuteLocalActivity(fctx, placeOrder, o.ref).Get(ctx, nil)
		if err != nil && temporal.IsCanceledError(err) && o.paidWhilePlacing && o.decided == domain.StatusPaid {
			// Cancelled while placing an order whose payment is decided:
			// a decided payment is final (§4.4), so the order is placed
			// and paid on a context the cancellation does not end.
			ctx, _ = workflow.NewDisconnectedContext(ctx)
			fctx = workflow.WithLocalActivityOptions(ctx, forwardOptions)
			err = workflow.ExecuteLocalActivity(fctx, placeOrder, o.ref).Get(ctx, nil)
		}
		if err != nil {
			if isSaleCancelled(err) {
				return o.end(ctx, domain.StatusCancelled, "sale cancelled")
			}
			return o.fail(ctx, err, "place order")
		}
		o.record(ctx, domain.StatusAwaitingPayment, "")
	} else if placed, err := o.deductAndCreate(ctx, fctx, restore); !placed {
		return o.state, err
	}

	o.awaitDecision(ctx, timeout)
	if o.decided == domain.StatusPaid {
		return o.pay(ctx)
	}
	return o.end(ctx, o.decided, o.reason)
}

// pay records the decided payment. Once decided, a payment is final: it
// is recorded on a disconnected context, so an operator cancelling the
// workflow meanwhile cannot turn it into a compensation.
func (o *order) pay(ctx workflow.Context) (OrderState, error) {
	if o.v1 {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	// The payment that paid the order is recorded with it (MarkPaidWith);
	// an order paid without a provider runs MarkPaid, as before.
	name, arg := markPaid, any(o.ref)
	if paid := o.provider.paid(); paid != nil {
		name, arg = markPaidWith, activities.PaidInput{Ref: o.ref, Provider: o.provider.name, PaymentID: paid.p.ID}
	}
	var at time.Time
	if o.localPay {
		// In this workflow task, once: the update that decided, the row and
		// the close then take one task. A failure (the database down or
		// slow) is left to the ordinary activity below.
		lctx := workflow.WithLocalActivityOptions(ctx, tryOnceOptions)
		if err := workflow.ExecuteLocalActivity(lctx, name, arg).Get(ctx, &at); err == nil {
			return o.paid(ctx, at), nil
		}
	}
	pctx := workflow.WithActivityOptions(ctx, compensationOptions)
	if err := workflow.ExecuteActivity(pctx, name, arg).Get(ctx, &at); err != nil {
		return o.fail(ctx, err, "mark paid")
	}
	return o.paid(ctx, at), nil
}

// paid records the order PAID and tells the buyer. An order paid without
// a provider answers with the time its row was paid (zero: not known),
// the one thing MarkPaid changed on the row besides its status; one paid
// at a provider does not (its row names the payment too).
func (o *order) paid(ctx workflow.Context, at time.Time) OrderState {
	o.set(ctx, domain.StatusPaid, "")
	if !at.IsZero() && o.provider.paid() == nil {
		o.state.PaidAt = &at
	}
	return o.state
}

// record records a new status in the workflow: the query's state and the
// OrderStatus search attribute (one visibility update, shared with
// anything else upserted in the same workflow task), with, once the
// order's payment is over, the PaymentId in the same upsert.
func (o *order) record(ctx workflow.Context, status domain.Status, reason string) {
	o.state = OrderState{Status: status, Reason: reason}
	attrs := []temporal.SearchAttributeUpdate{OrderStatusKey.ValueSet(string(status))}
	if id := o.provider.searchID(status); id != "" {
		attrs = append(attrs, PaymentIDKey.ValueSet(id))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attribute", "err", err)
	}
}

// set records a new status and tells the buyer; workflows started before
// VersionLeanSaga also upsert the memo with it.
func (o *order) set(ctx workflow.Context, status domain.Status, reason string) {
	o.record(ctx, status, reason)
	logger := workflow.GetLogger(ctx)
	if !o.lean {
		if err := workflow.UpsertMemo(ctx, map[string]any{"summary": Summary(o.ref, status)}); err != nil {
			logger.Warn("upsert memo", "err", err)
		}
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

// end ends the order unsold: it records the ending in the database, gives
// the unit back, releases the Redis reservation and tells the buyer. It
// runs on a disconnected context so it completes even when the workflow
// has been cancelled.
func (o *order) end(ctx workflow.Context, status domain.Status, reason string) (OrderState, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	cctx := workflow.WithActivityOptions(dctx, compensationOptions)
	// The row is ended first (it is written for an order that never got
	// one, so every admitted order ends in a final status in the
	// database), then the unit goes back: the registered RestoreStock is
	// part of EndOrder.
	finish := activities.FinishInput{Ref: o.ref, Status: status, Reason: reason}
	if !o.oneStepEnd {
		return o.endInSteps(dctx, cctx, finish)
	}
	var final domain.Status
	ended := false
	if o.localEnd {
		// In this workflow task, once, as a decided payment is recorded
		// (pay). A failure (the database down or slow) is left to the
		// ordinary activity below, retried until it succeeds.
		lctx := workflow.WithLocalActivityOptions(dctx, tryOnceOptions)
		ended = workflow.ExecuteLocalActivity(lctx, endOrder, finish).Get(lctx, &final) == nil
	}
	if !ended {
		if err := workflow.ExecuteActivity(cctx, a.EndOrder, finish).Get(cctx, &final); err != nil {
			return o.state, err // unreachable with unlimited retries
		}
	}
	o.written = true
	switch {
	case final == domain.StatusPaid:
		reason = "" // the row says the buyer paid: that sale stands, unit and all
	case final != status:
		// The row had ended already, another way: this run was reset to
		// before that end, or the reconciler ended the order while its
		// workflow was closed. The row is the truth the buyer was told.
		reason = "the order had already ended " + string(final)
	}
	o.set(dctx, final, reason)
	return o.state, nil
}
