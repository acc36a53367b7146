package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/workflows"
)

// The Temporal Web UI's Terminate, Reset and Cancel on orders paid at a
// provider (workflow version 7, docs/design.md §4.10), in the two states
// payments added: a payment in flight (pay answered, the buyer at the
// provider, nothing captured) and a refund in flight (a late capture's
// refund retried while the provider answers 503). Each order ends final
// and its unit is accounted for; no money is kept without a PAID order
// (where Terminate ended the workflow that was refunding it, the
// reconciliation of the provider's records refunds it: the last test).

// A payment in flight. Terminated: the reconciler ends the order
// CANCELLED (a pay update starts a payment, it decides nothing), and the
// buyer's capture at the still open payment is refunded by the payment's
// PaymentSettleWorkflow, whether it comes after the repair or before it.
// Reset to the first task: the reset run gives the order a payment window
// and a payment of its own, which pays it; the first run's payment, paid
// after that, is refunded. Cancelled: the
// workflow cancels the payment at the provider as it ends the order, and
// a capture that wins against that cancel is refunded.
func TestWebUIActionsWithAPaymentInFlight(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(4)
	ctx := context.Background()
	inFlight := func(user string) (string, *wire.PaymentAction) {
		id := s.purchase(sale.ID, user)
		s.waitStatus(id, user, domain.StatusAwaitingPayment)
		return id, s.startPayment(id, user)
	}
	terminated, tp := inFlight("tim")
	reset, rp := inFlight("rae")
	cancelled, cp := inFlight("cas")
	paidFirst, pp := inFlight("pam")

	for _, id := range []string{terminated, paidFirst} {
		if err := s.tc.TerminateWorkflow(ctx, "order-"+id, "", "stopped from the Web UI"); err != nil {
			t.Fatal(err)
		}
	}
	// Paid at the provider before the repair: the order's workflow has
	// closed, so the capture is settled late, though the row still says
	// AWAITING_PAYMENT.
	if status, _ := s.submitCheckout(pp.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay after the Terminate: %d, want 303", status)
	}
	s.waitRefunded(paidFirst, "pam", domain.StatusAwaitingPayment, "late: the order's workflow had closed")
	s.checkOneRefund(pp.ID)
	s.reset("order-"+reset, true)
	s.cancelWorkflow(cancelled)

	// Terminated: CANCELLED by the reconciler, never PAID without money.
	ends := s.endAllStranded(terminated, paidFirst)
	for _, id := range []string{terminated, paidFirst} {
		if e := ends[id]; e.Status != domain.StatusCancelled || !strings.Contains(e.Reason, "terminated") {
			t.Fatalf("the reconciler ended the terminated order %s %s (%s), want CANCELLED: its pay only started a payment", id, e.Status, e.Reason)
		}
	}
	s.waitStatus(terminated, "tim", domain.StatusCancelled)
	s.waitStatus(paidFirst, "pam", domain.StatusCancelled)
	// Nobody cancelled the payment at the provider (the reconciler does
	// not call providers): the buyer can still pay, and gets it back.
	if status, _ := s.submitCheckout(tp.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay after the Terminate: %d, want 303", status)
	}
	s.waitRefunded(terminated, "tim", domain.StatusCancelled, "late: the order had ended CANCELLED")
	s.checkOneRefund(tp.ID)

	// Reset: still awaiting payment, in a payment window of the reset
	// run's, and pay answers that window's payment. From then on the one
	// the buyer held is no longer the order's: paid, it is refunded; the
	// new one pays. (Before the reset run hands out a payment of its own, a
	// capture of the first run's pays the order: TestResetBeforeThePaidRowKeepsTheCapture.)
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

	s.waitAudited(sale.ID, 3)
}

// A capture notified to the order's workflow, its PAID not yet written (the
// database refuses it for now), then Terminate: the reconciler reads the
// capture's signal in the closed run's history and ends the order PAID by
// that payment; the money and the unit stay with the sale.
func TestTerminatedAfterACaptureIsPaidByIt(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "pia")
	s.waitStatus(id, "pia", domain.StatusAwaitingPayment)
	pay := s.startPayment(id, "pia")
	release := s.hold("hold_paid", "UPDATE", "NEW.status = 'PAID'")
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.betweenAttempts(id, "MarkPaidWith")
	if err := s.tc.TerminateWorkflow(context.Background(), "order-"+id, "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}
	release()
	if e := s.endStranded(id); e.Status != domain.StatusPaid || e.PaymentID != pay.ID {
		t.Fatalf("the reconciler ended the order %s by payment %q (%s), want PAID by %s", e.Status, e.PaymentID, e.Reason, pay.ID)
	}
	if o, _ := s.getOrder(id, "pia"); o.Status != domain.StatusPaid || o.PaymentID != pay.ID || o.PaymentProvider != builtin.Name {
		t.Fatalf("order %s paid by %s %q, want PAID by %s %s", o.Status, o.PaymentProvider, o.PaymentID, builtin.Name, pay.ID)
	}
	if n := s.refunds(pay.ID); n != 0 || s.paymentState(pay.ID) != "captured" {
		t.Fatalf("payment %s: %d refunds, want none: it paid the order", pay.ID, n)
	}
	s.waitAudited(sale.ID, 1)
}

// A refund in flight, in the two workflows that refund: three orders
// expire with a payment pending and a capture comes while each workflow is
// ending its order, and three orders are cancelled and their workflows
// closed before a capture comes, which each payment's PaymentSettleWorkflow
// takes. The provider answers 503: each of the six workflows retries its
// refund, the orders EXPIRED or CANCELLED. Then the Web UI's actions, one
// on each workflow of each kind.
//
// Reset to the first task: the reset run refunds under the same key, once
// the provider answers (the order's reset run gets the capture's signal
// again; the settle workflow's its input). Cancel: the refund runs on a
// context the cancellation does not end, and is made. Terminate: the
// retries end with the workflow; the order stays as it ended, its unit
// back, and the capture kept at the provider: its notification was
// answered 200, so none comes again, and nothing on the order's paths
// refunds it. The reconciliation of the provider's records does, once,
// even where the settle workflow of that payment was the one terminated.
func TestWebUIActionsWithARefundInFlight(t *testing.T) {
	s := start(t, options{builtinPay: true, cfg: api.Config{Relay: relay.Options{PaymentTimeout: 8 * time.Second}}})
	sale := s.createSale(6)
	ctx := context.Background()
	type order struct {
		user, id string
		pay      *wire.PaymentAction
		workflow string // the workflow refunding its capture
	}
	var orders []*order
	placed := func(user string) *order {
		o := &order{user: user, id: s.purchase(sale.ID, user)}
		s.waitStatus(o.id, user, domain.StatusAwaitingPayment)
		o.pay = s.startPayment(o.id, user)
		orders = append(orders, o)
		return o
	}
	// Closed before the capture: refunded by PaymentSettleWorkflow.
	for _, u := range []string{"ste", "sre", "sca"} {
		o := placed(u)
		if r := s.do("POST", "/v1/orders/"+o.id+"/cancel", s.token(u, auth.RoleBuyer), nil); r.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		s.waitClosed("order-" + o.id)
		o.workflow = workflows.SettleWorkflowID(builtin.Name, o.pay.ID)
	}
	// Expiring, their expiries held for now: refunded by the order's
	// workflow, which is still ending the order when the capture comes.
	release := s.hold("hold_expiries", "UPDATE", "NEW.status = 'EXPIRED'")
	for _, u := range []string{"ote", "ore", "oca"} {
		o := placed(u)
		o.workflow = "order-" + o.id
	}
	for _, o := range orders[3:] {
		s.waitPending(o.workflow, "EndOrder", 2)
	}
	if err := s.payService.SetControls(builtin.Controls{APIStatus: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if st := s.paymentState(o.pay.ID); st != "canceled" {
			t.Fatalf("payment %s is %s before the capture, want canceled", o.pay.ID, st)
		}
		if _, err := s.payService.CaptureLate(ctx, o.pay.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range orders {
		s.waitPending(o.workflow, "RefundPayment", 2)
	}
	release()
	for _, o := range orders[3:] {
		s.waitStatus(o.id, o.user, domain.StatusExpired)
	}

	terminated, reset, cancelled := []*order{orders[0], orders[3]}, []*order{orders[1], orders[4]}, []*order{orders[2], orders[5]}
	for i := range 2 {
		if err := s.tc.TerminateWorkflow(ctx, terminated[i].workflow, "", "stopped from the Web UI"); err != nil {
			t.Fatal(err)
		}
		s.reset(reset[i].workflow, true)
		if err := s.tc.CancelWorkflow(ctx, cancelled[i].workflow, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.payService.SetControls(builtin.Controls{}); err != nil {
		t.Fatal(err)
	}

	want := map[string]domain.Status{"ste": domain.StatusCancelled, "sre": domain.StatusCancelled, "sca": domain.StatusCancelled,
		"ote": domain.StatusExpired, "ore": domain.StatusExpired, "oca": domain.StatusExpired}
	for _, o := range append(reset, cancelled...) {
		s.waitRefunded(o.id, o.user, want[o.user], "")
		s.checkOneRefund(o.pay.ID)
		s.waitClosed(o.workflow)
	}
	// Terminated, the refunding workflow took the capture's refund with
	// it: the order ended without it, and nothing of the order's paths
	// refunds it. The reconciliation of the provider's records does, once:
	// a stopped settlement does not block the payment's next one.
	for _, o := range terminated {
		got, _ := s.getOrder(o.id, o.user)
		if got.Status != want[o.user] || got.RefundedAt != nil {
			t.Fatalf("order %s whose refunding workflow was terminated is %s, refunded at %v; want %s, no refund recorded yet",
				o.user, got.Status, got.RefundedAt, want[o.user])
		}
	}
	rc := &reconcile.Reconciler{Store: s.store, Stock: s.stock, Temporal: s.tc, Providers: s.payments, SettleMargin: time.Nanosecond}
	if _, err := rc.Payments(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range terminated {
		s.waitRefunded(o.id, o.user, want[o.user], "")
		s.checkOneRefund(o.pay.ID)
	}
	if _, err := rc.Payments(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range terminated {
		s.checkOneRefund(o.pay.ID)
	}
	s.waitAudited(sale.ID, 6)
}

// endAllStranded runs the reconciler's stranded pass until it has ended
// every one of orders, and returns how it ended each.
func (s *system) endAllStranded(orders ...string) map[string]reconcile.Ending {
	s.t.Helper()
	got := map[string]reconcile.Ending{}
	testenv.Eventually(s.t, time.Minute, func() error {
		ends, err := s.reconciler().Stranded(context.Background())
		for _, e := range ends {
			got[fmt.Sprint(e.Ref.OrderID)] = e
		}
		if err != nil {
			return err
		}
		for _, id := range orders {
			if _, ok := got[id]; !ok {
				return fmt.Errorf("order %s not ended yet", id)
			}
		}
		return nil
	})
	return got
}

// waitPending waits until the workflow has activity pending at attempt or
// later: retrying.
func (s *system) waitPending(workflowID, activity string, attempt int32) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(context.Background(), workflowID, "")
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
		return fmt.Errorf("%s: %s not at attempt %d yet (pending %v)", workflowID, activity, attempt, pending)
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
