package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/store"
)

// The activities of an operator's refund of a paid order
// (workflows.OrderRefundWorkflow, docs/design.md §4.11).

// RefundPaidPayment refunds, whole, the payment that paid the order, at
// its provider, under the payment's refund key (refundAt). It records
// nothing: RefundOrder does, with the operator's outcome.
func (a *Activities) RefundPaidPayment(ctx context.Context, in RefundInput) (payment.Refund, error) {
	start := time.Now()
	_, r, err := a.refundAt(ctx, in)
	a.Metrics.observe("RefundPaidPayment", start, err)
	return r, err
}

// RefundOrderInput records an operator's refund of a paid order.
type RefundOrderInput struct {
	Ref      domain.OrderRef
	RefundID string
	Reason   string
	Restock  bool
}

// RefundOrder records the operator's refund on the order's row, with the
// unit back in the database if asked and the sale is open
// (store.RefundOrder), then gives a restocked unit back to Redis and frees
// its buyer, as an ending does (ReleaseReservation): the database first,
// Redis last. A retry after the commit finds the row refunded and releases
// again, which is harmless.
func (a *Activities) RefundOrder(ctx context.Context, in RefundOrderInput) (store.RefundRecord, error) {
	start := time.Now()
	rec, err := a.Store.RefundOrder(ctx, in.Ref, store.OperatorRefund{RefundID: in.RefundID, Reason: in.Reason, Restock: in.Restock}, time.Now())
	err = classify(err)
	a.Metrics.observe("RefundOrder", start, err)
	if err != nil {
		return store.RefundRecord{}, err
	}
	if rec.Recorded {
		a.Metrics.entered(rec.Status)
		activity.GetLogger(ctx).Info("order refunded by an operator", "order_id", in.Ref.OrderID, "sale_id", in.Ref.SaleID,
			"user_id", in.Ref.UserID, "status", rec.Status, "refund_id", in.RefundID, "reason", rec.Reason)
	}
	if rec.Restored {
		a.restored(ctx, in.Ref)
	}
	if rec.Status == domain.StatusRefundedRestocked {
		if err := a.ReleaseReservation(ctx, in.Ref); err != nil {
			return store.RefundRecord{}, err
		}
	}
	return rec, nil
}
