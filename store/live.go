package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/sale"
	"github.com/seckill/seckill/ent/stockmovement"
)

// OpenSales lists the sales that have not ended at now: what the
// reconciler keeps in step, however many ended sales the database holds.
func (s *Store) OpenSales(ctx context.Context, now time.Time) ([]*ent.Sale, error) {
	sales, err := s.db.Sale.Query().Where(sale.EndsAtGT(now)).Order(ent.Asc(sale.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list open sales: %w", err)
	}
	return sales, nil
}

// OrdersWritten reports which of ids have an order row, in one query.
func (s *Store) OrdersWritten(ctx context.Context, ids []int64) (map[int64]bool, error) {
	out := make(map[int64]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	found, err := s.db.Order.Query().Where(order.IDIn(ids...)).IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("orders written: %w", err)
	}
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// OrdersByID returns the orders of ids that exist, in one query per
// thousand ids: what the reconciliation of a provider's captures compares
// them with.
func (s *Store) OrdersByID(ctx context.Context, ids []int64) (map[int64]*ent.Order, error) {
	out := make(map[int64]*ent.Order, len(ids))
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		found, err := s.db.Order.Query().Where(order.IDIn(batch...)).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("orders by id: %w", err)
		}
		for _, o := range found {
			out[o.ID] = o
		}
	}
	return out, nil
}

// SalesByID returns the sales of ids that exist, in one query.
func (s *Store) SalesByID(ctx context.Context, ids []int64) (map[int64]*ent.Sale, error) {
	out := make(map[int64]*ent.Sale, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sales, err := s.db.Sale.Query().Where(sale.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("sales by id: %w", err)
	}
	for _, sl := range sales {
		out[sl.ID] = sl
	}
	return out, nil
}

// Buyer is a user holding a live order of a sale: the unit Redis must
// record in the sale's buyers.
type Buyer struct {
	UserID  string
	OrderID int64
	// IdempotencyKey is the key of the purchase that won the unit, or "".
	IdempotencyKey string
}

// LiveBuyers lists the buyers of a sale whose order holds a unit (PENDING,
// AWAITING_PAYMENT, PAID or REFUNDED: domain.LiveStatuses), oldest order
// first. The partial unique index
// allows one live order per buyer; a second one, which the audit looks
// for, is listed rather than hidden.
func (s *Store) LiveBuyers(ctx context.Context, saleID int64) ([]Buyer, error) {
	rows, err := s.db.Order.Query().
		Where(order.SaleID(saleID), order.StatusIn(order.StatusPENDING, order.StatusAWAITING_PAYMENT, order.StatusPAID, order.StatusREFUNDED)).
		Order(ent.Asc(order.FieldID)).
		Select(order.FieldID, order.FieldUserID, order.FieldIdempotencyKey).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("live buyers of sale %d: %w", saleID, err)
	}
	out := make([]Buyer, len(rows))
	for i, o := range rows {
		out[i] = Buyer{UserID: o.UserID, OrderID: o.ID, IdempotencyKey: o.IdempotencyKey}
	}
	return out, nil
}

// HoldsUnit reports whether the database counts the order's unit as taken:
// its ledger has a DEDUCT and no RESTORE.
func (s *Store) HoldsUnit(ctx context.Context, orderID int64) (bool, error) {
	moves, err := s.db.StockMovement.Query().Where(stockmovement.OrderID(orderID)).
		Select(stockmovement.FieldKind).All(ctx)
	if err != nil {
		return false, fmt.Errorf("ledger of order %d: %w", orderID, err)
	}
	deducted := false
	for _, m := range moves {
		if m.Kind == stockmovement.KindRESTORE {
			return false, nil
		}
		deducted = true
	}
	return deducted, nil
}
