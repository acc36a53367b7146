package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/workflows"
)

// An operator refunds a paid order (docs/design.md §4.11), end to end over
// real Postgres, Redis, Temporal and the built-in provider: the payment is
// refunded once at the provider, the order becomes REFUNDED_RESTOCKED and
// its unit is sellable again, exactly once, however often the refund is
// asked; the buyer is told over the websocket; bad input and an order that
// is not PAID change nothing; a restock asked on a closed sale is not done
// and says so. The sales audit clean throughout.
func TestOperatorRefundsAPaidOrder(t *testing.T) {
	s := start(t, options{builtinPay: true})
	admin := s.token("ops", auth.RoleAdmin)
	sale := s.createSale(1)
	id := s.purchase(sale.ID, "alice")
	pay := s.payAtBuiltin(id, "alice")
	if r := s.buy(sale.ID, "bob"); r.status != http.StatusConflict || r.problem(t).Code != wire.CodeSoldOut {
		t.Fatalf("bob before the refund: %d %s, want 409 SOLD_OUT", r.status, r.body)
	}
	sock := s.connect("alice")
	refund := func(id string, body any) response {
		return s.do("POST", "/v1/admin/orders/"+id+"/refund", admin, body)
	}

	// Refused before anything is done: a buyer's token, a blank, missing
	// or overlong reason, a restock that is not a boolean, an unknown
	// field, an unknown order.
	if r := s.do("POST", "/v1/admin/orders/"+id+"/refund", s.token("alice", auth.RoleBuyer), map[string]any{"reason": "mine"}); r.status != http.StatusForbidden {
		t.Errorf("refund by a buyer: %d %s, want 403", r.status, r.body)
	}
	for _, body := range []any{
		map[string]any{}, map[string]any{"reason": ""}, map[string]any{"reason": "   "},
		map[string]any{"reason": strings.Repeat("x", 501)}, map[string]any{"reason": "r", "restock": "yes"},
	} {
		if r := refund(id, body); r.status != http.StatusUnprocessableEntity || r.problem(t).Code != wire.CodeValidation {
			t.Errorf("refund with %v: %d %s, want 422", body, r.status, r.body)
		}
	}
	if r := refund("4242424242", map[string]any{"reason": "r"}); r.status != http.StatusNotFound || r.problem(t).Code != wire.CodeNotFound {
		t.Errorf("refund of an unknown order: %d %s, want 404", r.status, r.body)
	}
	if got, _ := s.getOrder(id, "alice"); got.Status != domain.StatusPaid || got.RefundedAt != nil || s.refundsAt(pay) != 0 {
		t.Fatalf("after refused refunds: %s, refunded %v, %d refunds at the provider; want PAID and none", got.Status, got.RefundedAt, s.refundsAt(pay))
	}

	// The refund, with a restock, while the sale is open.
	o := s.refundDone(refund(id, map[string]any{"reason": "parcel lost", "restock": true}))
	if o.Status != domain.StatusRefundedRestocked || o.RefundReason != "parcel lost" || o.RefundedAt == nil ||
		o.Reason != store.RefundRestockedReason || o.PaymentID != pay {
		t.Fatalf("refunded order: %+v", o)
	}
	s.checkOneRefund(pay)
	if e := sock.await(t, id, domain.StatusRefundedRestocked); e.RefundedPayment != pay {
		t.Errorf("buyer's event: %+v, want the refund of %s", e, pay)
	}
	// Asked again, with and without a restock: the refund as it is.
	for _, body := range []map[string]any{{"reason": "again", "restock": true}, {"reason": "again"}} {
		again := s.refundDone(refund(id, body))
		if again.Status != domain.StatusRefundedRestocked || again.RefundReason != "parcel lost" || !again.RefundedAt.Equal(*o.RefundedAt) {
			t.Errorf("repeated refund: %+v, want the first one's", again)
		}
	}
	s.checkOneRefund(pay)
	// The unit is on sale again, once: bob gets it, carol does not.
	if st := s.sale(sale.ID); st.Remaining != 1 {
		t.Errorf("sale after the restock: %d remaining, want 1", st.Remaining)
	}
	second := s.purchase(sale.ID, "bob")
	if r := s.buy(sale.ID, "carol"); r.status != http.StatusConflict || r.problem(t).Code != wire.CodeSoldOut {
		t.Errorf("carol after bob took the restocked unit: %d %s, want SOLD_OUT", r.status, r.body)
	}
	s.waitStatus(second, "bob", domain.StatusAwaitingPayment)
	// An order that is not PAID is not refunded.
	p := s.wantProblem(refund(second, map[string]any{"reason": "r", "restock": true}), http.StatusConflict, wire.CodeInvalidState)
	if p.OrderStatus != domain.StatusAwaitingPayment {
		t.Errorf("refund of an order awaiting payment: order_status %q, want AWAITING_PAYMENT", p.OrderStatus)
	}
	if r := s.audited(sale.ID, false); !r.OK() {
		t.Errorf("audit after the refund and restock:\n%s", r)
	}

	// A restock asked once the sale has ended is not done, and that is no
	// error: the order is REFUNDED, its unit out of the sale.
	closed := s.createSale(2)
	dave := s.purchase(closed.ID, "dave")
	davePay := s.payAtBuiltin(dave, "dave")
	if r := s.do("POST", "/v1/sales/"+closed.ID+"/end", admin, nil); r.status != http.StatusOK {
		t.Fatalf("end the sale: %d %s", r.status, r.body)
	}
	o = s.refundDone(refund(dave, map[string]any{"reason": "changed mind", "restock": true}))
	if o.Status != domain.StatusRefunded || o.Reason != store.RefundSaleEndedReason {
		t.Fatalf("refund on an ended sale: %s (%q), want REFUNDED, not restocked", o.Status, o.Reason)
	}
	s.checkOneRefund(davePay)
	if r := s.audited(closed.ID, false); !r.OK() || r.DBStock != 1 {
		t.Errorf("audit of the ended sale (want db stock 1, nothing restocked):\n%s", r)
	}
}

// payAtBuiltin pays an order at the built-in provider's hosted page and
// waits until it is PAID; it returns the payment's id.
func (s *system) payAtBuiltin(id, user string) string {
	s.t.Helper()
	s.waitStatus(id, user, domain.StatusAwaitingPayment)
	p := s.startPayment(id, user)
	if status, _ := s.submitCheckout(p.RedirectURL, "pay"); status != http.StatusSeeOther {
		s.t.Fatalf("pay on the hosted page: %d", status)
	}
	s.waitStatus(id, user, domain.StatusPaid)
	return p.ID
}

// refundDone takes a refund's answer: a 200 with the order refunded, or a
// 202 under way, then the order once its refund workflow is done.
func (s *system) refundDone(r response) wire.Order {
	s.t.Helper()
	var o wire.Order
	switch r.status {
	case http.StatusOK:
		r.decode(s.t, &o)
		return o
	case http.StatusAccepted:
		r.decode(s.t, &o)
	default:
		s.t.Fatalf("refund: %d %s, want 200 or 202", r.status, r.body)
	}
	ctx := context.Background()
	if err := s.tc.GetWorkflow(ctx, workflows.RefundWorkflowID(mustID(s.t, o.ID)), "").Get(ctx, nil); err != nil {
		s.t.Fatalf("refund workflow of %s: %v", o.ID, err)
	}
	got, _ := s.getOrder(o.ID, o.UserID)
	return got
}

// refundsAt counts the provider's refunds of a payment.
func (s *system) refundsAt(paymentID string) int {
	s.t.Helper()
	var n int
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM builtinpay_refunds WHERE payment_id = $1`, paymentID).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}
