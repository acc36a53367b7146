package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/stockmovement"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// paidOrder places and pays order id of user on sale, at the built-in
// provider unless provider is "".
func paidOrder(t *testing.T, st *store.Store, sale, id int64, user, provider string) domain.OrderRef {
	t.Helper()
	ctx := context.Background()
	ref := domain.OrderRef{OrderID: id, SaleID: sale, UserID: user, AmountCents: 49900}
	if err := st.PlaceOrder(ctx, ref); err != nil {
		t.Fatal(err)
	}
	paymentID := ""
	if provider != "" {
		paymentID = "pay_" + user
	}
	if err := st.MarkPaidWith(ctx, id, provider, paymentID); err != nil {
		t.Fatal(err)
	}
	return ref
}

// An operator's refund with a restock on an open sale gives the unit back
// once, with its ledger row, and frees the buyer to buy again; a repeat
// changes nothing and restores nothing more.
func TestRefundOrderRestocksOnceWhileTheSaleIsOpen(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 2)
		ref := paidOrder(t, st, sale, 30, "ann", "builtin")
		refund := store.OperatorRefund{RefundID: "re_1", Reason: "lost parcel", Restock: true}
		rec, err := st.RefundOrder(ctx, ref, refund, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := store.RefundRecord{Status: domain.StatusRefundedRestocked, Reason: store.RefundRestockedReason, Recorded: true, Restored: true}
		if rec != want {
			t.Fatalf("refund = %+v, want %+v", rec, want)
		}
		for range 2 { // a retry after the commit, and a repeated request
			rec, err = st.RefundOrder(ctx, ref, store.OperatorRefund{RefundID: "re_other", Reason: "again", Restock: true}, time.Now())
			if err != nil || rec != (store.RefundRecord{Status: domain.StatusRefundedRestocked, Reason: store.RefundRestockedReason}) {
				t.Fatalf("repeat = %+v, %v; want the refund as it was, nothing done", rec, err)
			}
		}
		if got := stockOf(t, st, sale); got != 2 {
			t.Errorf("stock = %d, want 2: the unit back once", got)
		}
		if got := ledger(t, st, ref.OrderID); !slices.Equal(got, []stockmovement.Kind{stockmovement.KindDEDUCT, stockmovement.KindRESTORE}) {
			t.Errorf("ledger = %v, want DEDUCT, RESTORE", got)
		}
		o, err := st.Order(ctx, ref.OrderID)
		if err != nil || o.RefundID != "re_1" || o.RefundReason != "lost parcel" || o.RefundedAt == nil || o.PaymentID != "pay_ann" {
			t.Fatalf("row = %+v, %v; want the first refund recorded", o, err)
		}
		// The buyer is free: another order of theirs may hold a unit.
		if err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: 31, SaleID: sale, UserID: "ann", AmountCents: 49900}); err != nil {
			t.Errorf("the buyer's next order after a restocked refund: %v", err)
		}
	})
}

// Without a restock, or on a sale that has ended or was cancelled, the
// refunded order keeps its unit, and its buyer's place: the reason says
// why. An order paid without a provider is recorded with no refund id.
func TestRefundOrderKeepsTheUnitUnlessRestockedOnAnOpenSale(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, tc := range []struct {
			name    string
			restock bool
			close   func(sale int64) error
			reason  string
		}{
			{name: "not asked", reason: store.RefundNotAskedReason},
			{name: "ended", restock: true, reason: store.RefundSaleEndedReason, close: func(sale int64) error {
				_, _, err := st.EndSale(ctx, sale, time.Now())
				return err
			}},
			{name: "cancelled", restock: true, reason: store.RefundSaleCancelReason, close: func(sale int64) error {
				_, _, err := st.CancelSale(ctx, sale, time.Now())
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sale := newSale(t, st, 2)
				ref := paidOrder(t, st, sale, 40, "bea", "")
				if tc.close != nil {
					if err := tc.close(sale); err != nil {
						t.Fatal(err)
					}
				}
				rec, err := st.RefundOrder(ctx, ref, store.OperatorRefund{Reason: "r", Restock: tc.restock}, time.Now())
				want := store.RefundRecord{Status: domain.StatusRefunded, Reason: tc.reason, Recorded: true}
				if err != nil || rec != want {
					t.Fatalf("refund = %+v, %v; want %+v", rec, err, want)
				}
				if got := stockOf(t, st, sale); got != 1 {
					t.Errorf("stock = %d, want 1: the unit stays out", got)
				}
				if o, err := st.Order(ctx, ref.OrderID); err != nil || o.RefundID != "" || o.RefundedAt == nil || string(o.Status) != "REFUNDED" {
					t.Errorf("row = %+v, %v; want REFUNDED without a provider's refund id", o, err)
				}
				err = st.PlaceOrder(ctx, domain.OrderRef{OrderID: 41, SaleID: sale, UserID: "bea", AmountCents: 49900})
				if err == nil && tc.close == nil {
					t.Errorf("the buyer of a REFUNDED order placed a second live order")
				}
				st.Client().StockMovement.Delete().ExecX(ctx)
				st.Client().Order.Delete().ExecX(ctx)
			})
		}
	})
}

// Only a PAID order is refunded: any other status is answered unchanged,
// an unknown order is not found.
func TestRefundOrderOnlyOfAPaidOrder(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 2)
		ref := domain.OrderRef{OrderID: 50, SaleID: sale, UserID: "cy", AmountCents: 49900}
		if err := st.PlaceOrder(ctx, ref); err != nil {
			t.Fatal(err)
		}
		rec, err := st.RefundOrder(ctx, ref, store.OperatorRefund{Reason: "r", Restock: true}, time.Now())
		if err != nil || rec.Status != domain.StatusAwaitingPayment || rec.Recorded || rec.Restored {
			t.Fatalf("refund of an order awaiting payment = %+v, %v; want its status, nothing done", rec, err)
		}
		if got := stockOf(t, st, sale); got != 1 {
			t.Errorf("stock = %d, want 1", got)
		}
		_, err = st.RefundOrder(ctx, domain.OrderRef{OrderID: 51, SaleID: sale, UserID: "cy"}, store.OperatorRefund{Reason: "r"}, time.Now())
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("refund of an unknown order: %v, want not found", err)
		}
	})
}

// A database whose one-live-order index predates REFUNDED_RESTOCKED gets
// the index that frees a restocked buyer from `seckill migrate`.
func TestMigrateFreesRestockedBuyersInTheIndex(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	if _, err := st.DB().ExecContext(ctx, `DROP INDEX orders_one_live_per_buyer;
CREATE UNIQUE INDEX orders_one_live_per_buyer ON orders (sale_id, user_id) WHERE status NOT IN ('CANCELLED', 'EXPIRED', 'FAILED')`); err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var def string
	if err := st.DB().QueryRowContext(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'orders_one_live_per_buyer'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "REFUNDED_RESTOCKED") {
		t.Errorf("index after migrate: %s", def)
	}
}
