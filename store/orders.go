package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/sale"
	"github.com/seckill/seckill/ent/stockmovement"
	"github.com/seckill/seckill/orderid"
)

// DeductStock takes one unit of the sale for the order. The ledger row and
// the stock update share one transaction and the ledger is unique on
// (order, kind), so a retried call deducts once. The ledger row is written
// first: a second attempt for the same order then waits on the unique index
// until the first commits and finds its row, instead of judging the stock
// before the first attempt's commit and reporting a false out-of-stock.
//
// It returns domain.ErrOutOfStock when the sale has no unit left,
// domain.ErrSaleCancelled when an operator cancelled the sale,
// domain.ErrInvalidOrder when the sale does not exist, and
// domain.ErrCompensated when RestoreStock already ran for the order (a
// deduction that arrives after its compensation must not land).
func (s *Store) DeductStock(ctx context.Context, ref domain.OrderRef) error {
	err := s.withTx(ctx, func(tx *ent.Tx) error { return deduct(ctx, tx, ref) })
	if errors.Is(err, errDeducted) {
		return nil // an earlier attempt for the same order committed its deduction
	}
	if err != nil {
		return fmt.Errorf("deduct stock for order %d: %w", ref.OrderID, err)
	}
	return nil
}

// PlaceOrder is DeductStock and CreateOrder in one transaction, the first
// step of the lean saga (workflows.VersionLeanSaga, docs/design.md §4.2):
// one commit per order instead of two. Either both land or neither does, so
// a retry after a commit finds the deduction and reports success, and a
// refusal leaves nothing to undo (the saga's RestoreStock then writes its
// tombstone). It returns DeductStock's errors, and domain.ErrInvalidOrder
// when the row cannot be written (the buyer holds another live order of
// the sale).
//
// On Postgres the transaction is one statement, the function
// seckill_place_order_v1 (place.go), whenever the order is placed; every
// other outcome, and every SQLite database, runs it through ent (placeTx).
func (s *Store) PlaceOrder(ctx context.Context, ref domain.OrderRef) error {
	if s.placeInOne(ctx, ref) {
		return nil
	}
	return s.placeTx(ctx, ref)
}

// placeTx is PlaceOrder through ent: every database, every outcome.
func (s *Store) placeTx(ctx context.Context, ref domain.OrderRef) error {
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		if err := deduct(ctx, tx, ref); err != nil {
			return err
		}
		err := s.insertOrder(ctx, tx.Order, ref, domain.StatusAwaitingPayment, "")
		if ent.IsConstraintError(err) || ent.IsValidationError(err) {
			return fmt.Errorf("%w: order %d: %v", domain.ErrInvalidOrder, ref.OrderID, err)
		}
		return err
	})
	if errors.Is(err, errDeducted) {
		// An earlier attempt committed the deduction and the row with it.
		// If that row has ended since, this is a run that an operator reset
		// to before the order's end (the Web UI offers it on any order):
		// the order must not come back to life.
		return s.placedEarlier(ctx, ref.OrderID)
	}
	if err != nil {
		return fmt.Errorf("place order %d: %w", ref.OrderID, err)
	}
	return nil
}

// placedEarlier answers a PlaceOrder whose deduction an earlier attempt
// committed: nil while the order's row is live, a *domain.StateError with
// the row's status once it has ended.
func (s *Store) placedEarlier(ctx context.Context, orderID int64) error {
	row, err := s.Order(ctx, orderID)
	if err != nil {
		return fmt.Errorf("place order %d: %w", orderID, err)
	}
	if status := domain.Status(row.Status); status.Final() {
		return &domain.StateError{Status: status, Detail: fmt.Sprintf("order %d has ended already: %s", orderID, status)}
	}
	return nil
}

// AdmissionSkew is how far past a sale's end an order's admission time
// (the admitting api's clock, AdmittedAt) may lie and still be placed:
// Redis admits by its own clock, and the api's may run ahead of it.
const AdmissionSkew = time.Second

// AdmittedAt is when ref's order was admitted, on the admitting api's
// clock, to the millisecond: the time its purchase's intent carried, or,
// for an order admitted before intents carried one, its id's time (which
// the id fence may put ahead of the clock, docs/design.md §3.9).
func AdmittedAt(ref domain.OrderRef) time.Time {
	if ref.AdmittedAt.IsZero() {
		return orderid.Time(ref.OrderID)
	}
	return ref.AdmittedAt.Truncate(time.Millisecond).UTC()
}

// errDeducted: the order's DEDUCT ledger row exists, written by an earlier
// attempt that committed.
var errDeducted = errors.New("deducted already")

// deduct takes one unit of the sale for the order inside tx (see
// DeductStock).
func deduct(ctx context.Context, tx *ent.Tx, ref domain.OrderRef) error {
	err := tx.StockMovement.Create().
		SetOrderID(ref.OrderID).SetSaleID(ref.SaleID).
		SetKind(stockmovement.KindDEDUCT).SetDelta(-1).
		Exec(ctx)
	if ent.IsConstraintError(err) {
		return errors.Join(errDeducted, err)
	}
	if err != nil {
		return err
	}
	// The update locks the sale row until commit; RestoreStock takes the
	// same lock before it reads the ledger (see there), and CancelSale the
	// same lock to set cancelled_at: a deduction either commits before the
	// cancellation (its order is then cancelled through its workflow) or
	// finds the sale cancelled.
	//
	// An order admitted after the sale's end is refused: Redis admits by
	// its own copy of the window, which an operator's end reaches only
	// after the database (docs/design.md §7), and the relay may start
	// the order minutes later. The order carries its admission time;
	// winners admitted before the end keep their orders.
	admitted := AdmittedAt(ref)
	n, err := tx.Sale.Update().
		Where(sale.ID(ref.SaleID), sale.StockGT(0), sale.CancelledAtIsNil(), sale.EndsAtGT(admitted.Add(-AdmissionSkew))).
		AddStock(-1).Save(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		sl, err := tx.Sale.Get(ctx, ref.SaleID)
		switch {
		case ent.IsNotFound(err):
			return fmt.Errorf("%w: sale %d does not exist", domain.ErrInvalidOrder, ref.SaleID)
		case err != nil:
			return err
		case sl.CancelledAt != nil:
			return domain.ErrSaleCancelled
		case !sl.EndsAt.After(admitted.Add(-AdmissionSkew)):
			return fmt.Errorf("%w: order %d was admitted at %s, after the sale ended at %s",
				domain.ErrAdmittedAfterEnd, ref.OrderID, admitted.Format(time.RFC3339Nano), sl.EndsAt.Format(time.RFC3339Nano))
		}
		return domain.ErrOutOfStock
	}
	voided, err := tx.StockMovement.Query().
		Where(stockmovement.OrderID(ref.OrderID), stockmovement.KindEQ(stockmovement.KindRESTORE)).
		Exist(ctx)
	if err != nil {
		return err
	}
	if voided {
		return domain.ErrCompensated
	}
	return nil
}

// RestoreStock returns the unit DeductStock took for the order, once. It
// reports whether it returned a unit now (false if it had been returned
// already or never taken).
//
// The saga registers this compensation before DeductStock runs, because a
// deduction whose local activity was cancelled may still commit after the
// workflow moved on. So a restore that finds no deduction writes a RESTORE
// row with delta 0, a tombstone that makes a later DeductStock of the order
// back off. It first locks the sale row, which an in-flight deduction holds
// until it commits, so it reads a ledger that no deduction is still writing.
func (s *Store) RestoreStock(ctx context.Context, ref domain.OrderRef) (bool, error) {
	restored := false
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		if err := lockSale(ctx, tx, ref.SaleID); err != nil {
			return err
		}
		var err error
		restored, err = restore(ctx, tx, ref)
		return err
	})
	if ent.IsConstraintError(err) {
		return false, nil // a concurrent attempt restored it
	}
	if err != nil {
		return false, fmt.Errorf("restore stock for order %d: %w", ref.OrderID, err)
	}
	return restored, nil
}

// lockSale locks the sale's row until tx ends, as a deduction's update
// does (deduct).
func lockSale(ctx context.Context, tx *ent.Tx, saleID int64) error {
	_, err := tx.Sale.Update().Where(sale.ID(saleID)).AddStock(0).Save(ctx)
	return err
}

// restore is RestoreStock inside tx, which holds the sale's lock.
func restore(ctx context.Context, tx *ent.Tx, ref domain.OrderRef) (restored bool, _ error) {
	moves, err := tx.StockMovement.Query().Where(stockmovement.OrderID(ref.OrderID)).All(ctx)
	if err != nil {
		return false, err
	}
	deducted := false
	for _, m := range moves {
		switch m.Kind {
		case stockmovement.KindRESTORE:
			return false, nil
		case stockmovement.KindDEDUCT:
			deducted = true
		}
	}
	delta := 0
	if deducted {
		if _, err := tx.Sale.Update().Where(sale.ID(ref.SaleID)).AddStock(1).Save(ctx); err != nil {
			return false, err
		}
		delta, restored = 1, true
	}
	err = tx.StockMovement.Create().
		SetOrderID(ref.OrderID).SetSaleID(ref.SaleID).
		SetKind(stockmovement.KindRESTORE).SetDelta(delta).
		Exec(ctx)
	return restored, err
}

// CreateOrder writes the order row as AWAITING_PAYMENT if the order has no
// row yet, so a retry, or a late attempt after FinishOrder wrote the row,
// changes nothing. It returns domain.ErrInvalidOrder when the row cannot be
// written (unknown sale, or the buyer holds another live order of the sale).
func (s *Store) CreateOrder(ctx context.Context, ref domain.OrderRef) error {
	err := s.insertOrder(ctx, s.db.Order, ref, domain.StatusAwaitingPayment, "")
	if ent.IsConstraintError(err) || ent.IsValidationError(err) {
		return fmt.Errorf("%w: order %d: %v", domain.ErrInvalidOrder, ref.OrderID, err)
	}
	if err != nil {
		return fmt.Errorf("create order %d: %w", ref.OrderID, err)
	}
	return nil
}

// insertOrder inserts the order's row unless a row with its id exists.
// Only a conflict on the id is absorbed; any other constraint (the sale,
// one live order per buyer) is reported.
func (s *Store) insertOrder(ctx context.Context, c *ent.OrderClient, ref domain.OrderRef, status domain.Status, reason string) error {
	err := c.Create().
		SetID(ref.OrderID).SetSaleID(ref.SaleID).SetUserID(ref.UserID).
		SetAmountCents(ref.AmountCents).SetIdempotencyKey(ref.IdempotencyKey).
		SetStatus(order.Status(status)).SetReason(reason).SetAdmittedAt(AdmittedAt(ref)).
		OnConflictColumns(order.FieldID).DoNothing().
		Exec(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the row exists
	}
	return err
}

// FinishOrder records that the order ended without a sale (status is
// CANCELLED, EXPIRED or FAILED) and returns the status the row ends with.
// In one transaction it writes the row if the saga never got that far (so
// every admitted order ends with a row, and a late CreateOrder finds it),
// then moves a live unpaid row to status. A row that is final already keeps
// its status: the caller learns it, so an ending never undoes a payment.
func (s *Store) FinishOrder(ctx context.Context, ref domain.OrderRef, status domain.Status, reason string) (domain.Status, error) {
	var final domain.Status
	err := s.ending(ctx, "finish", ref, status, func(tx *ent.Tx) error {
		var err error
		final, err = s.finish(ctx, tx, ref, status, reason)
		return err
	})
	if err != nil {
		return "", err
	}
	return final, nil
}

// ending runs fn, an ending of the order (FinishOrder, EndOrder: what, in
// its errors), in one transaction, once status is known to be an ending
// one. A row the database refuses means the sale itself is gone, with
// nothing to attach a row to: domain.ErrInvalidOrder.
func (s *Store) ending(ctx context.Context, what string, ref domain.OrderRef, status domain.Status, fn func(tx *ent.Tx) error) error {
	if status.Live() {
		return fmt.Errorf("%s order %d: %s is not an ending status", what, ref.OrderID, status)
	}
	err := s.withTx(ctx, fn)
	if ent.IsConstraintError(err) || ent.IsValidationError(err) {
		return fmt.Errorf("%w: order %d: %v", domain.ErrInvalidOrder, ref.OrderID, err)
	}
	if err != nil {
		return fmt.Errorf("%s order %d: %w", what, ref.OrderID, err)
	}
	return nil
}

// finish is FinishOrder inside tx.
func (s *Store) finish(ctx context.Context, tx *ent.Tx, ref domain.OrderRef, status domain.Status, reason string) (domain.Status, error) {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	if err := s.insertOrder(ctx, tx.Order, ref, status, reason); err != nil {
		return "", err
	}
	_, err := tx.Order.Update().
		Where(order.ID(ref.OrderID), order.StatusIn(order.StatusPENDING, order.StatusAWAITING_PAYMENT)).
		SetStatus(order.Status(status)).SetReason(reason).
		Save(ctx)
	if err != nil {
		return "", err
	}
	row, err := tx.Order.Get(ctx, ref.OrderID)
	if err != nil {
		return "", err
	}
	return domain.Status(row.Status), nil
}

// EndOrder is FinishOrder and RestoreStock in one transaction, the ending
// of workflows started at workflows.VersionOneStepEnd or later (docs/design.md
// §4.4): one commit instead of two. It locks the sale's row first, as
// deduct does before it touches the order's row, so an ending and a late
// deduction of the same order wait for each other instead of deadlocking;
// then it ends the row and, unless the row says PAID (a paid order keeps
// its unit), gives the unit back once. It returns the row's final status
// and whether a unit went back now. Both halves are idempotent, so a retry
// after a commit changes nothing.
func (s *Store) EndOrder(ctx context.Context, ref domain.OrderRef, status domain.Status, reason string) (final domain.Status, restored bool, _ error) {
	err := s.ending(ctx, "end", ref, status, func(tx *ent.Tx) error {
		if err := lockSale(ctx, tx, ref.SaleID); err != nil {
			return err
		}
		var err error
		if final, err = s.finish(ctx, tx, ref, status, reason); err != nil || final == domain.StatusPaid {
			return err
		}
		restored, err = restore(ctx, tx, ref)
		return err
	})
	if err != nil {
		return "", false, err
	}
	return final, restored, nil
}

// MarkPaid moves an AWAITING_PAYMENT order to PAID. Paying a paid order is
// a no-op; any other status is domain.ErrConflict.
func (s *Store) MarkPaid(ctx context.Context, orderID int64) error {
	_, err := s.RecordPaid(ctx, orderID, "", "")
	return err
}

// MarkPaidWith is MarkPaid for an order paid at a provider: the row also
// records the provider and its payment's id ("" for none). Paying a paid
// order is a no-op that keeps the payment it was paid with.
func (s *Store) MarkPaidWith(ctx context.Context, orderID int64, provider, paymentID string) error {
	_, err := s.RecordPaid(ctx, orderID, provider, paymentID)
	return err
}

// RecordPaid is MarkPaidWith that also says when the order was paid: the
// row's paid_at, which is its updated_at too. The time is in UTC to the
// microsecond, what the column keeps, so that the pay update's answer
// (workflows.OrderState.PaidAt), which shows both as this time, shows what
// a read of the row shows. On a repeat it is the row's paid_at if the row
// is unchanged since, and zero otherwise (paid before paid_at was kept, or
// by a build that wrote updated_at apart, or changed since): the api then
// reads the row.
func (s *Store) RecordPaid(ctx context.Context, orderID int64, provider, paymentID string) (paidAt time.Time, _ error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	n, err := s.db.Order.Update().
		Where(order.ID(orderID), order.StatusEQ(order.StatusAWAITING_PAYMENT)).
		SetStatus(order.StatusPAID).SetReason("").SetPaidAt(now).SetUpdatedAt(now).
		SetPaymentProvider(provider).SetPaymentID(paymentID).
		Save(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("mark order %d paid: %w", orderID, err)
	}
	if n == 1 {
		return now, nil
	}
	o, err := s.Order(ctx, orderID)
	if err != nil {
		return time.Time{}, err
	}
	if o.Status == order.StatusPAID {
		if o.PaidAt == nil || !o.UpdatedAt.Equal(*o.PaidAt) {
			return time.Time{}, nil
		}
		return o.PaidAt.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%w: order %d is %s", domain.ErrConflict, orderID, o.Status)
}

// RecordRefund records on the order the refund of a payment the order did
// not keep (captured after it ended, a second capture, a wrong amount). An
// order that names no payment yet is given the refunded one. Idempotent: a
// repeat of the recorded refund changes nothing, and an order records its
// first refund only (a later one is at the provider and in the workflow's
// history), so it reports whether this call recorded refundID. An unknown
// order is domain.ErrNotFound.
func (s *Store) RecordRefund(ctx context.Context, orderID int64, provider, paymentID, refundID, reason string) (recorded bool, _ error) {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	var n int
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		var err error
		n, err = tx.Order.Update().
			Where(order.ID(orderID), order.RefundID("")).
			SetRefundID(refundID).SetRefundReason(reason).SetRefundedAt(time.Now()).
			Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		return tx.Order.Update().Where(order.ID(orderID), order.PaymentID("")).
			SetPaymentProvider(provider).SetPaymentID(paymentID).Exec(ctx)
	})
	if err != nil {
		return false, fmt.Errorf("record refund %s of order %d: %w", refundID, orderID, err)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := s.Order(ctx, orderID); err != nil {
		return false, err
	}
	return false, nil
}

// Order returns one order, or domain.ErrNotFound.
func (s *Store) Order(ctx context.Context, id int64) (*ent.Order, error) {
	o, err := s.db.Order.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, domain.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get order %d: %w", id, err)
	}
	return o, nil
}

// CountByStatus counts the sale's orders per status.
func (s *Store) CountByStatus(ctx context.Context, saleID int64) (map[domain.Status]int, error) {
	var rows []struct {
		Status string `json:"status"`
		Count  int    `json:"count"`
	}
	err := s.db.Order.Query().Where(order.SaleID(saleID)).
		GroupBy(order.FieldStatus).Aggregate(ent.Count()).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count orders of sale %d: %w", saleID, err)
	}
	out := make(map[domain.Status]int, len(rows))
	for _, r := range rows {
		out[domain.Status(r.Status)] = r.Count
	}
	return out, nil
}
