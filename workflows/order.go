// Package workflows holds the order saga. It is deterministic orchestration
// only: every side effect happens in an activity.
package workflows

import (
	"cmp"
	"errors"
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

// VersionUpdates is the change id (workflow.GetVersion) of the saga that
// takes pay and cancel as updates, registers RestoreStock before DeductStock,
// records a payment on a disconnected context and never compensates a
// paid order. Workflows started before it (DefaultVersion) replay their
// recorded command sequence: see docs/design.md §4.5 and README ("Changing
// the workflow").
const VersionUpdates = "pay-cancel-updates"

// VersionLeanSaga is version 2 of the same change id: the saga's first step
// is one local activity, PlaceOrder, which deducts the unit and writes the
// row in one database transaction and tells the buyer, and no step upserts
// the memo any more (the memo's summary is set once, at start; the status is
// the OrderStatus search attribute). An order then costs one marker and one
// visibility update fewer persistence work on its way to AWAITING_PAYMENT
// (docs/performance.md). It reuses VersionUpdates' change id rather than a
// new one because a new change id costs every new workflow one more marker
// and one more TemporalChangeVersion upsert, which is what it saves.
const VersionLeanSaga workflow.Version = 2

// VersionDeadline is version 3 of the same change id: pay and cancel
// decide nothing once the payment deadline has passed, even when they reach
// the workflow in the same workflow task as the timer's firing, whose
// callback would otherwise run after the update's and lose to it (they
// answer with the order's ending instead); and they are
// accepted while the order is being placed, to take effect once it awaits
// payment (a Reset re-delivers a run's accepted updates to a new run that
// starts by placing the order). Only the validators differ (they write no
// history), so the command sequence is version 2's; the version is
// recorded so that workflows started before it keep their behaviour.
const VersionDeadline workflow.Version = 3

// VersionPaidWhilePlacing is version 4: a payment decided while the order
// is being placed (a Reset re-delivers an accepted pay to a run that
// places the order again) survives the workflow's cancellation: the order
// is placed and paid on a disconnected context, where before the
// cancellation ended it CANCELLED and its buyer, told the pay was taken,
// lost it. It adds commands only on that path.
const VersionPaidWhilePlacing workflow.Version = 4

// VersionOneStepEnd is version 5: an order that ends without a sale
// (expired, cancelled, failed) ends in one activity, EndOrder, where it
// took three (FinishOrder, RestoreStock, ReleaseReservation), each with
// its task dispatch and workflow task: the row's end and the unit's return
// are one database transaction, and the Redis release follows in the same
// activity. It stays an ordinary activity retried until it succeeds, as
// the compensations were (docs/design.md §4.4), so a long database outage
// and the Web UI's Reset meet the same retries as before. It changes the
// command sequence of every ending.
const VersionOneStepEnd workflow.Version = 5

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

// Summary is the one-line memo shown for an order in the Web UI. Orders
// start with the summary without a status ("" status), which their memo
// keeps: their status is the OrderStatus search attribute. Workflows
// started before VersionLeanSaga upsert it with the status at every step.
func Summary(ref domain.OrderRef, status domain.Status) string {
	s := fmt.Sprintf("order %d: user %s, sale %d, %d cents", ref.OrderID, ref.UserID, ref.SaleID, ref.AmountCents)
	if status != "" {
		s += ": " + string(status)
	}
	return s
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

// CancelRequest is the payload of the cancel update (and of the cancel
// signal of workflows started before VersionUpdates).
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
			NonRetryableErrorTypes: []string{activities.ErrTypeOutOfStock, activities.ErrTypeInvalidOrder, activities.ErrTypeSaleCancelled},
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
	placeOrder  = "PlaceOrder"
	notify      = "Notify"
)

// a is only used to name activity methods; the worker registers the real one.
var a *activities.Activities

// OrderWorkflow turns an admitted reservation into an order:
//
//	DeductStock → CreateOrder → Notify(AWAITING_PAYMENT) → wait for the pay
//	or cancel update, or the payment timeout → MarkPaid + Notify(PAID)
//
// and on any failure, cancellation or timeout it runs the compensations in
// reverse on a disconnected context (FinishOrder, RestoreStock), releases
// the Redis reservation and tells the buyer.
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
	version := workflow.GetVersion(ctx, VersionUpdates, workflow.DefaultVersion, VersionOneStepEnd)
	o.v1, o.lean, o.strictDeadline = version >= 1, version >= VersionLeanSaga, version >= VersionDeadline
	o.paidWhilePlacing, o.oneStepEnd = version >= VersionPaidWhilePlacing, version >= VersionOneStepEnd
	o.decisions = workflow.NewBufferedChannel(ctx, 1)
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
	return state, err
}

type order struct {
	ref           domain.OrderRef
	state         OrderState
	compensations []func(ctx workflow.Context) error
	// v1 is false for workflows started before VersionUpdates; lean is
	// true for those started at VersionLeanSaga or later, strictDeadline
	// for those started at VersionDeadline or later.
	v1, lean, strictDeadline bool
	// paidWhilePlacing: started at VersionPaidWhilePlacing or later;
	// oneStepEnd: at VersionOneStepEnd or later.
	paidWhilePlacing, oneStepEnd bool
	// deadline is when the payment timer fires; zero until it is set.
	deadline time.Time
	// decided is the outcome chosen while awaiting payment (PAID,
	// CANCELLED or EXPIRED) and reason its reason; empty until then.
	decided domain.Status
	reason  string
	// decisions wakes the wait when an update decides.
	decisions workflow.Channel
	// byUpdate: the decision came from a pay or cancel update, which a
	// Reset re-delivers to the new run. written: the decision is in the
	// database (the row's final status). done is set once the order's
	// final state is recorded.
	byUpdate, written, done bool
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

// deductAndCreate runs the first steps of workflows started before
// VersionLeanSaga: DeductStock and CreateOrder as two local activities,
// then AWAITING_PAYMENT with its memo and its Notify. An order that cannot
// be placed ends here, through end: placed is false, o.state is its final
// state and err end's error.
func (o *order) deductAndCreate(ctx, fctx workflow.Context, restore func(workflow.Context) error) (placed bool, err error) {
	if err := workflow.ExecuteLocalActivity(fctx, deductStock, o.ref).Get(ctx, nil); err != nil {
		// An operator cancelled the sale before this order deducted: the
		// order ends CANCELLED, not FAILED. This changes no command (the
		// same compensations run, only FinishOrder's input and the status
		// differ, which replay does not compare), and no recorded history
		// holds this error, so it needs no workflow.GetVersion gate.
		if isSaleCancelled(err) {
			_, err = o.end(ctx, domain.StatusCancelled, "sale cancelled")
			return false, err
		}
		_, err = o.fail(ctx, err, "deduct stock")
		return false, err
	}
	if !o.v1 {
		o.compensations = append(o.compensations, restore)
	}
	// FinishOrder, CreateOrder's compensation, runs in every unhappy ending
	// (see end), so it needs no entry in the list.
	if err := workflow.ExecuteLocalActivity(fctx, createOrder, o.ref).Get(ctx, nil); err != nil {
		_, err = o.fail(ctx, err, "create order")
		return false, err
	}
	o.set(ctx, domain.StatusAwaitingPayment, "")
	return true, nil
}

// handleUpdates registers pay and cancel. Their validators refuse, without
// writing history, any request the order's state does not allow; the
// handlers decide and then wait until the decision has been carried out.
func (o *order) handleUpdates(ctx workflow.Context) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePay,
		func(ctx workflow.Context) (OrderState, error) {
			return o.decide(ctx, domain.StatusPaid, "")
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context) error { return o.allow("pay") }})
	if err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel,
		func(ctx workflow.Context, req CancelRequest) (OrderState, error) {
			return o.decide(ctx, domain.StatusCancelled, cmp.Or(req.Reason, "cancelled by buyer"))
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, _ CancelRequest) error { return o.allow("cancel") }})
}

// allow says whether pay or cancel may decide the order now.
func (o *order) allow(what string) error {
	// From VersionDeadline on, a decision may also arrive while the order
	// is being placed: the api never sends one then (it answers "still
	// being placed" from the row), but a Reset re-delivers the updates a
	// run had accepted to a new run that starts by placing the order, and
	// a payment the buyer was told about must not be lost. It takes
	// effect once the order awaits payment; an order that cannot be
	// placed answers with its ending.
	placing := o.strictDeadline && o.state.Status == domain.StatusPending
	if (o.state.Status == domain.StatusAwaitingPayment || placing) && o.decided == "" {
		return nil
	}
	status := o.state.Status
	if o.decided != "" && !o.done {
		if !o.byUpdate && !o.written {
			// The timer (or the workflow's cancellation) decided, and the
			// row does not say so yet. A Reset now would start a run that
			// knows nothing of it (a Reset re-delivers updates, not a
			// fired timer) and gives the order a new payment window: the
			// buyer is not told the ending before the database is. The
			// answer carries the row's status.
			return temporal.NewApplicationError(fmt.Sprintf("cannot %s: the order's payment window has closed and it is being ended; read it in a moment", what),
				ErrTypeInvalidState, status)
		}
		status = o.decided // decided, still being carried out
	}
	detail := fmt.Sprintf("cannot %s: the order is %s", what, status)
	if status == domain.StatusPending {
		detail = fmt.Sprintf("cannot %s: the order is still being placed; retry in a moment", what)
	}
	return temporal.NewApplicationError(detail, ErrTypeInvalidState, status)
}

// decide is an update's handler: it takes the decision the validator
// allowed and answers with the state the order ends in.
func (o *order) decide(ctx workflow.Context, status domain.Status, reason string) (OrderState, error) {
	if o.pastDeadline(workflow.Now(ctx)) {
		// The payment timer has fired, or fires in this very task, where
		// its callback would run after this handler: it decides (or a
		// cancellation already under way does), not this request, which
		// learns below how the order ended.
	} else {
		if o.decided == "" {
			o.byUpdate = true
		}
		o.choose(status, reason)
		o.decisions.SendAsync(true)
	}
	// The order's fate no longer depends on this request: wait for it on a
	// context an operator's cancel does not end.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(dctx, func() bool { return o.done }); err != nil {
		return o.state, err
	}
	return o.state, nil
}

// pastDeadline reports whether, at now, the payment deadline has passed
// for a workflow started at VersionDeadline or later.
func (o *order) pastDeadline(now time.Time) bool {
	return o.strictDeadline && !o.deadline.IsZero() && !now.Before(o.deadline)
}

// choose records the first decision; later ones lose.
func (o *order) choose(status domain.Status, reason string) {
	if o.decided == "" {
		o.decided, o.reason = status, reason
	}
}

// awaitDecision waits for a pay or cancel update, the payment timeout or
// the workflow's cancellation, whichever comes first.
func (o *order) awaitDecision(ctx workflow.Context, timeout time.Duration) {
	tctx, stopTimer := workflow.WithCancel(ctx)
	o.deadline = workflow.Now(ctx).Add(timeout)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(o.decisions, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	if !o.v1 {
		// Workflows started before VersionUpdates were paid and cancelled
		// by signal, and their histories may hold such signals.
		sel.AddReceive(workflow.GetSignalChannel(ctx, SignalPay), func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			o.choose(domain.StatusPaid, "")
		})
		sel.AddReceive(workflow.GetSignalChannel(ctx, SignalCancel), func(c workflow.ReceiveChannel, _ bool) {
			var req CancelRequest
			c.Receive(ctx, &req)
			o.choose(domain.StatusCancelled, cmp.Or(req.Reason, "cancelled by buyer"))
		})
	}
	sel.AddFuture(workflow.NewTimer(tctx, timeout), func(f workflow.Future) {
		// A cancelled workflow cancels the timer too: that is a cancellation.
		if f.Get(ctx, nil) == nil {
			o.choose(domain.StatusExpired, "payment timeout")
		} else {
			o.choose(domain.StatusCancelled, "order workflow cancelled")
		}
	})
	sel.Select(ctx)
	stopTimer()
}

// pay records the decided payment. Once decided, a payment is final: it
// is recorded on a disconnected context, so an operator cancelling the
// workflow meanwhile cannot turn it into a compensation.
func (o *order) pay(ctx workflow.Context) (OrderState, error) {
	if o.v1 {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	pctx := workflow.WithActivityOptions(ctx, compensationOptions)
	if err := workflow.ExecuteActivity(pctx, a.MarkPaid, o.ref).Get(ctx, nil); err != nil {
		return o.fail(ctx, err, "mark paid")
	}
	o.set(ctx, domain.StatusPaid, "")
	return o.state, nil
}

// record records a new status in the workflow: the query's state and the
// OrderStatus search attribute (one visibility update, shared with
// anything else upserted in the same workflow task).
func (o *order) record(ctx workflow.Context, status domain.Status, reason string) {
	o.state = OrderState{Status: status, Reason: reason}
	if err := workflow.UpsertTypedSearchAttributes(ctx, OrderStatusKey.ValueSet(string(status))); err != nil {
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

// end runs the compensations in reverse, records the ending, releases the
// Redis reservation and tells the buyer. It runs on a disconnected context
// so it completes even when the workflow has been cancelled.
func (o *order) end(ctx workflow.Context, status domain.Status, reason string) (OrderState, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	cctx := workflow.WithActivityOptions(dctx, compensationOptions)
	// FinishOrder compensates the last forward step, CreateOrder, so it
	// runs first. It also writes the row of an order that never got one, so
	// every admitted order ends in a final status in the database.
	finish := activities.FinishInput{Ref: o.ref, Status: status, Reason: reason}
	if o.oneStepEnd {
		// The row's end, the unit's return and the release in one
		// activity (EndOrder); the registered RestoreStock is part of it.
		var final domain.Status
		if err := workflow.ExecuteActivity(cctx, a.EndOrder, finish).Get(cctx, &final); err != nil {
			return o.state, err // unreachable with unlimited retries
		}
		o.written = true
		switch {
		case final == domain.StatusPaid:
			reason = "" // the row says the buyer paid: that sale stands, unit and all
		case final != status:
			reason = "the order had already ended " + string(final) // see below
		}
		o.set(dctx, final, reason)
		return o.state, nil
	}
	if !o.v1 {
		if err := workflow.ExecuteActivity(cctx, a.CancelOrder, finish).Get(cctx, nil); err != nil {
			return o.state, err // unreachable with unlimited retries
		}
		o.written = true
	} else {
		var final domain.Status
		if err := workflow.ExecuteActivity(cctx, a.FinishOrder, finish).Get(cctx, &final); err != nil {
			return o.state, err // unreachable with unlimited retries
		}
		o.written = true
		if final == domain.StatusPaid {
			// The row says the buyer paid: that sale stands, and its unit
			// is neither restored nor released.
			o.set(dctx, domain.StatusPaid, "")
			return o.state, nil
		}
		if final != status {
			// The row had ended already, another way: this run was reset
			// to before that end, or the reconciler ended the order while
			// its workflow was closed. The row is the truth the buyer was
			// told; the compensations below find their work done.
			status, reason = final, "the order had already ended "+string(final)
		}
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

// isSaleCancelled reports whether a forward step was refused because an
// operator cancelled the order's sale.
func isSaleCancelled(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypeSaleCancelled
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
