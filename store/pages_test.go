package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// mintRows mints n ids and makes a row of sale for each, the statuses
// going round statuses.
func mintRows(t *testing.T, sale int64, n int, statuses ...domain.Status) []testenv.OrderRow {
	t.Helper()
	g := orderid.New(7)
	rows := make([]testenv.OrderRow, n)
	for i := range rows {
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = testenv.OrderRow{ID: id, SaleID: sale, UserID: fmt.Sprintf("buyer-%d", i), Status: statuses[i%len(statuses)]}
	}
	return rows
}

func TestSaleOrdersPageByID(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale, other := newSale(t, st, 10), newSale(t, st, 10)
		rows := mintRows(t, sale, 250, domain.StatusPaid, domain.StatusAwaitingPayment, domain.StatusCancelled)
		// Written out of id order, as workflows write them.
		written := slices.Clone(rows)
		slices.Reverse(written)
		testenv.WriteOrders(t, st, written)
		testenv.WriteOrders(t, st, mintRows(t, other, 5, domain.StatusPaid))

		var got []int64
		for after := int64(0); ; {
			page, err := st.SaleOrders(ctx, sale, store.SaleOrderFilter{Status: domain.StatusPaid}, after, 30)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page {
				got = append(got, o.ID)
			}
			if len(page) < 30 {
				break
			}
			after = page[len(page)-1].ID
		}
		var want []int64
		for _, r := range rows {
			if r.Status == domain.StatusPaid {
				want = append(want, r.ID)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged PAID orders: %d ids, want the %d PAID ones in id order", len(got), len(want))
		}

		// A window of ids keeps the rows inside it.
		f := store.SaleOrderFilter{FromID: rows[10].ID, ToID: rows[20].ID}
		page, err := st.SaleOrders(ctx, sale, f, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 10 || page[0].ID != rows[10].ID || page[9].ID != rows[19].ID {
			t.Fatalf("ids [rows[10], rows[20]): got %d rows", len(page))
		}
	})
}

// An export sees the database as it was when it began, however the rows
// change while it is read, and holds one page at a time.
func TestExportReadsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t) // Postgres: SQLite's one connection cannot write beside the open export
	sale := newSale(t, st, 10)
	rows := mintRows(t, sale, 2500, domain.StatusAwaitingPayment)
	testenv.WriteOrders(t, st, rows[:2000])
	late := rows[2000:]

	var got []*ent.Order
	pages := 0
	err := st.ExportSaleOrders(ctx, sale, store.SaleOrderFilter{}, 300, func(page []*ent.Order) error {
		if len(page) > 300 {
			t.Fatalf("a page of %d rows, more than the 300 asked", len(page))
		}
		got = append(got, page...)
		if pages++; pages == 1 {
			// Behind the export's back: new rows after its position, and
			// rows not read yet paid.
			testenv.WriteOrders(t, st, late)
			n, err := st.Client().Order.Update().
				Where(order.SaleID(sale), order.IDGT(rows[1500].ID)).
				SetStatus(order.StatusPAID).Save(ctx)
			if err != nil || n == 0 {
				t.Fatalf("pay later rows: %d, %v", n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2000 {
		t.Fatalf("exported %d rows, want the 2000 of when the export began", len(got))
	}
	for i, o := range got {
		if o.ID != rows[i].ID || o.Status != order.StatusAWAITING_PAYMENT {
			t.Fatalf("row %d: %d %s, want %d AWAITING_PAYMENT as it was", i, o.ID, o.Status, rows[i].ID)
		}
	}
	if err := st.ExportSaleOrders(ctx, 999, store.SaleOrderFilter{}, 300, func([]*ent.Order) error { return nil }); err != domain.ErrUnknownSale {
		t.Fatalf("export of an unknown sale: %v, want ErrUnknownSale", err)
	}
}
