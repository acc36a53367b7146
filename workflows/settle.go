package workflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
)

// PaymentSettleWorkflowName is the registered name of
// PaymentSettleWorkflow.
const PaymentSettleWorkflowName = "PaymentSettleWorkflow"

// SettleWorkflowID is the id of the PaymentSettleWorkflow of one payment:
// one per payment, started with WorkflowIDReusePolicy RejectDuplicate, so a
// repeated notification starts nothing more.
func SettleWorkflowID(provider, paymentID string) string {
	return "payment-" + provider + "-" + paymentID
}

// SettleUnknownOrder is the change id (workflow.GetVersion) of the refund
// of a capture whose order the database does not know: before it (version
// DefaultVersion) PaymentSettleWorkflow did nothing with one.
const SettleUnknownOrder = "settle-unknown-order"

// StartSettle starts the PaymentSettleWorkflow of ev's payment, as the
// notification endpoint does for an event whose order's workflow has
// closed and the reconciliation for a capture no order kept. started is
// false when the payment's settle workflow runs or has completed already:
// that one has taken this event's place. One that failed, or that an
// operator terminated or cancelled, does not block the payment: a new run
// starts, so money a stopped settlement held is refunded after all. What
// the buyer's client needed to pay (a hosted page's URL, the capability to
// pay; a client secret) is no settlement's business, and is kept out of
// the history.
func StartSettle(ctx context.Context, tc client.Client, ev PaymentEvent) (started bool, _ error) {
	ev.Payment = ev.Payment.WithoutClientAction()
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    SettleWorkflowID(ev.Provider, ev.Payment.ID),
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		// Failing, not joining: the event is settled by the run there is.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, PaymentSettleWorkflowName, ev)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &already):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("start settling payment %s of order %d: %w", ev.Payment.ID, ev.Payment.OrderID, err)
	}
	return true, nil
}

// Settlement is what a PaymentSettleWorkflow did.
type Settlement string

const (
	// SettleKept: the order is PAID by this payment; nothing to do.
	SettleKept Settlement = "kept"
	// SettleRefunded: the capture was refunded (and recorded on the row,
	// if its order has one).
	SettleRefunded Settlement = "refunded"
	// SettleRecorded: a refund the provider reported was recorded.
	SettleRecorded Settlement = "recorded"
	// SettleNothing: nothing to do (a refund recorded already, a payment
	// neither captured nor refunded, a refund of an unknown order, a
	// refund the provider refused).
	SettleNothing Settlement = "nothing"
)

// PaymentSettleWorkflow settles a payment event that arrived after its
// order's workflow had closed (the api starts it when the order's workflow
// refuses the signal), or a capture the reconciliation of the provider's
// records found no order kept (reconcile.Reconciler.Payments;
// docs/design.md §4.10): the durable refund of money that came too late.
// A capture the order's row does not say paid it is refunded
// (RefundPayment: once at the provider by its key, recorded on the row)
// and the buyer told, and so is a capture of an order the database does
// not know (no row, no buyer); a refund the provider reports is recorded
// on the row if the row has none.
//
// It runs on a context its cancellation does not end: a refund is a
// compensation, and the Web UI's Cancel on the workflow must not leave the
// money with the shop (an activity cancelled mid-read would also read as
// an unknown order). Terminate still ends it.
func PaymentSettleWorkflow(ctx workflow.Context, ev PaymentEvent) (Settlement, error) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	logger := workflow.GetLogger(ctx)
	rctx := workflow.WithActivityOptions(ctx, compensationOptions)
	var row activities.OrderPayment
	if err := workflow.ExecuteActivity(rctx, a.ReadOrderPayment, ev.Payment.OrderID).Get(ctx, &row); err != nil {
		// An order the database does not know (ReadOrderPayment retries
		// anything else). Its capture is no order's money: refunded, once
		// (the workflow's id is the payment's), whether the notification
		// or the reconciliation of the provider's records brought it here.
		if ev.Payment.State != payment.Captured ||
			workflow.GetVersion(ctx, SettleUnknownOrder, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			logger.Error("payment of an unknown order", "order_id", ev.Payment.OrderID, "payment_id", ev.Payment.ID, "err", err)
			return SettleNothing, nil
		}
		return refundUnknown(ctx, ev)
	}
	switch {
	case ev.Refund != nil || ev.Payment.State == payment.Refunded:
		if row.RefundID != "" {
			return SettleNothing, nil
		}
		in := activities.RecordRefundInput{OrderID: row.Ref.OrderID, Provider: ev.Provider, PaymentID: ev.Payment.ID,
			Reason: "refunded at the payment provider"}
		if ev.Refund != nil {
			in.RefundID = ev.Refund.ID
		}
		if in.RefundID == "" {
			in.RefundID = "refund-of-" + ev.Payment.ID
		}
		if err := workflow.ExecuteActivity(rctx, a.RecordRefund, in).Get(ctx, nil); err != nil {
			return SettleNothing, err
		}
		return SettleRecorded, nil
	case ev.Payment.State != payment.Captured:
		return SettleNothing, nil
	case row.Status == domain.StatusPaid && row.PaymentID == ev.Payment.ID:
		return SettleKept, nil
	case row.Status.Refunded() && row.PaymentID == ev.Payment.ID:
		// An operator refunded the order's payment (OrderRefundWorkflow,
		// under the same refund key): a repeated capture event finds it
		// done.
		return SettleNothing, nil
	}
	reason, class := "late: the order had ended "+string(row.Status), activities.RefundLate
	switch {
	case row.Status == domain.StatusPaid && row.PaymentID != "":
		reason, class = "a second capture: the order was paid by payment "+row.PaymentID, activities.RefundSecondCapture
	case !row.Status.Final():
		reason = fmt.Sprintf("late: the order's workflow had closed (the order is %s)", row.Status)
	}
	logger.Warn("refunding a capture that came after the order's workflow closed", "order_id", row.Ref.OrderID,
		"payment_id", ev.Payment.ID, "reason", reason)
	in := activities.RefundInput{Ref: row.Ref, Provider: ev.Provider, PaymentID: ev.Payment.ID, Reason: reason, Class: class}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, refundOptions), a.RefundPayment, in).Get(ctx, nil); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrTypePaymentRejected {
			logger.Error("refund refused by the payment provider", "order_id", row.Ref.OrderID, "payment_id", ev.Payment.ID, "err", err)
			return SettleNothing, nil
		}
		return SettleNothing, err
	}
	nctx := workflow.WithLocalActivityOptions(ctx, notifyOptions)
	note := activities.NotifyInput{Ref: row.Ref, Status: row.Status, Reason: "payment " + ev.Payment.ID + " refunded: " + reason,
		RefundedPayment: ev.Payment.ID}
	if err := workflow.ExecuteLocalActivity(nctx, notify, note).Get(ctx, nil); err != nil {
		logger.Warn("notify buyer of a refund", "order_id", row.Ref.OrderID, "payment_id", ev.Payment.ID, "err", err)
	}
	return SettleRefunded, nil
}

// refundUnknown refunds a capture naming an order the database does not
// know: made at the provider under an order id seckill never wrote (the
// provider's account used by something else with seckill's metadata, a
// database restored from before the order). No buyer to tell: the
// provider's refund is the record.
func refundUnknown(ctx workflow.Context, ev PaymentEvent) (Settlement, error) {
	logger := workflow.GetLogger(ctx)
	reason := fmt.Sprintf("no such order: the capture names order %d, which seckill does not know", ev.Payment.OrderID)
	logger.Warn("refunding a capture of an unknown order", "order_id", ev.Payment.OrderID, "payment_id", ev.Payment.ID,
		"provider", ev.Provider)
	in := activities.RefundInput{Ref: domain.OrderRef{OrderID: ev.Payment.OrderID}, Provider: ev.Provider, PaymentID: ev.Payment.ID,
		Reason: reason, Class: activities.RefundUnknownOrder}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, refundOptions), a.RefundPayment, in).Get(ctx, nil); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrTypePaymentRejected {
			logger.Error("refund refused by the payment provider", "order_id", ev.Payment.OrderID, "payment_id", ev.Payment.ID, "err", err)
			return SettleNothing, nil
		}
		return SettleNothing, err
	}
	return SettleRefunded, nil
}
