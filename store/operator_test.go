package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

func TestEndSaleIsIdempotentAndKeepsTheWindowOrdered(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		id := newSale(t, st, 5)
		now := time.Now()
		sl, changed, err := st.EndSale(ctx, id, now)
		if err != nil || !changed {
			t.Fatal(changed, err)
		}
		if !sl.EndsAt.Equal(now.Truncate(time.Millisecond)) {
			t.Fatalf("ends_at = %s, want %s", sl.EndsAt, now)
		}
		// Ending again later keeps the first end.
		again, changed, err := st.EndSale(ctx, id, now.Add(time.Minute))
		if err != nil || changed || !again.EndsAt.Equal(sl.EndsAt) {
			t.Fatalf("second end: %v %v %v", again, changed, err)
		}
		// A sale ended before it opened ends at once, its window ordered.
		up, err := st.CreateSale(ctx, store.NewSale{Name: "later", PriceCents: 1, Stock: 1,
			StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		sl, _, err = st.EndSale(ctx, up.ID, now)
		if err != nil || sl.EndsAt.After(now) || !sl.StartsAt.Before(sl.EndsAt) {
			t.Fatalf("upcoming sale ended: %+v %v", sl, err)
		}
		if _, _, err := st.EndSale(ctx, 1<<60, now); !errors.Is(err, domain.ErrUnknownSale) {
			t.Fatalf("end of an unknown sale: %v", err)
		}
	})
}

func TestAddUnitsGrowsStockAndTotalTogether(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		id := newSale(t, st, 2)
		if err := st.DeductStock(ctx, domain.OrderRef{OrderID: 9001, SaleID: id, UserID: "u", AmountCents: 1}); err != nil {
			t.Fatal(err)
		}
		sl, err := st.AddUnits(ctx, id, 3, time.Now())
		if err != nil || sl.Stock != 4 || sl.TotalStock != 5 {
			t.Fatalf("after adding 3: %+v %v", sl, err)
		}
		for _, n := range []int{0, -1, store.MaxAddUnits + 1} {
			if _, err := st.AddUnits(ctx, id, n, time.Now()); !errors.Is(err, domain.ErrInvalidOrder) {
				t.Fatalf("adding %d units: %v", n, err)
			}
		}
		if _, err := st.AddUnits(ctx, 1<<60, 1, time.Now()); !errors.Is(err, domain.ErrUnknownSale) {
			t.Fatalf("adding to an unknown sale: %v", err)
		}
		if _, _, err := st.EndSale(ctx, id, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddUnits(ctx, id, 1, time.Now()); !errors.Is(err, domain.ErrEnded) {
			t.Fatalf("adding to an ended sale: %v", err)
		}
		if sl, _ := st.Sale(ctx, id); sl.Stock != 4 || sl.TotalStock != 5 {
			t.Fatalf("refused adds changed the sale: %+v", sl)
		}
	})
}

func TestCancelledSaleRefusesDeductions(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		id := newSale(t, st, 3)
		before := domain.OrderRef{OrderID: 9101, SaleID: id, UserID: "before", AmountCents: 1}
		if err := st.DeductStock(ctx, before); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateOrder(ctx, before); err != nil {
			t.Fatal(err)
		}
		sl, _, err := st.CancelSale(ctx, id, time.Now())
		if err != nil || sl.CancelledAt == nil || sl.EndsAt.After(time.Now()) {
			t.Fatalf("cancel: %+v %v", sl, err)
		}
		first := *sl.CancelledAt
		sl, changed, err := st.CancelSale(ctx, id, time.Now().Add(time.Minute))
		if err != nil || changed || !sl.CancelledAt.Equal(first) {
			t.Fatalf("second cancel: %+v %v %v", sl, changed, err)
		}
		after := domain.OrderRef{OrderID: 9102, SaleID: id, UserID: "after", AmountCents: 1}
		if err := st.DeductStock(ctx, after); !errors.Is(err, domain.ErrSaleCancelled) {
			t.Fatalf("deduction after the cancel: %v, want ErrSaleCancelled", err)
		}
		if len(ledger(t, st, after.OrderID)) != 0 {
			t.Fatal("a refused deduction left a ledger row")
		}
		if got := stockOf(t, st, id); got != 2 {
			t.Fatalf("stock %d, want 2", got)
		}
		open, err := st.OpenOrders(ctx, id, 10)
		if err != nil || len(open) != 1 || open[0].ID != before.OrderID {
			t.Fatalf("open orders: %v %v", open, err)
		}
		ids, err := st.CancelledWithOpenOrders(ctx)
		if err != nil || !contains(ids, id) {
			t.Fatalf("cancelled sales with open orders %v (%v) lack %d", ids, err, id)
		}
		if _, err := st.FinishOrder(ctx, before, domain.StatusCancelled, "sale cancelled"); err != nil {
			t.Fatal(err)
		}
		if ids, _ := st.CancelledWithOpenOrders(ctx); contains(ids, id) {
			t.Fatal("a sale without open orders is still listed")
		}
	})
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
