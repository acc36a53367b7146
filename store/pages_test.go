package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// mintRows mints n ids and makes a row of sale for each, admitted a
// millisecond apart in id order, the statuses going round statuses.
func mintRows(t *testing.T, sale int64, n int, statuses ...domain.Status) []testenv.OrderRow {
	t.Helper()
	g := orderid.New(7)
	start := time.Now().Truncate(time.Millisecond).Add(-time.Hour)
	rows := make([]testenv.OrderRow, n)
	for i := range rows {
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = testenv.OrderRow{ID: id, SaleID: sale, UserID: fmt.Sprintf("buyer-%d", i), Status: statuses[i%len(statuses)],
			AdmittedAt: start.Add(time.Duration(i) * time.Millisecond)}
	}
	return rows
}

func TestSaleOrdersPageByAdmission(t *testing.T) {
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
		for after := (store.SaleOrderKey{}); ; {
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
			after = store.KeyOf(page[len(page)-1])
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

		// A window of admission times keeps the rows inside it.
		f := store.SaleOrderFilter{Since: rows[10].AdmittedAt, Until: rows[20].AdmittedAt}
		page, err := st.SaleOrders(ctx, sale, f, store.SaleOrderKey{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 10 || page[0].ID != rows[10].ID || page[9].ID != rows[19].ID {
			t.Fatalf("admitted in [rows[10], rows[20]): got %d rows", len(page))
		}
	})
}

// An export holds nothing while its reader takes a page: no transaction,
// no snapshot, no connection (SQLite has one), however long the reader
// takes. What it hands out is what a walk of the pages lists: each row as
// of when its page was read, rows written behind its position not at all,
// rows written ahead of it once, no row twice.
func TestExportHoldsNothingBetweenPages(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 10)
		rows := mintRows(t, sale, 2500, domain.StatusAwaitingPayment)
		behind, late := rows[100], rows[2000:]
		testenv.WriteOrders(t, st, slices.Concat(rows[:100], rows[101:2000]))

		var got []*ent.Order
		pages := 0
		err := st.ExportSaleOrders(ctx, sale, store.SaleOrderFilter{}, 300, func(page []*ent.Order) error {
			if len(page) > 300 {
				t.Fatalf("a page of %d rows, more than the 300 asked", len(page))
			}
			got = append(got, page...)
			if pages++; pages > 1 {
				return nil
			}
			if held := testenv.HeldSnapshots(t, st); held != "" {
				t.Fatalf("while the reader takes a page, the export holds %s", held)
			}
			// Beside the export, as the workflows write: a row behind its
			// position, rows ahead of it, and rows not read yet paid. The
			// deadline is for SQLite, whose one connection an open
			// transaction would keep from these writes for good.
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for _, r := range append([]testenv.OrderRow{behind}, late...) {
				if err := st.Client().Order.Create().SetID(r.ID).SetSaleID(r.SaleID).SetUserID(r.UserID).
					SetAmountCents(100).SetStatus(order.Status(r.Status)).SetAdmittedAt(r.AdmittedAt).Exec(wctx); err != nil {
					t.Fatalf("write order %d beside the export: %v", r.ID, err)
				}
			}
			n, err := st.Client().Order.Update().
				Where(order.SaleID(sale), order.IDGT(rows[1500].ID)).
				SetStatus(order.StatusPAID).Save(wctx)
			if err != nil || n == 0 {
				t.Fatalf("pay later rows beside the export: %d, %v", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(rows[:100], rows[101:])
		if len(got) != len(want) {
			t.Fatalf("exported %d rows, want %d: all but the one written behind the export's position", len(got), len(want))
		}
		for i, o := range got {
			status := order.StatusAWAITING_PAYMENT
			if o.ID > rows[1500].ID {
				status = order.StatusPAID // as of when its page was read
			}
			if o.ID != want[i].ID || o.Status != status {
				t.Fatalf("row %d: %d %s, want %d %s", i, o.ID, o.Status, want[i].ID, status)
			}
		}
		if err := st.ExportSaleOrders(ctx, 999, store.SaleOrderFilter{}, 300, func([]*ent.Order) error { return nil }); err != domain.ErrUnknownSale {
			t.Fatalf("export of an unknown sale: %v, want ErrUnknownSale", err)
		}
	})
}

// An order's row keeps the admission time its intent carried, whatever
// time its id encodes (the id fence may put that seconds ahead); a ref
// without one (a workflow started before intents carried it) takes the
// id's; and a row written without one (by an earlier version) gets the
// id's from Migrate, so that every row is in the lists.
func TestRowsKeepTheirAdmissionTime(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 10)
		now := time.Now().Truncate(time.Millisecond).UTC()
		ahead := orderid.FirstAt(now.Add(20*time.Second)) | 3<<12 // minted above a lease floor
		if err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: ahead, SaleID: sale, UserID: "fenced", AmountCents: 49900,
			AdmittedAt: now}); err != nil {
			t.Fatal(err)
		}
		old := orderid.FirstAt(now.Add(-time.Second)) | 3<<12
		if err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: old, SaleID: sale, UserID: "before", AmountCents: 49900}); err != nil {
			t.Fatal(err)
		}
		unrecorded := orderid.FirstAt(now.Add(-2*time.Second)) | 3<<12
		if err := st.Client().Order.Create().SetID(unrecorded).SetSaleID(sale).SetUserID("earlier-version").
			SetAmountCents(49900).SetStatus(order.StatusAWAITING_PAYMENT).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int64]time.Time{ahead: now, old: orderid.Time(old), unrecorded: orderid.Time(unrecorded)} {
			row, err := st.Order(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.AdmittedAt == nil || !row.AdmittedAt.Equal(want) {
				t.Errorf("order %s admitted_at = %v, want %s", row.UserID, row.AdmittedAt, want.Format(time.RFC3339Nano))
			}
		}
		page, err := st.SaleOrders(ctx, sale, store.SaleOrderFilter{Since: now, Until: now.Add(time.Millisecond)}, store.SaleOrderKey{}, 10)
		if err != nil || len(page) != 1 || page[0].ID != ahead {
			t.Fatalf("orders admitted in the millisecond %s: %d rows (%v), want the fenced one", now.Format(time.RFC3339Nano), len(page), err)
		}
	})
}
