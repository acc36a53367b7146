package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment/builtin"
)

// Terminated orders that pay at a provider (docs/design.md §4.8, §4.10):
// there a pay only starts a payment, so the reconciler must not take an
// accepted pay for the buyer's money. Found by TestInterleavings: an order
// terminated after its pay started a payment was ended PAID with no
// payment at all, and the buyer's later capture then refunded as late:
// goods for nothing.

// Terminated after its pay started a payment, nothing captured: the
// reconciler ends the order CANCELLED, and a capture the buyer makes on the
// page afterwards is refunded, once.
func TestTerminatedAfterAPaymentStartedIsNotPaid(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "vera")
	s.waitStatus(id, "vera", domain.StatusAwaitingPayment)
	pay := s.startPayment(id, "vera")
	if err := s.tc.TerminateWorkflow(context.Background(), "order-"+id, "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}

	if e := s.endStranded(id); e.Status != domain.StatusCancelled || e.PaymentID != "" {
		t.Fatalf("ended %s (%s) paid by %q, want CANCELLED: a pay at a provider only started a payment", e.Status, e.Reason, e.PaymentID)
	}
	// The payment is still open at the provider: paid now, it is money
	// the order does not keep.
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.waitRefunded(id, "vera", domain.StatusCancelled, "late")
	s.checkOneRefund(pay.ID)
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 2 {
		t.Fatalf("audit: %s", r)
	}
}

// Terminated after the capture's notification decided PAID but before the
// row said so: the reconciler ends the order PAID by that payment, which
// stays captured.
func TestTerminatedAfterACaptureIsPaidByIt(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "walt")
	s.waitStatus(id, "walt", domain.StatusAwaitingPayment)
	ctx := context.Background()
	pay := s.startPayment(id, "walt")

	// No row may become PAID for now: MarkPaidWith fails and retries.
	db := s.store.DB()
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders ADD CONSTRAINT hold_payments CHECK (status <> 'PAID') NOT VALID"); err != nil {
		t.Fatal(err)
	}
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.betweenAttempts(id, "MarkPaidWith")
	if err := s.tc.TerminateWorkflow(ctx, "order-"+id, "", "stopped mid-pay"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders DROP CONSTRAINT hold_payments"); err != nil {
		t.Fatal(err)
	}

	if e := s.endStranded(id); e.Status != domain.StatusPaid || e.PaymentID != pay.ID {
		t.Fatalf("ended %s (%s) paid by %q, want PAID by %s", e.Status, e.Reason, e.PaymentID, pay.ID)
	}
	got, _ := s.getOrder(id, "walt")
	if got.Status != domain.StatusPaid || got.PaymentProvider != builtin.Name || got.PaymentID != pay.ID || got.RefundedAt != nil {
		t.Fatalf("order: %s paid by %s %s, refunded at %v; want PAID by %s %s, no refund", got.Status, got.PaymentProvider, got.PaymentID,
			got.RefundedAt, builtin.Name, pay.ID)
	}
	if st := s.paymentState(pay.ID); st != "captured" {
		t.Fatalf("payment %s is %s at the provider, want captured", pay.ID, st)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}
