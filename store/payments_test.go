package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// An order paid at a provider keeps the provider and the payment's id; a
// repeat (the activity retried after its commit) keeps them, and the old
// MarkPaid of earlier workflow versions records none.
func TestMarkPaidRecordsThePayment(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 5)
		for _, id := range []int64{20, 21} {
			if err := st.PlaceOrder(ctx, domain.OrderRef{OrderID: id, SaleID: sale, UserID: "u" + string(rune('a'+id-20)), AmountCents: 49900}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := st.MarkPaidWith(ctx, 20, "builtin", "pay_1"); err != nil {
				t.Fatalf("mark paid (retried): %v", err)
			}
		}
		if err := st.MarkPaidWith(ctx, 20, "builtin", "pay_other"); err != nil {
			t.Fatalf("paying a paid order: %v", err)
		}
		o, err := st.Order(ctx, 20)
		if err != nil || o.PaymentProvider != "builtin" || o.PaymentID != "pay_1" || o.PaidAt == nil {
			t.Fatalf("order = %+v, %v; want paid by builtin pay_1", o, err)
		}
		if err := st.MarkPaid(ctx, 21); err != nil {
			t.Fatal(err)
		}
		if o, err := st.Order(ctx, 21); err != nil || o.PaymentProvider != "" || o.PaymentID != "" {
			t.Fatalf("order paid without a provider = %+v, %v", o, err)
		}
	})
}

// A refund is recorded once: a repeat changes nothing, a second refund of
// the order does not replace the first, an order never paid is given the
// refunded payment, and an order paid by another payment keeps its own.
func TestRecordRefundOnce(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 5)
		expired := domain.OrderRef{OrderID: 30, SaleID: sale, UserID: "late", AmountCents: 49900}
		paid := domain.OrderRef{OrderID: 31, SaleID: sale, UserID: "twice", AmountCents: 49900}
		for _, ref := range []domain.OrderRef{expired, paid} {
			if err := st.PlaceOrder(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := st.EndOrder(ctx, expired, domain.StatusExpired, "payment timeout"); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkPaidWith(ctx, 31, "builtin", "pay_first"); err != nil {
			t.Fatal(err)
		}

		for i, want := range []bool{true, false} {
			recorded, err := st.RecordRefund(ctx, 30, "builtin", "pay_late", "re_1", "captured after the order expired")
			if err != nil || recorded != want {
				t.Fatalf("record refund, call %d = %v, %v; want %v", i+1, recorded, err, want)
			}
		}
		first, err := st.Order(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if recorded, err := st.RecordRefund(ctx, 30, "builtin", "pay_later", "re_2", "another"); err != nil || recorded {
			t.Fatalf("a second refund = %v, %v; want the first kept", recorded, err)
		}
		o, err := st.Order(ctx, 30)
		if err != nil || o.RefundID != "re_1" || o.RefundReason != "captured after the order expired" || o.RefundedAt == nil ||
			!o.RefundedAt.Equal(*first.RefundedAt) || o.PaymentProvider != "builtin" || o.PaymentID != "pay_late" || o.Status != "EXPIRED" {
			t.Fatalf("expired order = %+v, %v; want its first refund, of pay_late", o, err)
		}

		if recorded, err := st.RecordRefund(ctx, 31, "builtin", "pay_second", "re_3", "second capture"); err != nil || !recorded {
			t.Fatalf("refund of a second capture = %v, %v", recorded, err)
		}
		o, err = st.Order(ctx, 31)
		if err != nil || o.RefundID != "re_3" || o.PaymentID != "pay_first" || o.Status != "PAID" {
			t.Fatalf("paid order = %+v, %v; want PAID by pay_first with the refund re_3", o, err)
		}

		if _, err := st.RecordRefund(ctx, 999, "builtin", "pay_x", "re_x", "x"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("refund of an unknown order: %v, want ErrNotFound", err)
		}
	})
}
