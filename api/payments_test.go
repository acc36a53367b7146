package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/workflows"
)

// Payments at the built-in provider, end to end over real Postgres, Redis
// and Temporal (docs/design.md §4.3, §4.10): pay answers the provider's
// hosted page, the buyer pays there, the provider's signed notification
// reaches the api, and only then is the order PAID. Forged and stale
// notifications are refused before anything is read from them.
func TestPayAtTheBuiltinProvider(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(5)
	id := s.purchase(sale.ID, "alice")
	s.waitStatus(id, "alice", domain.StatusAwaitingPayment)

	r := s.pay(id, "alice")
	if r.status != http.StatusAccepted {
		t.Fatalf("pay: %d %s, want 202 with the payment", r.status, r.body)
	}
	var o wire.Order
	r.decode(t, &o)
	if o.Status != domain.StatusAwaitingPayment || o.Payment == nil || o.Payment.Provider != builtin.Name ||
		o.Payment.ID == "" || !strings.HasPrefix(o.Payment.RedirectURL, s.url+"/pay/checkout/") {
		t.Fatalf("pay answered %s", r.body)
	}
	pay := o.Payment
	// A pay while the payment is pending answers the same payment.
	if again := s.pay(id, "alice"); again.status != http.StatusAccepted || !strings.Contains(string(again.body), pay.ID) {
		t.Fatalf("second pay: %d %s, want 202 with payment %s", again.status, again.body, pay.ID)
	}

	// Notifications that do not verify change nothing: a capture of this
	// very payment, signed with another secret, or signed too long ago.
	capture := captureEvent(pay.ID, id, sale.ID, "alice", 19900, "USD")
	notify := func(sig string) response {
		return s.do("POST", "/v1/payments/builtin/notify", "", capture, builtin.SignatureHeader, sig)
	}
	if r := notify(builtin.Sign("not-the-secret", time.Now(), []byte(capture))); r.status != http.StatusUnauthorized || r.problem(t).Code != wire.CodeUnauthorized {
		t.Errorf("forged notification: %d %s, want 401", r.status, r.body)
	}
	if r := notify(""); r.status != http.StatusUnauthorized {
		t.Errorf("unsigned notification: %d %s, want 401", r.status, r.body)
	}
	if r := notify(builtin.Sign(payWebhookSecret, time.Now().Add(-time.Hour), []byte(capture))); r.status != http.StatusBadRequest || r.problem(t).Code != wire.CodeBadRequest {
		t.Errorf("stale notification: %d %s, want 400", r.status, r.body)
	}
	if r := s.do("POST", "/v1/payments/paypal/notify", "", capture); r.status != http.StatusNotFound {
		t.Errorf("notification of an unknown provider: %d %s, want 404", r.status, r.body)
	}
	if got, _ := s.getOrder(id, "alice"); got.Status != domain.StatusAwaitingPayment || got.PaymentID != "" {
		t.Fatalf("after refused notifications the order is %s (payment %q), want AWAITING_PAYMENT and no payment", got.Status, got.PaymentID)
	}
	if st := s.paymentState(pay.ID); st != "pending" {
		t.Fatalf("payment %s is %s at the provider, want pending", pay.ID, st)
	}

	// The buyer pays on the hosted page; the provider sends them back and
	// notifies the api, whose workflow decides PAID.
	status, location := s.submitCheckout(pay.RedirectURL, "pay")
	if status != http.StatusSeeOther || !strings.HasPrefix(location, s.url+"/?") || !strings.Contains(location, "order_id="+id) {
		t.Fatalf("pay on the hosted page: %d to %q, want 303 back to the shop with the order", status, location)
	}
	s.waitStatus(id, "alice", domain.StatusPaid)
	got, _ := s.getOrder(id, "alice")
	if got.PaymentProvider != builtin.Name || got.PaymentID != pay.ID || got.PaidAt == nil || got.RefundedAt != nil {
		t.Fatalf("paid order: %+v, want paid by %s payment %s, no refund", got, builtin.Name, pay.ID)
	}
	row, err := s.store.Order(context.Background(), mustID(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if row.PaymentProvider != builtin.Name || row.PaymentID != pay.ID {
		t.Fatalf("row: provider %q payment %q, want %s %s", row.PaymentProvider, row.PaymentID, builtin.Name, pay.ID)
	}
	// The export carries the payment in its last columns.
	exp := s.do("GET", "/v1/sales/"+sale.ID+"/orders/export?format=csv", s.token("ops", auth.RoleAdmin), nil)
	if exp.status != http.StatusOK || !strings.Contains(string(exp.body), ",payment_provider,payment_id,refunded_at,refund_reason\n") ||
		!strings.Contains(string(exp.body), ","+builtin.Name+","+pay.ID+",,\n") {
		t.Errorf("export: %d\n%s", exp.status, exp.body)
	}
	// The payment was started on the provider calls' own task queue, the
	// one whose rate every worker shares.
	var queues []string
	hist := s.tc.GetWorkflowHistory(context.Background(), domain.WorkflowID(mustID(t, id)), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == "StartPayment" {
			queues = append(queues, a.TaskQueue.GetName())
		}
	}
	if len(queues) != 1 || queues[0] != workflows.PaymentTaskQueue {
		t.Errorf("StartPayment scheduled on %v, want once on %s", queues, workflows.PaymentTaskQueue)
	}
}

// Money that comes after the order expired goes back, once (docs/design.md
// §4.3, §4.10): a capture that crosses the deadline's cancel is refunded
// by the order's workflow (or, if its notification comes after the
// workflow closed, by a PaymentSettleWorkflow), and a capture notified
// only once the order's workflow has closed is refunded by the payment's
// PaymentSettleWorkflow, once however often the notification comes.
func TestLateCaptureAfterExpiryIsRefundedOnce(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createShortSale(5, 10)
	ctx := context.Background()

	// Captured as soon as the order is EXPIRED, the deadline's cancel
	// answered: its notification reaches the order's workflow as it ends,
	// or just after it closed; either refunds it, once.
	crossing := s.purchase(sale.ID, "bob")
	s.waitStatus(crossing, "bob", domain.StatusAwaitingPayment)
	p1 := s.startPayment(crossing, "bob")
	s.waitStatus(crossing, "bob", domain.StatusExpired)
	if _, err := s.payService.CaptureLate(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	s.waitRefunded(crossing, "bob", domain.StatusExpired, "EXPIRED")
	s.checkOneRefund(p1.ID)

	// The notifications are held until the order's workflow has closed.
	if err := s.payService.SetControls(builtin.Controls{NotifyHold: true}); err != nil {
		t.Fatal(err)
	}
	late := s.purchase(sale.ID, "carol")
	s.waitStatus(late, "carol", domain.StatusAwaitingPayment)
	p2 := s.startPayment(late, "carol")
	s.waitStatus(late, "carol", domain.StatusExpired)
	testenv.Eventually(t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(ctx, domain.WorkflowID(mustID(t, late)), "")
		if err != nil {
			return err
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("order's workflow still %s", st)
		}
		return nil
	})
	if _, err := s.payService.CaptureLate(ctx, p2.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.payService.SetControls(builtin.Controls{}); err != nil { // the held notifications go out
		t.Fatal(err)
	}
	refundedAt := s.waitRefunded(late, "carol", domain.StatusExpired, "late: the order had ended EXPIRED")
	settle := workflows.SettleWorkflowID(builtin.Name, p2.ID)
	var did workflows.Settlement
	if err := s.tc.GetWorkflow(ctx, settle, "").Get(ctx, &did); err != nil || did != workflows.SettleRefunded {
		t.Fatalf("settle workflow %s: %q, %v, want refunded", settle, did, err)
	}
	first, err := s.tc.DescribeWorkflowExecution(ctx, settle, "")
	if err != nil {
		t.Fatal(err)
	}

	// The capture's notification again: acknowledged, and nothing more.
	var body string
	if err := s.store.DB().QueryRowContext(ctx, `SELECT body FROM builtinpay_events WHERE payment_id = $1 AND type = 'payment.captured'`,
		p2.ID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if r := s.do("POST", "/v1/payments/builtin/notify", "", body, builtin.SignatureHeader,
		builtin.Sign(payWebhookSecret, time.Now(), []byte(body))); r.status != http.StatusOK {
		t.Fatalf("repeated capture notification: %d %s, want 200", r.status, r.body)
	}
	again, err := s.tc.DescribeWorkflowExecution(ctx, settle, "")
	if err != nil {
		t.Fatal(err)
	}
	if again.GetWorkflowExecutionInfo().GetExecution().GetRunId() != first.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Errorf("a repeated notification started settle workflow %s again", settle)
	}
	s.checkOneRefund(p2.ID)
	if got, _ := s.getOrder(late, "carol"); got.Status != domain.StatusExpired || got.RefundedAt == nil || !got.RefundedAt.Equal(refundedAt) {
		t.Errorf("after the repeat: %s refunded at %v, want EXPIRED refunded at %v", got.Status, got.RefundedAt, refundedAt)
	}
}

// createShortSale creates a sale open now whose buyers have timeout
// seconds to pay.
func (s *system) createShortSale(units, timeout int) wire.Sale {
	s.t.Helper()
	return s.createSaleWith(map[string]any{"stock": units, "payment_timeout_seconds": timeout})
}

// startPayment pays an order at the provider and returns the payment to
// complete there.
func (s *system) startPayment(id, user string) *wire.PaymentAction {
	s.t.Helper()
	r := s.pay(id, user)
	var o wire.Order
	if r.status == http.StatusAccepted {
		r.decode(s.t, &o)
	}
	if o.Payment == nil || o.Payment.RedirectURL == "" {
		s.t.Fatalf("pay: %d %s, want 202 with a payment", r.status, r.body)
	}
	return o.Payment
}

// submitCheckout opens the hosted page at page as a browser would and
// presses its button action (pay, decline, pay_late): the form's action
// and token are read from the page. It returns the status and where the
// page sends the buyer.
func (s *system) submitCheckout(page, action string) (int, string) {
	s.t.Helper()
	status, location, err := builtin.PressButton(context.Background(), nil, page, action)
	if err != nil {
		s.t.Fatal(err)
	}
	return status, location
}

// paymentState is a payment's state in the built-in provider's records.
func (s *system) paymentState(id string) string {
	s.t.Helper()
	var st string
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT state FROM builtinpay_payments WHERE id = $1`, id).Scan(&st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// waitRefunded waits until the order's row records a refund, then checks
// the order kept status and that the reason has want in it. It returns
// when the refund was recorded.
func (s *system) waitRefunded(id, user string, status domain.Status, want string) time.Time {
	s.t.Helper()
	var got wire.Order
	testenv.Eventually(s.t, time.Minute, func() error {
		var r response
		got, r = s.getOrder(id, user)
		if r.status != http.StatusOK || got.RefundedAt == nil {
			return fmt.Errorf("order %s: %d %s, no refund recorded yet", id, r.status, got.Status)
		}
		return nil
	})
	if got.Status != status || !strings.Contains(got.RefundReason, want) || got.PaymentProvider != builtin.Name || got.PaymentID == "" {
		s.t.Fatalf("refunded order: %s, reason %q, payment %s %s; want %s with a reason containing %q", got.Status, got.RefundReason,
			got.PaymentProvider, got.PaymentID, status, want)
	}
	return *got.RefundedAt
}

// checkOneRefund checks that the provider refunded payment id exactly
// once and that it is refunded there.
func (s *system) checkOneRefund(id string) {
	s.t.Helper()
	var n int
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM builtinpay_refunds WHERE payment_id = $1`, id).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	if n != 1 {
		s.t.Errorf("payment %s has %d refunds at the provider, want 1", id, n)
	}
	if st := s.paymentState(id); st != "refunded" {
		s.t.Errorf("payment %s is %s at the provider, want refunded", id, st)
	}
}

// captureEvent is the body of the built-in provider's notification that
// payment id of an order was captured.
func captureEvent(paymentID, orderID, saleID, user string, minor int64, currency string) string {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf(`{"object":"event","id":"evt_forged","type":"payment.captured","created":%q,"data":{"payment":{`+
		`"object":"payment","id":%q,"amount":%d,"currency":%q,"amount_captured":%d,"status":"captured",`+
		`"metadata":{"order_id":%q,"sale_id":%q,"user_id":%q},"checkout_url":"","return_url":"","expires_at":%q,"created":%q,"captured_at":%q}}}`,
		now, paymentID, minor, currency, minor, orderID, saleID, user, now, now, now)
}

// A sale priced 0 asks for no money: with a provider configured, its
// order's pay decides PAID at once and nothing is asked of the provider
// (a payment of 0 is one the providers refuse).
func TestFreeSalePaysWithoutTheProvider(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSaleWith(map[string]any{"name": "free sample", "price_cents": 0, "stock": 2})
	id := s.purchase(sale.ID, "alice")
	s.waitStatus(id, "alice", domain.StatusAwaitingPayment)
	p := s.pay(id, "alice")
	if p.status != http.StatusOK {
		t.Fatalf("pay of a free order: %d %s, want 200 PAID", p.status, p.body)
	}
	var o wire.Order
	p.decode(t, &o)
	if o.Status != domain.StatusPaid || o.Payment != nil {
		t.Fatalf("pay of a free order: %d %s, want 200 PAID without a payment", p.status, p.body)
	}
	var n int
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM builtinpay_payments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d payments at the provider, want none", n)
	}
}
