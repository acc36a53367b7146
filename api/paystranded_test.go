package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/seckill/seckill/domain"
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
