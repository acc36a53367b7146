package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
)

// The Temporal Web UI's Terminate, Reset and Cancel on orders paid at a
// provider (workflow version 7, docs/design.md §4.10), in the two states
// payments added: a payment in flight (pay answered, the buyer at the
// provider, nothing captured) and a refund in flight (a late capture's
// refund retried while the provider answers 503). Each order ends final,
// its unit accounted for, and no money is kept without a PAID order.

// A payment in flight. Terminated: the reconciler ends the order
// CANCELLED (a pay update starts a payment, it decides nothing), and the
// buyer's capture at the still open payment afterwards is refunded by the
// payment's PaymentSettleWorkflow. Reset to the first task: the reset run
// gives the order a payment window and a payment of its own, which pays it;
// the first run's payment, paid, is refunded. Cancelled: the
// workflow cancels the payment at the provider as it ends the order, and
// a capture that wins against that cancel is refunded.
func TestWebUIActionsWithAPaymentInFlight(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(3)
	ctx := context.Background()
	inFlight := func(user string) (string, *wire.PaymentAction) {
		id := s.purchase(sale.ID, user)
		s.waitStatus(id, user, domain.StatusAwaitingPayment)
		return id, s.startPayment(id, user)
	}
	terminated, tp := inFlight("tim")
	reset, rp := inFlight("rae")
	cancelled, cp := inFlight("cas")

	if err := s.tc.TerminateWorkflow(ctx, "order-"+terminated, "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}
	s.reset("order-"+reset, true)
	s.cancelWorkflow(cancelled)

	// Terminated: CANCELLED by the reconciler, never PAID without money.
	if e := s.endStranded(terminated); e.Status != domain.StatusCancelled || !strings.Contains(e.Reason, "terminated") {
		t.Fatalf("the reconciler ended the terminated order %s (%s), want CANCELLED: its pay only started a payment", e.Status, e.Reason)
	}
	s.waitStatus(terminated, "tim", domain.StatusCancelled)
	// Nobody cancelled the payment at the provider (the reconciler does
	// not call providers): the buyer can still pay, and gets it back.
	if status, _ := s.submitCheckout(tp.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay after the Terminate: %d, want 303", status)
	}
	s.waitRefunded(terminated, "tim", domain.StatusCancelled, "late: the order had ended CANCELLED")
	s.checkOneRefund(tp.ID)

	// Reset: still awaiting payment, in a payment window of the reset
	// run's, and pay answers that window's payment. The one the buyer held
	// is no longer the order's: paid, it is refunded; the new one pays.
	if o, _ := s.getOrder(reset, "rae"); o.Status != domain.StatusAwaitingPayment {
		t.Fatalf("the reset order is %s, want AWAITING_PAYMENT", o.Status)
	}
	np := s.startPayment(reset, "rae")
	if np.ID == rp.ID {
		t.Fatalf("pay after the Reset answered the payment of the run before it, %s", rp.ID)
	}
	if status, _ := s.submitCheckout(rp.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay of the first run's payment: %d, want 303", status)
	}
	s.waitRefunded(reset, "rae", domain.StatusAwaitingPayment, "a payment this order did not start")
	s.checkOneRefund(rp.ID)
	if status, _ := s.submitCheckout(np.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay after the Reset: %d, want 303", status)
	}
	s.waitStatus(reset, "rae", domain.StatusPaid)
	if o, _ := s.getOrder(reset, "rae"); o.PaymentID != np.ID {
		t.Fatalf("the reset order is paid by %q, want %s", o.PaymentID, np.ID)
	}
	if n := s.refunds(np.ID); n != 0 || s.paymentState(np.ID) != "captured" {
		t.Fatalf("payment %s that paid the reset order has %d refunds, want none", np.ID, n)
	}

	// Cancelled: CANCELLED, the payment cancelled at the provider; a
	// capture that wins against that cancel goes back.
	s.waitStatus(cancelled, "cas", domain.StatusCancelled)
	s.waitClosed("order-" + cancelled)
	if st := s.paymentState(cp.ID); st != "canceled" {
		t.Fatalf("payment %s of the cancelled order is %s at the provider, want canceled", cp.ID, st)
	}
	if _, err := s.payService.CaptureLate(ctx, cp.ID); err != nil {
		t.Fatal(err)
	}
	s.waitRefunded(cancelled, "cas", domain.StatusCancelled, "late: the order had ended CANCELLED")
	s.checkOneRefund(cp.ID)

	s.waitAudited(sale.ID, 2)
}

// A refund in flight: three orders expire with a payment pending, a
// capture comes while each workflow is ending it, and the provider answers
// 503, so each workflow, its order EXPIRED, retries the capture's refund.
// Reset to the first task: the reset run gets the capture's signal again
// and refunds it under the same key, once the provider answers. Cancel:
// the refund runs on a context the cancellation does not end, and is made.
// Terminate: the workflow's retries end with it; the order stays EXPIRED
// with its unit back, and the capture is kept at the provider: no
// notification comes again, and nothing in the order's paths refunds it
// (the reconciliation of the provider's records is what must).
func TestWebUIActionsWithARefundInFlight(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createShortSale(3, 10)
	ctx := context.Background()
	// The expiries cannot be written for now: each workflow is still
	// ending its order when the capture comes.
	release := s.hold("hold_expiries", "UPDATE", "NEW.status = 'EXPIRED'")
	users := []string{"ter", "res", "can"}
	ids, pays := map[string]string{}, map[string]*wire.PaymentAction{}
	for _, u := range users {
		ids[u] = s.purchase(sale.ID, u)
		s.waitStatus(ids[u], u, domain.StatusAwaitingPayment)
		pays[u] = s.startPayment(ids[u], u)
	}
	for _, u := range users {
		s.waitPending(ids[u], "EndOrder", 2)
		if st := s.paymentState(pays[u].ID); st != "canceled" {
			t.Fatalf("payment %s is %s at the deadline, want canceled", pays[u].ID, st)
		}
	}
	if err := s.payService.SetControls(builtin.Controls{APIStatus: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if _, err := s.payService.CaptureLate(ctx, pays[u].ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range users {
		s.waitPending(ids[u], "RefundPayment", 2)
	}
	release()
	for _, u := range users {
		s.waitStatus(ids[u], u, domain.StatusExpired)
	}

	if err := s.tc.TerminateWorkflow(ctx, "order-"+ids["ter"], "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}
	s.reset("order-"+ids["res"], true)
	s.cancelWorkflow(ids["can"])
	if err := s.payService.SetControls(builtin.Controls{}); err != nil {
		t.Fatal(err)
	}

	s.waitRefunded(ids["res"], "res", domain.StatusExpired, "")
	s.checkOneRefund(pays["res"].ID)
	s.waitRefunded(ids["can"], "can", domain.StatusExpired, "captured after the order ended EXPIRED")
	s.checkOneRefund(pays["can"].ID)
	for _, u := range []string{"res", "can"} {
		s.waitClosed("order-" + ids[u])
	}

	// Terminated: the order and its unit are whole, the money is not.
	if o, _ := s.getOrder(ids["ter"], "ter"); o.Status != domain.StatusExpired || o.RefundedAt != nil {
		t.Fatalf("the terminated order is %s, refunded at %v; want EXPIRED, no refund recorded", o.Status, o.RefundedAt)
	}
	if n, st := s.refunds(pays["ter"].ID), s.paymentState(pays["ter"].ID); n != 0 || st != "captured" {
		t.Fatalf("the terminated order's capture: %d refunds, %s; the order's paths have nothing that would refund it"+
			" (if the provider reconciliation now does, run it here and want one refund)", n, st)
	}
	s.waitAudited(sale.ID, 3)
}

// waitPending waits until the order's workflow has activity pending at
// its attempt or later: retrying.
func (s *system) waitPending(orderID, activity string, attempt int32) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(context.Background(), "order-"+orderID, "")
		if err != nil {
			return err
		}
		var pending []string
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == activity && a.GetAttempt() >= attempt {
				return nil
			}
			pending = append(pending, fmt.Sprintf("%s#%d", a.GetActivityType().GetName(), a.GetAttempt()))
		}
		return fmt.Errorf("order %s: %s not at attempt %d yet (pending %v)", orderID, activity, attempt, pending)
	})
}

// waitAudited waits until the sale's settled audit holds, with left units
// left in the database and Redis.
func (s *system) waitAudited(saleID string, left int) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		if r := s.audited(saleID, true); !r.OK() || r.DBStock != left || r.RedisRemaining != left {
			return fmt.Errorf("audit (want %d units left): %s", left, r)
		}
		return nil
	})
}
