package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/stockmovement"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// backends runs a test against real Postgres and against the embedded
// SQLite database of dev mode, which must behave the same.
func backends(t *testing.T, test func(t *testing.T, st *store.Store)) {
	t.Run("postgres", func(t *testing.T) { test(t, testenv.Store(t)) })
	t.Run("sqlite", func(t *testing.T) {
		ctx := context.Background()
		st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "seckill.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		test(t, st)
	})
}

func newSale(t *testing.T, st *store.Store, units int) int64 {
	t.Helper()
	s, err := st.CreateSale(context.Background(), store.NewSale{
		Name: "phone", PriceCents: 49900, Stock: units,
		StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func stockOf(t testing.TB, st *store.Store, sale int64) int {
	t.Helper()
	s, err := st.Sale(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return s.Stock
}

func ledger(t *testing.T, st *store.Store, orderID int64) []stockmovement.Kind {
	t.Helper()
	moves, err := st.Client().StockMovement.Query().Where(stockmovement.OrderID(orderID)).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []stockmovement.Kind
	for _, m := range moves {
		kinds = append(kinds, m.Kind)
	}
	return kinds
}

func TestDeductStockOncePerOrder(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 3)
		ref := domain.OrderRef{OrderID: 100, SaleID: sale, UserID: "u", AmountCents: 49900}
		var wg sync.WaitGroup
		for range 20 { // retried and concurrent attempts of one activity
			wg.Go(func() {
				if err := st.DeductStock(ctx, ref); err != nil {
					t.Errorf("deduct: %v", err)
				}
			})
		}
		wg.Wait()
		if got := stockOf(t, st, sale); got != 2 {
			t.Fatalf("stock = %d, want 2", got)
		}
		if k := ledger(t, st, 100); len(k) != 1 || k[0] != stockmovement.KindDEDUCT {
			t.Fatalf("ledger = %v, want one DEDUCT", k)
		}
	})
}

func TestDeductStockOutOfStockAndUnknownSale(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 1)
		if err := st.DeductStock(ctx, domain.OrderRef{OrderID: 1, SaleID: sale}); err != nil {
			t.Fatal(err)
		}
		err := st.DeductStock(ctx, domain.OrderRef{OrderID: 2, SaleID: sale})
		if !errors.Is(err, domain.ErrOutOfStock) {
			t.Fatalf("deduct from empty stock: %v, want ErrOutOfStock", err)
		}
		if k := ledger(t, st, 2); len(k) != 0 {
			t.Fatalf("a refused deduction wrote ledger rows %v", k)
		}
		err = st.DeductStock(ctx, domain.OrderRef{OrderID: 3, SaleID: sale + 1000})
		if !errors.Is(err, domain.ErrInvalidOrder) {
			t.Fatalf("deduct from unknown sale: %v, want ErrInvalidOrder", err)
		}
		if got := stockOf(t, st, sale); got != 0 {
			t.Fatalf("stock = %d, want 0", got)
		}
	})
}

func TestRestoreStockOnceAndOnlyAfterDeduct(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 2)
		if restored, err := st.RestoreStock(ctx, domain.OrderRef{OrderID: 4, SaleID: sale}); err != nil || restored {
			t.Fatalf("restore before deduct: restored=%v err=%v; want nothing", restored, err)
		}
		ref := domain.OrderRef{OrderID: 5, SaleID: sale}
		if err := st.DeductStock(ctx, ref); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			restored, err := st.RestoreStock(ctx, ref)
			if err != nil || restored != (i == 0) {
				t.Fatalf("restore #%d: restored=%v err=%v", i+1, restored, err)
			}
		}
		if got := stockOf(t, st, sale); got != 2 {
			t.Fatalf("stock = %d, want 2", got)
		}
	})
}

func TestStockCannotGoNegativeInTheDatabase(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 0)
		_, err := st.Client().Sale.UpdateOneID(sale).AddStock(-1).Save(ctx)
		if err == nil {
			t.Fatal("the database accepted a negative stock")
		}
	})
}

func TestOrderLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 5)
		ref := domain.OrderRef{OrderID: 10, SaleID: sale, UserID: "ivy", AmountCents: 49900}
		for range 2 {
			if err := st.CreateOrder(ctx, ref); err != nil {
				t.Fatalf("create (retried): %v", err)
			}
		}
		// A second live order of the same buyer is refused by the database.
		err := st.CreateOrder(ctx, domain.OrderRef{OrderID: 11, SaleID: sale, UserID: "ivy", AmountCents: 49900})
		if !errors.Is(err, domain.ErrInvalidOrder) {
			t.Fatalf("second live order: %v, want ErrInvalidOrder", err)
		}
		at, err := st.RecordPaid(ctx, 10, "", "")
		if err != nil || at.IsZero() {
			t.Fatalf("pay: %v, %v", at, err)
		}
		if again, err := st.RecordPaid(ctx, 10, "", ""); err != nil || !again.Equal(at) {
			t.Fatalf("paying twice: %v, %v; want no error and the first payment's time %v", again, err, at)
		}
		// A paid order is final: cancelling it changes nothing, and the
		// caller learns that it is PAID.
		if final, err := st.FinishOrder(ctx, ref, domain.StatusCancelled, "late"); err != nil || final != domain.StatusPaid {
			t.Fatalf("finishing a paid order = %s, %v; want PAID", final, err)
		}
		o, err := st.Order(ctx, 10)
		if err != nil || o.Status != order.StatusPAID {
			t.Fatalf("order = %+v, %v; want PAID", o, err)
		}
		// The time the pay returned is the row's, as a read shows it (the
		// pay update answers with it: orders.Service.transition).
		if o.PaidAt == nil || !o.PaidAt.Equal(at) || !o.UpdatedAt.Equal(at) {
			t.Fatalf("row paid at %v, updated at %v; want both %v", o.PaidAt, o.UpdatedAt, at)
		}
		// A row changed since it was paid (or paid by a build that wrote
		// updated_at apart from paid_at): a repeat says no time, and the
		// api reads the row instead of answering updated_at = paid_at.
		if err := st.Client().Order.UpdateOneID(10).SetUpdatedAt(at.Add(time.Millisecond)).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if again, err := st.RecordPaid(ctx, 10, "", ""); err != nil || !again.IsZero() {
			t.Fatalf("paying a row changed since: %v, %v; want no error and no time", again, err)
		}
	})
}

func TestFinishOrderWritesMissingRowsAndFreesTheBuyer(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 5)
		// The saga failed before CreateOrder: the ending still gets a row.
		failed := domain.OrderRef{OrderID: 20, SaleID: sale, UserID: "jack", AmountCents: 49900}
		if final, err := st.FinishOrder(ctx, failed, domain.StatusFailed, "deduct stock: out of stock"); err != nil || final != domain.StatusFailed {
			t.Fatalf("finish = %s, %v; want FAILED", final, err)
		}
		o, err := st.Order(ctx, 20)
		if err != nil || o.Status != order.StatusFAILED || o.Reason == "" {
			t.Fatalf("order = %+v, %v; want FAILED with a reason", o, err)
		}
		// Cancelling an awaiting order frees the buyer to buy again.
		first := domain.OrderRef{OrderID: 21, SaleID: sale, UserID: "kate", AmountCents: 49900}
		if err := st.CreateOrder(ctx, first); err != nil {
			t.Fatal(err)
		}
		if final, err := st.FinishOrder(ctx, first, domain.StatusCancelled, "cancelled by buyer"); err != nil || final != domain.StatusCancelled {
			t.Fatalf("finish = %s, %v; want CANCELLED", final, err)
		}
		if err := st.CreateOrder(ctx, domain.OrderRef{OrderID: 22, SaleID: sale, UserID: "kate", AmountCents: 49900}); err != nil {
			t.Fatalf("buying again after a cancel: %v", err)
		}
		if err := st.MarkPaid(ctx, 21); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("paying a cancelled order: %v, want ErrConflict", err)
		}
		if _, err := st.FinishOrder(ctx, first, domain.StatusPaid, ""); err == nil {
			t.Fatal("FinishOrder accepted a live status")
		}
		counts, err := st.CountByStatus(ctx, sale)
		if err != nil {
			t.Fatal(err)
		}
		want := map[domain.Status]int{domain.StatusFailed: 1, domain.StatusCancelled: 1, domain.StatusAwaitingPayment: 1}
		for s, n := range want {
			if counts[s] != n {
				t.Fatalf("counts = %v, want %v", counts, want)
			}
		}
	})
}

func TestCreateSaleRejectsAnEmptyWindow(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		now := time.Now()
		_, err := st.CreateSale(context.Background(), store.NewSale{Name: "x", Stock: 1, StartsAt: now, EndsAt: now})
		if err == nil {
			t.Fatal("a sale that ends when it starts was accepted")
		}
		if sales, _ := st.Sales(context.Background(), 0, 10); len(sales) != 0 {
			t.Fatalf("a refused sale was written: %v", sales)
		}
	})
}

// A CreateOrder that arrives after the saga ended the order (its local
// activity was cancelled while its insert was in flight) finds the final
// row and leaves it alone: the order stays ended, the buyer stays free.
func TestLateCreateOrderKeepsTheEnding(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 5)
		ref := domain.OrderRef{OrderID: 30, SaleID: sale, UserID: "lee", AmountCents: 49900}
		if final, err := st.FinishOrder(ctx, ref, domain.StatusCancelled, "order workflow cancelled"); err != nil || final != domain.StatusCancelled {
			t.Fatalf("finish = %s, %v", final, err)
		}
		if err := st.CreateOrder(ctx, ref); err != nil {
			t.Fatalf("late create: %v", err)
		}
		o, err := st.Order(ctx, 30)
		if err != nil || o.Status != order.StatusCANCELLED {
			t.Fatalf("order = %+v, %v; want CANCELLED", o, err)
		}
	})
}

// A deduction that arrives after its order's restore ran (the restore left
// a tombstone) backs off, so the unit is not taken for an ended order.
func TestDeductionAfterItsRestoreDoesNotLand(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 3)
		ref := domain.OrderRef{OrderID: 40, SaleID: sale, UserID: "mia", AmountCents: 49900}
		restored, err := st.RestoreStock(ctx, ref)
		if err != nil || restored {
			t.Fatalf("restore before any deduction = %v, %v; want false, nil", restored, err)
		}
		if err := st.DeductStock(ctx, ref); !errors.Is(err, domain.ErrCompensated) {
			t.Fatalf("late deduction: %v, want ErrCompensated", err)
		}
		if got := stockOf(t, st, sale); got != 3 {
			t.Fatalf("stock = %d, want 3", got)
		}
		if again, err := st.RestoreStock(ctx, ref); err != nil || again {
			t.Fatalf("second restore = %v, %v", again, err)
		}
		if got := stockOf(t, st, sale); got != 3 {
			t.Fatalf("stock after a second restore = %d, want 3", got)
		}
	})
}

// Concurrent attempts of one order's deduction, racing a restore of the
// same order, leave the stock as the ledger says: taken and given back, or
// never taken.
func TestDeductionRacingItsRestoreNeverLeaks(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	sale := newSale(t, st, 50)
	var wg sync.WaitGroup
	for i := range 40 {
		ref := domain.OrderRef{OrderID: int64(100 + i), SaleID: sale, UserID: "u", AmountCents: 1}
		wg.Add(3)
		go func() { defer wg.Done(); _ = st.DeductStock(ctx, ref) }()
		go func() { defer wg.Done(); _ = st.DeductStock(ctx, ref) }()
		go func() {
			defer wg.Done()
			if _, err := st.RestoreStock(ctx, ref); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := stockOf(t, st, sale); got != 50 {
		t.Fatalf("stock = %d after every order was restored, want 50", got)
	}
}

// Two attempts of one order's deduction on the last unit: the second waits
// for the first's ledger row and succeeds, instead of reporting a false
// out-of-stock.
func TestRetriedDeductionOnTheLastUnit(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	for round := range 20 {
		sale := newSale(t, st, 1)
		ref := domain.OrderRef{OrderID: int64(200 + round), SaleID: sale, UserID: "v", AmountCents: 1}
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- st.DeductStock(ctx, ref) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if got := stockOf(t, st, sale); got != 0 {
			t.Fatalf("round %d: stock = %d, want 0", round, got)
		}
	}
}

// PlaceOrder takes the unit and writes the row in one transaction:
// concurrent attempts of one order (a retried local activity) place it
// once, the row is AWAITING_PAYMENT, and a refusal leaves neither a
// deduction nor a row.
func TestPlaceOrderOncePerOrder(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 2)
		ref := domain.OrderRef{OrderID: 500, SaleID: sale, UserID: "pia", AmountCents: 49900}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if err := st.PlaceOrder(ctx, ref); err != nil {
					t.Errorf("place: %v", err)
				}
			})
		}
		wg.Wait()
		if got := stockOf(t, st, sale); got != 1 {
			t.Fatalf("stock = %d, want 1", got)
		}
		if k := ledger(t, st, 500); len(k) != 1 || k[0] != stockmovement.KindDEDUCT {
			t.Fatalf("ledger = %v, want one DEDUCT", k)
		}
		if o, err := st.Order(ctx, 500); err != nil || o.Status != order.StatusAWAITING_PAYMENT {
			t.Fatalf("order = %+v, %v; want AWAITING_PAYMENT", o, err)
		}

		// The buyer's second order of the sale cannot get a row, so it
		// takes no unit either.
		err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: 501, SaleID: sale, UserID: "pia", AmountCents: 49900})
		if !errors.Is(err, domain.ErrInvalidOrder) {
			t.Fatalf("second live order of a buyer: %v, want ErrInvalidOrder", err)
		}
		if got, k := stockOf(t, st, sale), ledger(t, st, 501); got != 1 || len(k) != 0 {
			t.Fatalf("a refused order left stock %d (want 1) and ledger %v", got, k)
		}

		// Sold out: nothing written.
		if err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: 502, SaleID: sale, UserID: "quinn", AmountCents: 49900}); err != nil {
			t.Fatal(err)
		}
		err = st.PlaceOrder(ctx, domain.OrderRef{OrderID: 503, SaleID: sale, UserID: "ravi", AmountCents: 49900})
		if !errors.Is(err, domain.ErrOutOfStock) {
			t.Fatalf("place on empty stock: %v, want ErrOutOfStock", err)
		}
		if _, err := st.Order(ctx, 503); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a refused order has a row: %v", err)
		}
	})
}

// A PlaceOrder that arrives after its order's restore ran backs off, and
// writes no row: the ending (FinishOrder) owns the row then.
func TestPlaceOrderAfterItsRestoreDoesNotLand(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 3)
		ref := domain.OrderRef{OrderID: 510, SaleID: sale, UserID: "sam", AmountCents: 49900}
		if _, err := st.RestoreStock(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := st.PlaceOrder(ctx, ref); !errors.Is(err, domain.ErrCompensated) {
			t.Fatalf("late place: %v, want ErrCompensated", err)
		}
		if got := stockOf(t, st, sale); got != 3 {
			t.Fatalf("stock = %d, want 3", got)
		}
		if _, err := st.Order(ctx, 510); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a compensated order got a row: %v", err)
		}
	})
}

// A run reset to before its order's end (the Web UI's Reset) places the
// order again: it must neither take the unit again nor revive the row. A
// PlaceOrder of an ended order is refused with the status it ended in.
func TestPlaceOrderOfAnEndedOrderIsRefused(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 3)
		paid := domain.OrderRef{OrderID: 520, SaleID: sale, UserID: "tia", AmountCents: 49900}
		cancelled := domain.OrderRef{OrderID: 521, SaleID: sale, UserID: "uma", AmountCents: 49900}
		for _, ref := range []domain.OrderRef{paid, cancelled} {
			if err := st.PlaceOrder(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.MarkPaid(ctx, paid.OrderID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.FinishOrder(ctx, cancelled, domain.StatusCancelled, "cancelled by buyer"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RestoreStock(ctx, cancelled); err != nil {
			t.Fatal(err)
		}
		for ref, want := range map[domain.OrderRef]domain.Status{paid: domain.StatusPaid, cancelled: domain.StatusCancelled} {
			err := st.PlaceOrder(ctx, ref)
			var se *domain.StateError
			if !errors.As(err, &se) || se.Status != want {
				t.Fatalf("place order %d again: %v, want a StateError with %s", ref.OrderID, err, want)
			}
			if o, err := st.Order(ctx, ref.OrderID); err != nil || domain.Status(o.Status) != want {
				t.Fatalf("order %d = %+v, %v; want %s", ref.OrderID, o, err, want)
			}
		}
		if got := stockOf(t, st, sale); got != 2 {
			t.Fatalf("stock = %d, want 2 (one paid, one restored)", got)
		}
	})
}

// An operator ends a sale in the database before Redis hears of it, and
// the relay may start an order minutes after its admission: an order
// admitted after the end takes no unit and gets no row, while one
// admitted before the end (however late it is placed) keeps its unit.
func TestOrderAdmittedAfterTheEndIsRefused(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 3)
		before := domain.OrderRef{OrderID: 530, SaleID: sale, UserID: "ava", AmountCents: 49900} // admitted in 2025
		if _, _, err := st.EndSale(ctx, sale, time.Now().Add(-2*store.AdmissionSkew)); err != nil {
			t.Fatal(err)
		}
		late, err := orderid.New(7).Next() // admitted now, after the end
		if err != nil {
			t.Fatal(err)
		}
		after := domain.OrderRef{OrderID: late, SaleID: sale, UserID: "bo", AmountCents: 49900}
		if err := st.PlaceOrder(ctx, after); !errors.Is(err, domain.ErrAdmittedAfterEnd) {
			t.Fatalf("place an order admitted after the end: %v, want ErrAdmittedAfterEnd", err)
		}
		if err := st.DeductStock(ctx, after); !errors.Is(err, domain.ErrAdmittedAfterEnd) {
			t.Fatalf("deduct for an order admitted after the end: %v, want ErrAdmittedAfterEnd", err)
		}
		if err := st.PlaceOrder(ctx, before); err != nil {
			t.Fatalf("place an order admitted before the end: %v", err)
		}
		if got, k := stockOf(t, st, sale), ledger(t, st, late); got != 2 || len(k) != 0 {
			t.Fatalf("stock %d (want 2), ledger of the late order %v (want none)", got, k)
		}
	})
}

// EndOrder ends the row and gives the unit back in one transaction, once;
// a row that says PAID keeps its unit; an order that never deducted gets
// the tombstone that turns away a late PlaceOrder.
func TestEndOrderEndsAndRestoresOnce(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 2)
		ref := domain.OrderRef{OrderID: orderid.FirstAt(time.Now()) + 1, SaleID: sale, UserID: "u1", AmountCents: 49900}
		if err := st.PlaceOrder(ctx, ref); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			final, restored, err := st.EndOrder(ctx, ref, domain.StatusExpired, "payment timeout")
			if err != nil || final != domain.StatusExpired || restored != (i == 0) {
				t.Fatalf("end #%d: %s restored=%v %v; want EXPIRED, restored the first time only", i+1, final, restored, err)
			}
		}
		if got := stockOf(t, st, sale); got != 2 {
			t.Fatalf("stock = %d after the ending, want 2", got)
		}

		paid := domain.OrderRef{OrderID: ref.OrderID + 1, SaleID: sale, UserID: "u2", AmountCents: 49900}
		if err := st.PlaceOrder(ctx, paid); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkPaid(ctx, paid.OrderID); err != nil {
			t.Fatal(err)
		}
		if final, restored, err := st.EndOrder(ctx, paid, domain.StatusCancelled, "order workflow cancelled"); err != nil || final != domain.StatusPaid || restored {
			t.Fatalf("ending a paid row: %s restored=%v %v; want PAID and the unit kept", final, restored, err)
		}
		if got := stockOf(t, st, sale); got != 1 {
			t.Fatalf("stock = %d with one unit paid for, want 1", got)
		}

		never := domain.OrderRef{OrderID: ref.OrderID + 2, SaleID: sale, UserID: "u3", AmountCents: 49900}
		if final, restored, err := st.EndOrder(ctx, never, domain.StatusFailed, "place order: out of stock"); err != nil || final != domain.StatusFailed || restored {
			t.Fatalf("ending an order that never deducted: %s restored=%v %v", final, restored, err)
		}
		if err := st.PlaceOrder(ctx, never); err == nil {
			t.Fatal("a PlaceOrder after its order's ending landed")
		}
		if got := stockOf(t, st, sale); got != 1 {
			t.Fatalf("stock = %d after a late PlaceOrder, want 1", got)
		}
	})
}

// Endings racing late placings of the same orders neither deadlock nor
// leak a unit: each order's unit is taken and given back, or never taken.
func TestEndOrderRacingItsPlacingNeverLeaks(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	sale := newSale(t, st, 50)
	first := orderid.FirstAt(time.Now())
	var wg sync.WaitGroup
	for i := range 40 {
		ref := domain.OrderRef{OrderID: first + int64(i), SaleID: sale, UserID: "u" + string(rune('a'+i)), AmountCents: 1}
		wg.Add(2)
		go func() { defer wg.Done(); _ = st.PlaceOrder(ctx, ref) }()
		go func() {
			defer wg.Done()
			if _, _, err := st.EndOrder(ctx, ref, domain.StatusCancelled, "race"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := stockOf(t, st, sale); got != 50 {
		t.Fatalf("stock = %d after every order ended, want 50", got)
	}
}
