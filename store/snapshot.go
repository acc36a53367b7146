package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/sale"
	"github.com/seckill/seckill/ent/stockmovement"
)

// SaleSnapshot is a sale as the database held it at one instant: its
// stock, its orders and the ledger facts agree with each other.
type SaleSnapshot struct {
	Sale *ent.Sale
	// Orders carry only their id, user id, status, updated_at and
	// idempotency key.
	Orders []*ent.Order
	// Deducted and Restored are the orders with a DEDUCT, and a RESTORE,
	// ledger row. A RESTORE of delta 0 (an order that never deducted) counts:
	// it too means the order no longer takes a unit.
	Deducted map[int64]bool
	Restored map[int64]bool
}

// HoldsUnit reports whether the database still counts the order's unit as
// taken: it deducted and has not restored.
func (s SaleSnapshot) HoldsUnit(orderID int64) bool {
	return s.Deducted[orderID] && !s.Restored[orderID]
}

// LiveBuyers are the buyers whose order held a unit at the snapshot's
// instant, oldest order first, as Store.LiveBuyers lists them.
func (s SaleSnapshot) LiveBuyers() []Buyer {
	var out []Buyer
	for _, o := range s.Orders {
		if domain.Status(o.Status).Live() {
			out = append(out, Buyer{UserID: o.UserID, OrderID: o.ID, IdempotencyKey: o.IdempotencyKey})
		}
	}
	slices.SortFunc(out, func(a, b Buyer) int { return cmp.Compare(a.OrderID, b.OrderID) })
	return out
}

// SaleSnapshot reads the sale, its orders and their ledger in one
// transaction that sees a single instant (readSnapshot). It returns
// domain.ErrUnknownSale for an unknown sale.
func (s *Store) SaleSnapshot(ctx context.Context, saleID int64) (SaleSnapshot, error) {
	tx, err := s.readSnapshot(ctx)
	if err != nil {
		return SaleSnapshot{}, fmt.Errorf("snapshot of sale %d: begin: %w", saleID, err)
	}
	// Read-only: rolling back ends it as well as a commit would.
	defer func() { _ = tx.Rollback() }()

	snap := SaleSnapshot{Deducted: map[int64]bool{}, Restored: map[int64]bool{}}
	snap.Sale, err = tx.Sale.Query().Where(sale.ID(saleID)).Only(ctx)
	if ent.IsNotFound(err) {
		return SaleSnapshot{}, domain.ErrUnknownSale
	}
	if err != nil {
		return SaleSnapshot{}, fmt.Errorf("snapshot of sale %d: %w", saleID, err)
	}
	snap.Orders, err = tx.Order.Query().Where(order.SaleID(saleID)).
		Select(order.FieldID, order.FieldUserID, order.FieldStatus, order.FieldUpdatedAt, order.FieldIdempotencyKey).All(ctx)
	if err != nil {
		return SaleSnapshot{}, fmt.Errorf("snapshot of sale %d: orders: %w", saleID, err)
	}
	moves, err := tx.StockMovement.Query().Where(stockmovement.SaleID(saleID)).
		Select(stockmovement.FieldOrderID, stockmovement.FieldKind).All(ctx)
	if err != nil {
		return SaleSnapshot{}, fmt.Errorf("snapshot of sale %d: ledger: %w", saleID, err)
	}
	for _, m := range moves {
		if m.Kind == stockmovement.KindDEDUCT {
			snap.Deducted[m.OrderID] = true
		} else {
			snap.Restored[m.OrderID] = true
		}
	}
	return snap, nil
}
