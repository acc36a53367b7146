package workflows

import (
	"errors"
	"fmt"

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

// Settlement is what a PaymentSettleWorkflow did.
type Settlement string

const (
	// SettleKept: the order is PAID by this payment; nothing to do.
	SettleKept Settlement = "kept"
	// SettleRefunded: the capture was refunded (and recorded on the row).
	SettleRefunded Settlement = "refunded"
	// SettleRecorded: a refund the provider reported was recorded.
	SettleRecorded Settlement = "recorded"
	// SettleNothing: nothing to do (a refund recorded already, a payment
	// neither captured nor refunded, an unknown order).
	SettleNothing Settlement = "nothing"
)

// PaymentSettleWorkflow settles a payment event that arrived after its
// order's workflow had closed (the api starts it when the order's workflow
// refuses the signal; docs/design.md §4.10): the durable refund of money
// that came too late. A capture the order's row does not say paid it is
// refunded (RefundPayment: once at the provider by its key, recorded on the
// row) and the buyer told; a refund the provider reports is recorded on the
// row if the row has none.
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
		// An order the database does not know: the reconciliation of the
		// provider's records finds the capture.
		logger.Error("payment of an unknown order", "order_id", ev.Payment.OrderID, "payment_id", ev.Payment.ID, "err", err)
		return SettleNothing, nil
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
	}
	reason := "late: the order had ended " + string(row.Status)
	switch {
	case row.Status == domain.StatusPaid && row.PaymentID != "":
		reason = "a second capture: the order was paid by payment " + row.PaymentID
	case !row.Status.Final():
		reason = fmt.Sprintf("late: the order's workflow had closed (the order is %s)", row.Status)
	}
	logger.Warn("refunding a capture that came after the order's workflow closed", "order_id", row.Ref.OrderID,
		"payment_id", ev.Payment.ID, "reason", reason)
	in := activities.RefundInput{Ref: row.Ref, Provider: ev.Provider, PaymentID: ev.Payment.ID, Reason: reason}
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
