package api_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
)

// What the buyer's client needs to pay (the built-in provider's hosted
// page; a Stripe client secret) reaches the buyer, and the order's
// history, which everyone with Web UI access reads, holds none of it
// (docs/design.md §4.10): not the page's URL, not its path, not the
// page's form token. One order is paid on the page, one cancelled while
// its payment was pending (the cancel's answer comes from the provider
// too).
func TestPaymentClientActionStaysOutOfHistory(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(2)
	paid, cancelled := s.purchase(sale.ID, "alice"), s.purchase(sale.ID, "bob")
	s.waitStatus(paid, "alice", domain.StatusAwaitingPayment)
	s.waitStatus(cancelled, "bob", domain.StatusAwaitingPayment)

	pay := s.startPayment(paid, "alice")
	if want := s.url + "/pay/checkout/" + pay.ID; pay.RedirectURL != want {
		t.Fatalf("pay answered the page %q, want %q", pay.RedirectURL, want)
	}
	dropped := s.startPayment(cancelled, "bob")
	if r := s.do("POST", "/v1/orders/"+cancelled+"/cancel", s.token("bob", auth.RoleBuyer), nil); r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	s.waitStatus(cancelled, "bob", domain.StatusCancelled)
	if st := s.paymentState(dropped.ID); st != "canceled" {
		t.Fatalf("bob's payment is %s at the provider, want canceled", st)
	}
	// The page the buyer got works: paying there pays the order.
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.waitStatus(paid, "alice", domain.StatusPaid)

	for _, o := range []struct {
		id  string
		pay *wire.PaymentAction
	}{{paid, pay}, {cancelled, dropped}} {
		workflowID := domain.WorkflowID(mustID(t, o.id))
		s.waitClosed(workflowID)
		history := s.historyBytes(workflowID)
		// The search below reads the payloads: the payment's id is there.
		if !bytes.Contains(history, []byte(o.pay.ID)) {
			t.Fatalf("order %s: the history never names payment %s", o.id, o.pay.ID)
		}
		for what, secret := range map[string]string{
			"the hosted page's URL":    o.pay.RedirectURL,
			"the hosted page's path":   "/checkout/" + o.pay.ID,
			"the page's form token":    s.formToken(o.pay.ID),
			"a redirect_url":           `"redirect_url"`,
			"a client secret":          `"client_secret"`,
			"a Stripe client secret's": "_secret_",
		} {
			if bytes.Contains(history, []byte(secret)) {
				t.Errorf("order %s: the workflow's history holds %s (%q)", o.id, what, secret)
			}
		}
	}
}

// An api whose provider key does not open the worker's seals (the key
// was rotated while the payment was pending, or the api was given
// another) still answers the buyer the hosted page: it reads the payment
// at the provider. The page works, and the order becomes PAID.
func TestPayReadsThePageWhenTheSealDoesNotOpen(t *testing.T) {
	s := start(t, options{builtinPay: true})
	sale := s.createSale(1)
	id := s.purchase(sale.ID, "alice")
	s.waitStatus(id, "alice", domain.StatusAwaitingPayment)
	first := s.startPayment(id, "alice")

	rotated, err := payment.NewSealer(builtin.Name, "the-next-secret-key")
	if err != nil {
		t.Fatal(err)
	}
	s.payments = map[string]payment.Provider{builtin.Name: otherSealKey{s.payments[builtin.Name], rotated}}
	s.newAPI(api.Config{})
	again := s.startPayment(id, "alice")
	if again.ID != first.ID || again.RedirectURL != first.RedirectURL {
		t.Fatalf("pay with a key that does not open the seal answered %+v, want payment %s at %s", again, first.ID, first.RedirectURL)
	}
	if status, _ := s.submitCheckout(again.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	s.waitStatus(id, "alice", domain.StatusPaid)
}

// otherSealKey is a provider whose sealer's key is not the one its
// payments were sealed with.
type otherSealKey struct {
	payment.Provider
	sealer *payment.Sealer
}

func (p otherSealKey) Sealer() *payment.Sealer { return p.sealer }

// historyBytes is every event of the workflow's history, each as its
// protobuf wire bytes: the payloads' data as written.
func (s *system) historyBytes(workflowID string) []byte {
	s.t.Helper()
	var all []byte
	it := s.tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.t.Fatal(err)
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			s.t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// formToken is the token of payment id's hosted page, which its forms
// carry: with the page's URL, what pays or declines the payment.
func (s *system) formToken(id string) string {
	s.t.Helper()
	var token string
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT form_token FROM builtinpay_payments WHERE id = $1`, id).Scan(&token); err != nil {
		s.t.Fatal(err)
	}
	if token == "" {
		s.t.Fatalf("payment %s has no form token", id)
	}
	return token
}
