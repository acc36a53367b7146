package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
)

// OperatorRefund is an operator's refund of a paid order to record
// (docs/design.md §4.11): the refund the provider made ("" for an order
// paid without a provider), why, and whether the operator asked for the
// unit to go back on sale.
type OperatorRefund struct {
	RefundID string
	Reason   string
	Restock  bool
}

// RefundRecord is what RefundOrder left on the row.
type RefundRecord struct {
	// Status is the row's status after the call: REFUNDED or
	// REFUNDED_RESTOCKED once refunded (now or earlier), else the status
	// that kept it from being refunded.
	Status domain.Status
	// Reason is the row's reason: what became of the unit.
	Reason string
	// Recorded says this call recorded the refund; Restored, that it gave
	// the unit back to the database.
	Recorded, Restored bool
}

// Reasons a refunded order's row gives, saying what became of its unit.
const (
	RefundRestockedReason  = "refunded by an operator; its unit went back on sale"
	RefundNotAskedReason   = "refunded by an operator; its unit stays out of the sale (no restock asked)"
	RefundSaleEndedReason  = "refunded by an operator; not restocked: the sale has ended"
	RefundSaleCancelReason = "refunded by an operator; not restocked: the sale was cancelled"
)

// RefundOrder records an operator's refund of a PAID order, once: the row
// becomes REFUNDED, or, if the operator asked for it and the sale is still
// open (not cancelled, not past its end by now), REFUNDED_RESTOCKED with
// its unit back in the database (the RESTORE ledger row, as an ending's).
// The refund fields take the operator's refund. All in one transaction
// that first takes the sale row's lock, as a deduction and an ending do:
// the sale's window and the order's row are read as the change commits.
//
// A row refunded already is answered as it is, so a retry after a commit
// changes nothing, restores nothing more, and learns the outcome; a row
// in any other status than PAID is answered with that status, unchanged.
// An unknown order is domain.ErrNotFound. Redis is the caller's: a
// REFUNDED_RESTOCKED row's reservation is to be released (stock.Release),
// which is harmless to repeat.
func (s *Store) RefundOrder(ctx context.Context, ref domain.OrderRef, r OperatorRefund, now time.Time) (RefundRecord, error) {
	if len(r.Reason) > 500 {
		r.Reason = r.Reason[:500]
	}
	var out RefundRecord
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		if err := lockSale(ctx, tx, ref.SaleID); err != nil {
			return err
		}
		row, err := tx.Order.Get(ctx, ref.OrderID)
		if ent.IsNotFound(err) {
			return domain.ErrNotFound
		}
		if err != nil {
			return err
		}
		out = RefundRecord{Status: domain.Status(row.Status), Reason: row.Reason}
		if out.Status != domain.StatusPaid {
			return nil
		}
		out.Status, out.Reason = domain.StatusRefunded, RefundNotAskedReason
		if r.Restock {
			sl, err := tx.Sale.Get(ctx, ref.SaleID)
			if err != nil {
				return err
			}
			switch {
			case sl.CancelledAt != nil:
				out.Reason = RefundSaleCancelReason
			case !now.Before(sl.EndsAt):
				out.Reason = RefundSaleEndedReason
			default:
				out.Status, out.Reason = domain.StatusRefundedRestocked, RefundRestockedReason
			}
		}
		if err := tx.Order.UpdateOneID(ref.OrderID).
			SetStatus(order.Status(out.Status)).SetReason(out.Reason).
			SetRefundID(r.RefundID).SetRefundReason(r.Reason).SetRefundedAt(now).
			Exec(ctx); err != nil {
			return err
		}
		out.Recorded = true
		if out.Status == domain.StatusRefundedRestocked {
			out.Restored, err = restore(ctx, tx, ref)
		}
		return err
	})
	if err != nil {
		return RefundRecord{}, fmt.Errorf("refund order %d: %w", ref.OrderID, err)
	}
	return out, nil
}
