package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
)

// An order paid at the provider whose workflow an operator resets to its
// first task (docs/design.md §4.8): the new run hears the capture again
// (the reset re-delivers the signal) before its re-delivered pay has
// started the payment, and takes it for one it did not start. The order
// stays PAID by that payment, and the payment is not refunded: the refund
// of a capture the row says paid the order is refused (found by
// TestInterleavings, seed 1795742053913020980).
func TestResetOfAnOrderPaidAtTheProviderKeepsItsPayment(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "xena")
	s.waitStatus(id, "xena", domain.StatusAwaitingPayment)
	pay := s.startPayment(id, "xena")
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != 303 {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.waitStatus(id, "xena", domain.StatusPaid)
	ctx := context.Background()
	wid := "order-" + id
	first, err := s.tc.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.ResetWorkflow(ctx, s.tc, wid, true); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			return err
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetExecution().GetRunId() == first.GetWorkflowExecutionInfo().GetExecution().GetRunId() ||
			info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("reset run %s is %s", info.GetExecution().GetRunId(), info.GetStatus())
		}
		return nil
	})
	got, _ := s.getOrder(id, "xena")
	if got.Status != domain.StatusPaid || got.PaymentProvider != builtin.Name || got.PaymentID != pay.ID || got.RefundedAt != nil {
		t.Errorf("after the reset: %s paid by %s %s, refunded at %v (%s); want PAID by %s %s, no refund", got.Status,
			got.PaymentProvider, got.PaymentID, got.RefundedAt, got.RefundReason, builtin.Name, pay.ID)
	}
	if st := s.paymentState(pay.ID); st != "captured" {
		t.Errorf("payment %s is %s at the provider, want captured: it paid the order", pay.ID, st)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// A Reset to the first task after the capture's signal decided PAID but
// before the row said so (the database refuses PAID for now): the reset
// run hears the capture again before its re-delivered pay has started a
// payment of its own. The capture names this order, for its amount: the
// order is PAID by it, not refunded and expired (found by
// TestInterleavings).
func TestResetBeforeThePaidRowKeepsTheCapture(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "yuri")
	s.waitStatus(id, "yuri", domain.StatusAwaitingPayment)
	pay := s.startPayment(id, "yuri")
	release := s.hold("hold_paid", "UPDATE", "NEW.status = 'PAID'")
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != 303 {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.betweenAttempts(id, "MarkPaidWith")
	s.reset("order-"+id, true)
	release()
	s.waitStatus(id, "yuri", domain.StatusPaid)
	got, _ := s.getOrder(id, "yuri")
	if got.PaymentID != pay.ID || got.RefundedAt != nil {
		t.Fatalf("after the reset: PAID by %q, refunded at %v (%s); want PAID by %s, no refund", got.PaymentID, got.RefundedAt, got.RefundReason, pay.ID)
	}
	if n := s.refunds(pay.ID); n != 0 || s.paymentState(pay.ID) != "captured" {
		t.Fatalf("payment %s: %d refunds, want none: it paid the order", pay.ID, n)
	}
	s.waitAudited(sale.ID, 1)
}
