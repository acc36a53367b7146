package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/api/wire"
)

// The built-in provider's page as it renders a pending payment with its
// test controls on: pressing Pay sends the form's token and the Pay
// button's own name and value, nothing of the other buttons.
func TestPayFormAsABrowserSendsIt(t *testing.T) {
	page := `<!doctype html><html><body><main>
<form method="post">
<input type="hidden" name="token" value="tok&amp;en">
<button name="action" value="pay">Pay</button>
<button name="action" value="decline">Decline</button>
<button class="late" name="action" value="pay_late">Pay late</button>
</form>
<p><a href="http://shop/orders">Back to the shop</a></p></main></body></html>`
	base, _ := url.Parse("http://127.0.0.1:8080/pay/checkout/pay_123?x=1")
	s, err := payForm(page, base)
	if err != nil {
		t.Fatal(err)
	}
	if s.method != http.MethodPost || s.action.String() != base.String() {
		t.Errorf("%s %s, want POST to the page itself", s.method, s.action)
	}
	if want := (url.Values{"token": {"tok&en"}, "action": {"pay"}}); s.values.Encode() != want.Encode() {
		t.Errorf("sends %v, want %v", s.values, want)
	}

	// A page with nothing to pay (paid, cancelled, expired) says so.
	if _, err := payForm(`<main><p class="status">Paid.</p></main>`, base); err == nil || !strings.Contains(err.Error(), "no Pay button") {
		t.Errorf("a page without a Pay button: %v", err)
	}
}

// fakeAPI answers every pay with action(id, base URL), and serves a hosted
// page at /page/{id} whose Pay form is answered with submit's status.
func fakeAPI(t *testing.T, action func(id, base string) *wire.PaymentAction, submit int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var submitted atomic.Int64
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("POST /v1/orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(wire.Order{ID: r.PathValue("id"), Status: "AWAITING_PAYMENT", Payment: action(r.PathValue("id"), srv.URL)})
	})
	mux.HandleFunc("GET /page/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<form method="post"><input type="hidden" name="token" value="t-%s"><button name="action" value="pay">Pay</button></form>`, r.PathValue("id"))
	})
	mux.HandleFunc("POST /page/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("token") != "t-"+r.PathValue("id") || r.PostFormValue("action") != "pay" {
			http.Error(w, "bad form", http.StatusForbidden)
			return
		}
		submitted.Add(1)
		if submit == http.StatusSeeOther {
			http.Redirect(w, r, "/shop?payment_status=captured", submit)
			return
		}
		w.WriteHeader(submit)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &submitted
}

func buyers(n int) (map[string]string, []string) {
	accepted := map[string]string{}
	var ids []string
	for i := range n {
		id := fmt.Sprint(1000 + i)
		accepted[id] = "token-" + id
		ids = append(ids, id)
	}
	return accepted, ids
}

// A pay answered with a hosted page is completed there: every order's
// form submitted once, each step timed; a submit answered with the page
// again (the payment no longer pending) is counted as not paid, by step.
func TestPayCompletesTheHostedPage(t *testing.T) {
	accepted, ids := buyers(5)
	hosted := func(id, base string) *wire.PaymentAction {
		return &wire.PaymentAction{Provider: "builtin", ID: "pay_" + id, RedirectURL: base + "/page/" + id}
	}
	srv, submitted := fakeAPI(t, hosted, http.StatusSeeOther)
	c := newTarget(srv.URL, 4)
	a, err := c.act(context.Background(), accepted, ids, PhasePay, Options{Concurrency: 4}, newBar(nil, len(ids), "pay"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ok != 5 || submitted.Load() != 5 || a.provider != "builtin" || len(a.captured) != 5 || len(a.page) != 5 || len(a.submit) != 5 || len(a.lat) != 5 || a.failed != nil {
		t.Fatalf("ok %d, submitted %d, provider %q, captured %d, page %d, submit %d, failed %v", a.ok, submitted.Load(), a.provider, len(a.captured), len(a.page), len(a.submit), a.failed)
	}

	srv, _ = fakeAPI(t, hosted, http.StatusConflict)
	c = newTarget(srv.URL, 4)
	a, err = c.act(context.Background(), accepted, ids, PhasePay, Options{Concurrency: 4}, newBar(nil, len(ids), "pay"))
	if err != nil || a.ok != 0 || a.failed["submit"] != 5 || !strings.Contains(a.failedSample, "HTTP 409") {
		t.Fatalf("submits answered 409: %v, ok %d, failed %v (%s)", err, a.ok, a.failed, a.failedSample)
	}
}

// A pay answered with a client secret (Stripe's, for Stripe.js) cannot be
// completed by the bench: the phase stops with an error that says so
// instead of counting orders that will never be paid.
func TestPayWithClientSecretIsRefused(t *testing.T) {
	accepted, ids := buyers(40)
	srv, _ := fakeAPI(t, func(id, _ string) *wire.PaymentAction {
		return &wire.PaymentAction{Provider: "stripe", ID: "pi_" + id, ClientSecret: "pi_" + id + "_secret_x"}
	}, http.StatusSeeOther)
	c := newTarget(srv.URL, 4)
	a, err := c.act(context.Background(), accepted, ids, PhasePay, Options{Concurrency: 4}, newBar(nil, len(ids), "pay"))
	if !errors.Is(err, ErrUnpayable) || !strings.Contains(err.Error(), "client_secret") || !strings.Contains(err.Error(), `"stripe"`) {
		t.Fatalf("act: %v, want ErrUnpayable naming the client_secret and stripe", err)
	}
	if a.ok != 0 {
		t.Errorf("%d orders counted paid", a.ok)
	}
}
