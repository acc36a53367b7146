package workflows

import (
	"cmp"

	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// The steps only workflows of earlier eras take (versions.go). They stay
// as they ran, so that those workflows replay; new code does not call
// them.

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

// endInSteps is the ending of workflows started before VersionOneStepEnd:
// FinishOrder (CancelOrder before VersionUpdates), then the registered
// compensations in reverse, then the Redis release, each an activity of
// its own, on cctx (disconnected from the workflow's cancellation, as
// dctx).
func (o *order) endInSteps(dctx, cctx workflow.Context, finish activities.FinishInput) (OrderState, error) {
	status, reason := finish.Status, finish.Reason
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

// receiveSignals adds to the wait for a decision the pay and cancel
// signals of workflows started before VersionUpdates, whose histories may
// hold such signals.
func (o *order) receiveSignals(ctx workflow.Context, sel workflow.Selector) {
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
