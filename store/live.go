package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/sale"
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
