package workflows

import (
	"cmp"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/domain"
)

// How pay, cancel, the payment timer and an operator's cancel decide an
// order awaiting payment: once, inside the workflow, whichever comes first.

// handleUpdates registers pay and cancel. Their validators refuse, without
// writing history, any request the order's state does not allow; the
// handlers decide and then wait until the decision has been carried out.
func (o *order) handleUpdates(ctx workflow.Context) error {
	// The pay request is optional: pays sent before it existed carry none.
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePay,
		func(ctx workflow.Context, req PayRequest) (OrderState, error) {
			if o.provider != nil {
				return o.startPayment(ctx, req) // payments.go: the provider decides
			}
			return o.decide(ctx, domain.StatusPaid, "")
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, PayRequest) error { return o.allow("pay") }})
	if err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel,
		func(ctx workflow.Context, req CancelRequest) (OrderState, error) {
			reason := cmp.Or(req.Reason, "cancelled by buyer")
			if o.provider != nil {
				return o.cancelPayment(ctx, reason) // payments.go: cancelled at the provider first
			}
			return o.decide(ctx, domain.StatusCancelled, reason)
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
		o.receiveSignals(ctx, sel)
	}
	atDeadline := false
	sel.AddFuture(workflow.NewTimer(tctx, timeout), func(f workflow.Future) {
		// A cancelled workflow cancels the timer too: that is a cancellation.
		switch {
		case f.Get(ctx, nil) != nil:
			o.choose(domain.StatusCancelled, "order workflow cancelled")
		case o.provider.pending() != nil:
			// A payment may be under way at the provider: it is asked
			// first (payments.go, settleDeadline).
			atDeadline = true
		default:
			o.choose(domain.StatusExpired, "payment timeout")
		}
	})
	sel.Select(ctx)
	stopTimer()
	if atDeadline && o.decided == "" {
		o.settleDeadline(ctx)
	}
}
