package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/sale"
)

// Operators' changes to a live sale. Each is one transaction; the api runs
// it under the sale's redsync lock and then mirrors it into Redis.

// MaxAddUnits bounds one AddUnits call.
const MaxAddUnits = 1_000_000

// EndSale ends the sale at now unless it ends earlier already, and returns
// it and whether this call changed it. A sale that has not opened yet ends before it opens: its window
// collapses to the millisecond before now, since the database keeps every
// window ordered. Ending an ended sale changes nothing. Times are kept to
// the millisecond, the precision of the window Redis holds.
func (s *Store) EndSale(ctx context.Context, id int64, now time.Time) (*ent.Sale, bool, error) {
	var (
		sl      *ent.Sale
		changed bool
	)
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		var err error
		sl, changed, err = endSale(ctx, tx, id, now)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sl, changed, nil
}

func endSale(ctx context.Context, tx *ent.Tx, id int64, now time.Time) (*ent.Sale, bool, error) {
	now = now.UTC().Truncate(time.Millisecond)
	open, err := tx.Sale.Update().
		Where(sale.ID(id), sale.EndsAtGT(now), sale.StartsAtLT(now)).
		SetEndsAt(now).Save(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("end sale %d: %w", id, err)
	}
	upcoming, err := tx.Sale.Update().
		Where(sale.ID(id), sale.StartsAtGTE(now)).
		SetStartsAt(now.Add(-time.Millisecond)).SetEndsAt(now).Save(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("end sale %d before it opened: %w", id, err)
	}
	sl, err := tx.Sale.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, false, domain.ErrUnknownSale
	}
	if err != nil {
		return nil, false, fmt.Errorf("get sale %d: %w", id, err)
	}
	return sl, open+upcoming > 0, nil
}

// AddUnits puts units more of the sale on sale: stock and total_stock grow
// together in one statement, so the ledger still explains the stock. It
// returns the sale, domain.ErrEnded for a sale that has ended (or was
// cancelled) at now, or domain.ErrUnknownSale.
func (s *Store) AddUnits(ctx context.Context, id int64, units int, now time.Time) (*ent.Sale, error) {
	if units < 1 || units > MaxAddUnits {
		return nil, fmt.Errorf("%w: units must be 1..%d", domain.ErrInvalidOrder, MaxAddUnits)
	}
	var sl *ent.Sale
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		n, err := tx.Sale.Update().
			Where(sale.ID(id), sale.EndsAtGT(now), sale.CancelledAtIsNil()).
			AddStock(units).AddTotalStock(units).Save(ctx)
		if err != nil {
			return fmt.Errorf("add %d units to sale %d: %w", units, id, err)
		}
		sl, err = tx.Sale.Get(ctx, id)
		switch {
		case ent.IsNotFound(err):
			return domain.ErrUnknownSale
		case err != nil:
			return fmt.Errorf("get sale %d: %w", id, err)
		case n == 0:
			return domain.ErrEnded
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sl, nil
}

// CancelSale marks the sale cancelled (the first call's time stays) and
// ends it at now, in one transaction. From its commit on, DeductStock
// refuses every order of the sale that has not deducted yet; the orders
// that have are for the caller to cancel (OpenOrders). Cancelling a
// cancelled sale changes nothing; changed says whether this call did.
func (s *Store) CancelSale(ctx context.Context, id int64, now time.Time) (*ent.Sale, bool, error) {
	var (
		sl      *ent.Sale
		changed bool
	)
	err := s.withTx(ctx, func(tx *ent.Tx) error {
		// The update takes the sale row's lock, which a deduction in flight
		// holds until it commits (see DeductStock).
		n, err := tx.Sale.Update().
			Where(sale.ID(id), sale.CancelledAtIsNil()).
			SetCancelledAt(now.UTC()).Save(ctx)
		if err != nil {
			return fmt.Errorf("cancel sale %d: %w", id, err)
		}
		sl, changed, err = endSale(ctx, tx, id, now)
		changed = changed || n > 0
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sl, changed, nil
}

// OpenOrders lists up to limit order rows of the sale that are not final
// and not paid: the orders a sale's cancellation must still cancel.
func (s *Store) OpenOrders(ctx context.Context, saleID int64, limit int) ([]*ent.Order, error) {
	os, err := s.db.Order.Query().
		Where(order.SaleID(saleID), order.StatusIn(order.StatusPENDING, order.StatusAWAITING_PAYMENT)).
		Order(ent.Asc(order.FieldID)).Limit(limit).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("open orders of sale %d: %w", saleID, err)
	}
	return os, nil
}

// CancelledWithOpenOrders lists the cancelled sales that still have open
// order rows: the cancellations an api resumes.
func (s *Store) CancelledWithOpenOrders(ctx context.Context) ([]int64, error) {
	ids, err := s.db.Sale.Query().
		Where(sale.CancelledAtNotNil(), sale.HasOrdersWith(order.StatusIn(order.StatusPENDING, order.StatusAWAITING_PAYMENT))).
		Order(ent.Asc(sale.FieldID)).
		IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("cancelled sales with open orders: %w", err)
	}
	return ids, nil
}
