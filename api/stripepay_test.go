package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/stripe"
	"github.com/seckill/seckill/workflows"
)

// Payments at Stripe, end to end over real Postgres, Redis and Temporal,
// the worker's and the api's Stripe adapter against stripe-mock
// (docs/design.md §4.10): pay answers the PaymentIntent's client secret,
// Stripe's signed notification reaches the api, and only a verified
// capture of the order's amount makes the order PAID, once. stripe-mock
// keeps no state, so Stripe's side of a payment (the buyer confirming
// with Stripe.js, Stripe sending the webhook) is played by the test: it
// signs the event Stripe would send with the endpoint's secret, by
// stripe-go's own helper. The order's workflow takes a verified capture's
// word and does not read the intent back, so stripe-mock's stateless
// answers do not stand in the way.
func TestPayAtStripeThroughItsNotifications(t *testing.T) {
	s := start(t, options{stripePay: true})
	sale := s.createSaleWith(map[string]any{"stock": 3, "currency": "EUR"})
	const price = 19900 // createSaleWith's

	id, pay := s.payAtStripe(sale.ID, "alice")
	succeeded := stripeEvent(t, "evt_paid_"+id, "payment_intent.succeeded", intentJSON(pay.ID, id, sale.ID, "alice", price, "eur"))

	// Notifications that do not verify are refused before anything is
	// read from them, and reach no workflow: the very capture that pays
	// the order, signed with another secret, signed for another body,
	// unsigned, or signed too long ago (a replay).
	tampered := []byte(strings.Replace(string(succeeded), `"amount_received":19900`, `"amount_received":19901`, 1))
	for _, tc := range []struct {
		name   string
		sig    string
		status int
		code   string
	}{
		{"signed with another secret", stripeSignature(succeeded, "whsec_notTheEndpointsSecret", time.Now()), http.StatusUnauthorized, wire.CodeUnauthorized},
		{"signed for another body", stripeSignature(tampered, stripeWebhookSecret, time.Now()), http.StatusUnauthorized, wire.CodeUnauthorized},
		{"unsigned", "", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"signed an hour ago", stripeSignature(succeeded, stripeWebhookSecret, time.Now().Add(-time.Hour)), http.StatusBadRequest, wire.CodeBadRequest},
	} {
		r := s.notifyStripe(succeeded, tc.sig)
		if r.status != tc.status {
			t.Errorf("notification %s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		if p := r.problem(t); p.Code != tc.code {
			t.Errorf("notification %s: code %q, want %q", tc.name, p.Code, tc.code)
		}
	}
	// Signed, but by a webhook endpoint of another API release train: the
	// adapter will not trust its reading of it, and the endpoint refuses
	// it (Stripe sends again whatever is not a 2xx, while the operator
	// recreates the endpoint at the adapter's version).
	otherTrain := []byte(strings.Replace(string(succeeded), stripego.APIVersion, "2024-06-20.acacia", 1))
	if r := s.notifyStripe(otherTrain, stripeSignature(otherTrain, stripeWebhookSecret, time.Now())); r.status != http.StatusServiceUnavailable {
		t.Errorf("notification of another API release train: %d %s, want 503 (Stripe sends it again)", r.status, r.body)
	} else if p := r.problem(t); p.Code != wire.CodeUnavailable {
		t.Errorf("notification of another API release train: code %q, want %q", p.Code, wire.CodeUnavailable)
	}
	if got, _ := s.getOrder(id, "alice"); got.Status != domain.StatusAwaitingPayment || got.PaymentID != "" || got.PaidAt != nil {
		t.Fatalf("after refused notifications the order is %s (payment %q), want AWAITING_PAYMENT with no payment", got.Status, got.PaymentID)
	}
	if n := signals(s.history(domain.WorkflowID(mustID(t, id)))); n != 0 {
		t.Fatalf("refused notifications signalled the order's workflow %d times", n)
	}

	// The capture, signed as Stripe signs it: acknowledged at once (the
	// workflow does the work), and the order is PAID by that intent. Sent
	// again at once, as Stripe does when an answer is lost: acknowledged,
	// and nothing more.
	sig := stripeSignature(succeeded, stripeWebhookSecret, time.Now())
	began := time.Now()
	r := s.notifyStripe(succeeded, sig)
	if took := time.Since(began); r.status != http.StatusOK || !strings.Contains(string(r.body), `"received":true`) || took > 5*time.Second {
		t.Fatalf("signed capture: %d %s after %s, want 200 at once", r.status, r.body, took)
	}
	if r := s.notifyStripe(succeeded, sig); r.status != http.StatusOK {
		t.Fatalf("repeated capture: %d %s, want 200", r.status, r.body)
	}
	s.waitStatus(id, "alice", domain.StatusPaid)
	got, _ := s.getOrder(id, "alice")
	if got.PaymentProvider != stripe.Name || got.PaymentID != pay.ID || got.PaidAt == nil || got.RefundedAt != nil {
		t.Fatalf("paid order: %+v, want paid by %s payment %s, no refund", got, stripe.Name, pay.ID)
	}
	// Once the order's workflow has closed, the repeat goes to the
	// payment's settle workflow, which finds the order PAID by it.
	wid := domain.WorkflowID(mustID(t, id))
	s.waitClosed(wid)
	if r := s.notifyStripe(succeeded, stripeSignature(succeeded, stripeWebhookSecret, time.Now())); r.status != http.StatusOK {
		t.Fatalf("capture repeated after the order's workflow closed: %d %s, want 200", r.status, r.body)
	}
	if did := s.settlement(workflows.SettleWorkflowID(stripe.Name, pay.ID)); did != workflows.SettleKept {
		t.Errorf("the repeat's settle workflow: %q, want %q", did, workflows.SettleKept)
	}
	hist := s.history(wid)
	if n := signals(hist); n < 1 || n > 2 {
		t.Errorf("the order's workflow took %d payment signals, want the capture and at most its first repeat", n)
	}
	if n := scheduled(hist, "RefundPayment"); n != 0 {
		t.Errorf("the order's workflow scheduled %d refunds of the capture that paid it", n)
	}
	row, err := s.store.Order(context.Background(), mustID(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if domain.Status(row.Status) != domain.StatusPaid || row.PaymentProvider != stripe.Name || row.PaymentID != pay.ID || row.RefundID != "" {
		t.Fatalf("row: %s by %s payment %q, refund %q; want PAID by %s payment %s, no refund",
			row.Status, row.PaymentProvider, row.PaymentID, row.RefundID, stripe.Name, pay.ID)
	}

	// A capture of another amount, or in another currency, than the
	// order's is refunded at Stripe and recorded on the row; the order
	// still awaits its payment.
	for _, tc := range []struct {
		user     string
		received int64
		currency string
		want     string
	}{
		{"bob", price - 1, "eur", fmt.Sprintf("captured %d EUR", price-1)},
		{"carol", price, "usd", fmt.Sprintf("captured %d USD", price)},
	} {
		oid, p := s.payAtStripe(sale.ID, tc.user)
		ev := stripeEvent(t, "evt_wrong_"+oid, "payment_intent.succeeded", intentJSON(p.ID, oid, sale.ID, tc.user, tc.received, tc.currency))
		if r := s.notifyStripe(ev, stripeSignature(ev, stripeWebhookSecret, time.Now())); r.status != http.StatusOK {
			t.Fatalf("capture of %d %s: %d %s, want 200", tc.received, tc.currency, r.status, r.body)
		}
		got := s.waitRefundRecorded(oid, tc.user)
		if got.Status != domain.StatusAwaitingPayment || got.PaidAt != nil || got.PaymentProvider != stripe.Name || got.PaymentID != p.ID ||
			!strings.Contains(got.RefundReason, tc.want) {
			t.Errorf("after a capture of %d %s: %s, payment %s %s, refund reason %q; want AWAITING_PAYMENT, payment %s refunded with a reason containing %q",
				tc.received, tc.currency, got.Status, got.PaymentProvider, got.PaymentID, got.RefundReason, p.ID, tc.want)
		}
	}

	// A capture naming an order seckill does not know is no order's
	// money: its settle workflow refunds it.
	const unknownOrder, unknownPay = "4242", "pi_seckillTestUnknownOrder"
	ev := stripeEvent(t, "evt_unknown_order", "payment_intent.succeeded", intentJSON(unknownPay, unknownOrder, sale.ID, "mallory", price, "eur"))
	if r := s.notifyStripe(ev, stripeSignature(ev, stripeWebhookSecret, time.Now())); r.status != http.StatusOK {
		t.Fatalf("capture of an unknown order: %d %s, want 200", r.status, r.body)
	}
	if did := s.settlement(workflows.SettleWorkflowID(stripe.Name, unknownPay)); did != workflows.SettleRefunded {
		t.Errorf("capture of an unknown order: settled %q, want %q", did, workflows.SettleRefunded)
	}

	// Verified events with nothing of seckill's to act on are
	// acknowledged, and start nothing: an intent no order made (no
	// metadata), and a kind of event seckill does not act on.
	foreign := intentJSON("pi_seckillTestForeign", "", "", "", price, "eur")
	delete(foreign, "metadata")
	for name, body := range map[string][]byte{
		"capture of an intent seckill did not make": stripeEvent(t, "evt_foreign", "payment_intent.succeeded", foreign),
		"event of a kind not acted on":              stripeEvent(t, "evt_created", "payment_intent.created", intentJSON(pay.ID, id, sale.ID, "alice", 0, "eur")),
	} {
		if r := s.notifyStripe(body, stripeSignature(body, stripeWebhookSecret, time.Now())); r.status != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", name, r.status, r.body)
		}
	}
	_, err = s.tc.DescribeWorkflowExecution(context.Background(), workflows.SettleWorkflowID(stripe.Name, "pi_seckillTestForeign"), "")
	if !errors.As(err, new(*serviceerror.NotFound)) {
		t.Errorf("a capture of an intent seckill did not make started its settle workflow: %v", err)
	}
	if got, _ := s.getOrder(id, "alice"); got.Status != domain.StatusPaid || got.PaymentID != pay.ID || got.RefundedAt != nil {
		t.Errorf("in the end alice's order is %s by %q, refunded at %v; want PAID by %s", got.Status, got.PaymentID, got.RefundedAt, pay.ID)
	}
}

// payAtStripe buys one unit as user and pays: the answer is the
// PaymentIntent Stripe.js completes (its client secret, no page to send
// the buyer to), and the order still awaits the payment.
func (s *system) payAtStripe(saleID, user string) (string, *wire.PaymentAction) {
	s.t.Helper()
	id := s.purchase(saleID, user)
	s.waitStatus(id, user, domain.StatusAwaitingPayment)
	r := s.pay(id, user)
	if r.status != http.StatusAccepted {
		s.t.Fatalf("pay as %s: %d %s, want 202 with the payment", user, r.status, r.body)
	}
	var o wire.Order
	r.decode(s.t, &o)
	if p := o.Payment; o.Status != domain.StatusAwaitingPayment || p == nil || p.Provider != stripe.Name ||
		!strings.HasPrefix(p.ID, "pi_") || p.ClientSecret == "" || p.RedirectURL != "" {
		s.t.Fatalf("pay as %s answered %s, want AWAITING_PAYMENT with a Stripe PaymentIntent's id and client secret", user, r.body)
	}
	return id, o.Payment
}

// notifyStripe posts body to the Stripe notification endpoint with sig as
// its Stripe-Signature ("" sends none).
func (s *system) notifyStripe(body []byte, sig string) response {
	s.t.Helper()
	if sig == "" {
		return s.do("POST", "/v1/payments/stripe/notify", "", body)
	}
	return s.do("POST", "/v1/payments/stripe/notify", "", body, stripe.SignatureHeader, sig)
}

// waitRefundRecorded waits until the order's row records a refund and
// returns the order.
func (s *system) waitRefundRecorded(id, user string) wire.Order {
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
	return got
}

// settlement is what the PaymentSettleWorkflow workflowID did, once it
// completes.
func (s *system) settlement(workflowID string) workflows.Settlement {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var did workflows.Settlement
	if err := s.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, &did); err != nil {
		s.t.Fatalf("settle workflow %s: %v", workflowID, err)
	}
	return did
}

// history is a workflow's history, every event.
func (s *system) history(workflowID string) []*historypb.HistoryEvent {
	s.t.Helper()
	var evs []*historypb.HistoryEvent
	it := s.tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// signals counts the signals in a history.
func signals(hist []*historypb.HistoryEvent) int {
	n := 0
	for _, ev := range hist {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			n++
		}
	}
	return n
}

// scheduled counts the activities of type name scheduled in a history.
func scheduled(hist []*historypb.HistoryEvent, name string) int {
	n := 0
	for _, ev := range hist {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// intentJSON is a PaymentIntent as a Stripe event carries it: succeeded
// with received taken (0: not succeeded), and the metadata the adapter's
// Create attaches (order_id, sale_id, user_id).
func intentJSON(id, orderID, saleID, user string, received int64, currency string) map[string]any {
	pi := map[string]any{
		"id": id, "object": "payment_intent", "amount": received, "currency": currency,
		"status": "requires_payment_method", "amount_received": 0, "created": time.Now().Unix(), "livemode": false,
		"metadata": map[string]any{"order_id": orderID, "sale_id": saleID, "user_id": user},
	}
	if received > 0 {
		pi["status"], pi["amount_received"] = "succeeded", received
	}
	return pi
}

// stripeEvent is a webhook event as Stripe sends it to an endpoint of the
// adapter's API version.
func stripeEvent(t *testing.T, id, typ string, object map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripego.APIVersion, "created": time.Now().Unix(),
		"type": typ, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": object},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stripeSignature is the Stripe-Signature of body signed at `at` with
// secret, by stripe-go's own helper.
func stripeSignature(body []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}
