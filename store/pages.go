package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/predicate"
	"github.com/seckill/seckill/ent/sale"
)

// The lists page by key (docs/design.md §6.6): a page is the rows past
// the last key of the page before, read through an index on that order, so
// page n costs what page 1 costs and a row written or changed between two
// pages neither repeats nor shifts the rows after it, as OFFSET would.

// SaleOrderFilter picks a sale's orders for a list or an export.
type SaleOrderFilter struct {
	// Status, if set, keeps the orders of that status only.
	Status domain.Status
	// Since and Until bound the orders' admitted_at: Since <= admitted_at
	// < Until (zero: no bound). The sale's orders are indexed by it
	// (sale_id, [status,] admitted_at, id), so a window is a range.
	Since, Until time.Time
}

// SaleOrderKey is an order's place in its sale's lists: admission time,
// then id (ids of one millisecond, or of two api instances, need not
// follow their admission times). The zero key is before every order.
type SaleOrderKey struct {
	AdmittedAt time.Time
	ID         int64
}

// KeyOf is a row's SaleOrderKey.
func KeyOf(o *ent.Order) SaleOrderKey {
	var at time.Time
	if o.AdmittedAt != nil {
		at = *o.AdmittedAt
	}
	return SaleOrderKey{AdmittedAt: at, ID: o.ID}
}

func (f SaleOrderFilter) where(saleID int64, after SaleOrderKey) []predicate.Order {
	ps := []predicate.Order{order.SaleID(saleID), order.AdmittedAtNotNil()}
	if after.ID > 0 {
		ps = append(ps, func(s *entsql.Selector) {
			s.Where(entsql.CompositeGT([]string{s.C(order.FieldAdmittedAt), s.C(order.FieldID)}, after.AdmittedAt, after.ID))
		})
	}
	if !f.Since.IsZero() {
		ps = append(ps, order.AdmittedAtGTE(f.Since))
	}
	if !f.Until.IsZero() {
		ps = append(ps, order.AdmittedAtLT(f.Until))
	}
	if f.Status != "" {
		ps = append(ps, order.StatusEQ(order.Status(f.Status)))
	}
	return ps
}

// SaleOrders returns up to limit of the sale's orders past the key after
// (zero: from the first), in order of admission (SaleOrderKey). Rows
// without an admission time (written by an earlier version since the
// last `seckill migrate`) are in no list until migrate fills it in.
func (s *Store) SaleOrders(ctx context.Context, saleID int64, f SaleOrderFilter, after SaleOrderKey, limit int) ([]*ent.Order, error) {
	return saleOrders(ctx, s.db.Order, saleID, f, after, limit)
}

func saleOrders(ctx context.Context, c *ent.OrderClient, saleID int64, f SaleOrderFilter, after SaleOrderKey, limit int) ([]*ent.Order, error) {
	os, err := c.Query().Where(f.where(saleID, after)...).
		Order(ent.Asc(order.FieldAdmittedAt), ent.Asc(order.FieldID)).Limit(limit).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("orders of sale %d: %w", saleID, err)
	}
	return os, nil
}

// ExportSaleOrders hands the sale's orders to emit, in order of admission
// (SaleOrderKey), a page of at most pageSize at a time. Each page is its
// own short query by key (the rows past the last key handed out), and
// nothing is held while emit runs: no transaction, no snapshot, no
// connection. An export to a client that reads slowly, or not at all, then
// takes no connection from the pool (the only one, on SQLite) and keeps no
// snapshot that vacuum must wait for.
//
// What the pages add up to is what a walk of SaleOrders lists: every row
// as it was when its page was read; every order that had a row when the
// export began and still matches f when the export reaches its key, once;
// an order written during the export once if the export had not passed its
// key yet, else not at all; no order twice. It holds one page in memory. An
// error from emit stops the export and is returned. It returns
// domain.ErrUnknownSale first if there is no such sale.
func (s *Store) ExportSaleOrders(ctx context.Context, saleID int64, f SaleOrderFilter, pageSize int, emit func([]*ent.Order) error) error {
	if ok, err := s.db.Sale.Query().Where(sale.ID(saleID)).Exist(ctx); err != nil {
		return fmt.Errorf("export of sale %d: %w", saleID, err)
	} else if !ok {
		return domain.ErrUnknownSale
	}
	for after := (SaleOrderKey{}); ; {
		// All reads the page and gives its connection back before emit.
		page, err := saleOrders(ctx, s.db.Order, saleID, f, after, pageSize)
		if err != nil {
			return err
		}
		if len(page) > 0 {
			if err := emit(page); err != nil {
				return err
			}
			after = KeyOf(page[len(page)-1])
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// readSnapshot begins a read-only transaction whose reads all see one
// instant: REPEATABLE READ on Postgres (READ COMMITTED would let each query
// see later commits); SQLite's transactions are serializable already.
// Rolling it back ends it. It is for short reads only (SaleSnapshot): a
// transaction held open holds a connection and, on Postgres, a snapshot
// that keeps vacuum from every row changed since it began.
func (s *Store) readSnapshot(ctx context.Context) (*ent.Tx, error) {
	if s.dialect == dialectPostgres {
		return s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	}
	return s.db.Tx(ctx)
}

// OrdersOf returns up to limit of a buyer's orders with ids from fromID
// (inclusive) and below beforeID (0: no bound), newest (highest id) first.
func (s *Store) OrdersOf(ctx context.Context, userID string, fromID, beforeID int64, limit int) ([]*ent.Order, error) {
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	os, err := s.db.Order.Query().
		Where(order.UserID(userID), order.IDGTE(fromID), order.IDLT(beforeID)).
		Order(ent.Desc(order.FieldID)).
		Limit(limit).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("orders of %s: %w", userID, err)
	}
	return os, nil
}

// Sales returns up to limit sales with ids below beforeID (0: no bound),
// newest first.
func (s *Store) Sales(ctx context.Context, beforeID int64, limit int) ([]*ent.Sale, error) {
	q := s.db.Sale.Query()
	if beforeID > 0 {
		q = q.Where(sale.IDLT(beforeID))
	}
	sales, err := q.Order(ent.Desc(sale.FieldID)).Limit(limit).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	return sales, nil
}

// AllSales hands every sale to fn, newest first, a page at a time.
func (s *Store) AllSales(ctx context.Context, fn func(*ent.Sale) error) error {
	const page = 500
	for before := int64(0); ; {
		sales, err := s.Sales(ctx, before, page)
		if err != nil {
			return err
		}
		for _, sl := range sales {
			if err := fn(sl); err != nil {
				return err
			}
		}
		if len(sales) < page {
			return nil
		}
		before = sales[len(sales)-1].ID
	}
}
