package workflows

import (
	"strconv"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/store"
)

// OrderRefundWorkflowName is the registered name of OrderRefundWorkflow.
const OrderRefundWorkflowName = "OrderRefundWorkflow"

// RefundWorkflowID is the id of an order's OrderRefundWorkflow: one per
// order, so a repeated request joins the running refund, and one that
// completed is not run again (the api starts it with
// AllowDuplicateFailedOnly: only a refund that failed may be asked again).
func RefundWorkflowID(orderID int64) string { return "refund-" + strconv.FormatInt(orderID, 10) }

// RefundRequest is an operator's refund of a paid order.
type RefundRequest struct {
	OrderID int64 `json:"order_id,string"`
	// Reason is the operator's, recorded as the order's refund_reason.
	Reason string `json:"reason"`
	// Restock asks for the unit to go back on sale; it does only while the
	// sale is open.
	Restock bool `json:"restock"`
	// By is the admin who asked (the token's subject), for the history.
	By string `json:"by,omitempty"`
}

// RefundOutcome is what OrderRefundWorkflow did.
type RefundOutcome struct {
	// Status is the order's: REFUNDED or REFUNDED_RESTOCKED.
	Status domain.Status `json:"status"`
	// Reason says what became of the unit.
	Reason string `json:"reason"`
	// PaymentID and RefundID are the provider's; "" for an order paid
	// without a provider.
	PaymentID string `json:"payment_id,omitempty"`
	RefundID  string `json:"refund_id,omitempty"`
}

// OrderRefundWorkflow refunds a PAID order at an operator's request
// (docs/design.md §4.11). The order's own workflow has closed once the
// order was paid, so the refund is a workflow of its own, durable as the
// saga is: the payment that paid the order is refunded, whole, at its
// provider (RefundPaidPayment, under the payment's refund key: one refund
// per payment whichever path asks), then the row records it and, if asked
// and the sale is still open, the unit goes back on sale exactly once
// (RefundOrder: the database's RESTORE ledger row in the same transaction,
// then the Redis release); the buyer is told. An order paid without a
// provider is recorded refunded without a provider call. An order found
// refunded already is answered as it is; one in any other status than PAID
// fails the run with an InvalidState error whose detail is its status.
func OrderRefundWorkflow(ctx workflow.Context, req RefundRequest) (RefundOutcome, error) {
	logger := workflow.GetLogger(ctx)
	rctx := workflow.WithActivityOptions(ctx, compensationOptions)
	var row activities.OrderPayment
	if err := workflow.ExecuteActivity(rctx, a.ReadOrderPayment, req.OrderID).Get(ctx, &row); err != nil {
		return RefundOutcome{}, err
	}
	out := RefundOutcome{Status: row.Status, PaymentID: row.PaymentID, RefundID: row.RefundID}
	switch {
	case row.Status.Refunded():
		return out, nil // a repeat: refunded already
	case row.Status != domain.StatusPaid:
		return out, temporal.NewNonRetryableApplicationError("only a PAID order can be refunded; the order is "+string(row.Status),
			ErrTypeInvalidState, nil, row.Status)
	}
	// From here on the refund finishes whatever happens to the workflow (a
	// Cancel in the Web UI): money given back must be recorded.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if row.Provider != "" && row.PaymentID != "" {
		in := activities.RefundInput{Ref: row.Ref, Provider: row.Provider, PaymentID: row.PaymentID, Reason: req.Reason}
		var r payment.Refund
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, refundOptions), a.RefundPaidPayment, in).Get(dctx, &r); err != nil {
			logger.Error("refund refused by the payment provider", "order_id", req.OrderID, "payment_id", row.PaymentID, "err", err)
			return out, err
		}
		out.RefundID = r.ID
	}
	var rec store.RefundRecord
	in := activities.RefundOrderInput{Ref: row.Ref, RefundID: out.RefundID, Reason: req.Reason, Restock: req.Restock}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, compensationOptions), a.RefundOrder, in).Get(dctx, &rec); err != nil {
		return out, err
	}
	out.Status, out.Reason = rec.Status, rec.Reason
	if !rec.Status.Refunded() {
		// Only this workflow moves a PAID row on, so this is not expected.
		return out, temporal.NewNonRetryableApplicationError("the order is "+string(rec.Status)+" and was not refunded",
			ErrTypeInvalidState, nil, rec.Status)
	}
	if err := workflow.UpsertTypedSearchAttributes(dctx, OrderStatusKey.ValueSet(string(rec.Status))); err != nil {
		logger.Warn("upsert the refund's status", "order_id", req.OrderID, "err", err)
	}
	note := activities.NotifyInput{Ref: row.Ref, Status: rec.Status, Reason: rec.Reason, RefundedPayment: row.PaymentID}
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(dctx, notifyOptions), notify, note).Get(dctx, nil); err != nil {
		logger.Warn("notify buyer of a refund", "order_id", req.OrderID, "err", err)
	}
	return out, nil
}
