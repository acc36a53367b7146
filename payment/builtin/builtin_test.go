package builtin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
)

var ctx = context.Background()

func TestCreateIsIdempotentByKey(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		req := h.createRequest()
		p, err := h.client.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != payment.Pending || p.Provider != "builtin" || p.OrderID != req.OrderID || p.Amount != req.Amount ||
			p.Captured != (payment.Money{}) || p.RedirectURL != h.srv.URL+"/pay/checkout/"+p.ID {
			t.Fatalf("created %+v", p)
		}
		again, err := h.client.Create(ctx, req)
		if err != nil || again.ID != p.ID {
			t.Fatalf("the same key and body: %+v, %v; want payment %s", again, err, p.ID)
		}
		other := req
		other.Amount.Minor++
		if _, err := h.client.Create(ctx, other); !errors.Is(err, payment.ErrRejected) || apiCode(err) != "idempotency_key_reused" {
			t.Fatalf("the same key, another amount: %v", err)
		}
		other = req
		other.Key = req.Key + "-2"
		if second, err := h.client.Create(ctx, other); err != nil || second.ID == p.ID {
			t.Fatalf("another key: %+v, %v; want a new payment", second, err)
		}
	})
}

func TestCreateValidatesMoney(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"))
	for _, c := range []struct {
		name string
		edit func(*payment.CreateRequest)
	}{
		{"zero amount", func(r *payment.CreateRequest) { r.Amount.Minor = 0 }},
		{"negative amount", func(r *payment.CreateRequest) { r.Amount.Minor = -5 }},
		{"lower-case currency", func(r *payment.CreateRequest) { r.Amount.Currency = "usd" }},
		{"long currency", func(r *payment.CreateRequest) { r.Amount.Currency = "USDT" }},
		{"relative return URL", func(r *payment.CreateRequest) { r.ReturnURL = "/orders/1" }},
		{"no order", func(r *payment.CreateRequest) { r.OrderID = 0 }},
		{"no expiry", func(r *payment.CreateRequest) { r.ExpiresAt = time.Time{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := h.createRequest()
			c.edit(&req)
			_, err := h.client.Create(ctx, req)
			if !errors.Is(err, payment.ErrRejected) || apiCode(err) != "invalid_request" || payment.Retryable(err) {
				t.Fatalf("got %v, want invalid_request", err)
			}
		})
	}
}

func TestAPIRequiresTheSecretKey(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"))
	for _, key := range []string{"", "sk_test_wrong", testSecretKey + "x"} {
		resp, body := h.apiCall(http.MethodGet, "payments/pay_x", key, "")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":"unauthorized"`) {
			t.Fatalf("key %q: %d %s", key, resp.StatusCode, body)
		}
	}
	wrong, err := NewClient(ClientConfig{BaseURL: h.srv.URL + "/pay/", SecretKey: "sk_test_wrong", WebhookSecret: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Create(ctx, h.createRequest()); !errors.Is(err, payment.ErrRejected) || apiCode(err) != "unauthorized" {
		t.Fatalf("a wrong key: %v", err)
	}
	if resp, body := h.apiCall(http.MethodGet, "payments/nope", testSecretKey, ""); resp.StatusCode != http.StatusNotFound ||
		!strings.Contains(body, `"code":"payment_not_found"`) {
		t.Fatalf("unknown payment: %d %s", resp.StatusCode, body)
	}
	if _, err := h.client.Get(ctx, "pay_nope"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("Get of an unknown payment: %v", err)
	}
}

// The buyer's whole way: the hosted page, Pay, back to the shop; the
// payment is captured and a signed notification says so.
func TestPayThroughTheHostedPage(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		p := h.create()
		pg := h.page(p)
		if pg.status != http.StatusOK || pg.token == "" {
			t.Fatalf("page: %d\n%s", pg.status, pg.body)
		}
		for _, want := range []string{"19.99 USD", ">" + strconv.FormatInt(p.OrderID, 10) + "<", `value="pay"`, `value="decline"`} {
			if !strings.Contains(pg.body, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if !strings.Contains(pg.body, "<style>"+checkoutCSS+"</style>") {
			t.Error("the page's style is not the one its CSP hash allows")
		}
		csp := pg.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, checkoutStyleHash) || pg.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("headers: CSP %q, Referrer-Policy %q", csp, pg.header.Get("Referrer-Policy"))
		}

		// A form from elsewhere has no token: refused, nothing changes.
		if resp := h.press(p, "forged", "pay"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a forged form: %s", resp.Status)
		}
		if got := h.get(p.ID); got.State != payment.Pending {
			t.Fatalf("after a forged form: %s", got.State)
		}

		resp := h.press(p, pg.token, "pay")
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "http://shop.example/orders/1?") ||
			!strings.Contains(loc, "payment_id="+p.ID) || !strings.Contains(loc, "from=pay") {
			t.Fatalf("pay: %s to %q", resp.Status, loc)
		}
		got := h.get(p.ID)
		if got.State != payment.Captured || got.Captured != p.Amount {
			t.Fatalf("after pay: %+v", got)
		}
		ev := h.expectEvent(p.ID, payment.Captured)
		if !strings.HasPrefix(ev.ID, "evt_") || ev.Payment.Captured != p.Amount || ev.Payment.OrderID != p.OrderID || ev.At.IsZero() {
			t.Fatalf("event %+v", ev)
		}
		// A second click is sent back again; no second capture.
		if resp := h.press(p, pg.token, "pay"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("pay again: %s", resp.Status)
		}
		if pg := h.page(p); strings.Contains(pg.body, `value="pay"`) || !strings.Contains(pg.body, "Paid.") {
			t.Fatalf("a paid payment's page:\n%s", pg.body)
		}
	})
}

func TestDeclineThroughTheHostedPage(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		p := h.create()
		token := h.page(p).token
		resp := h.press(p, token, "decline")
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "payment_status=declined") {
			t.Fatalf("decline: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		if got := h.get(p.ID); got.State != payment.Declined || got.Captured != (payment.Money{}) {
			t.Fatalf("after decline: %+v", got)
		}
		h.expectEvent(p.ID, payment.Declined)
		// Declined is final: the page cannot pay it.
		if resp := h.press(p, token, "pay"); resp.StatusCode != http.StatusConflict {
			t.Fatalf("pay a declined payment: %s", resp.Status)
		}
	})
}

func TestVerifyRefusesForgedAndStaleNotifications(t *testing.T) {
	c, err := NewClient(ClientConfig{BaseURL: "http://127.0.0.1:1/pay/", SecretKey: "k", WebhookSecret: testWebhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body, _ := json.Marshal(apiEvent{Object: "event", ID: "evt_1", Type: "payment.captured", Created: now, Data: eventData{
		Payment: apiPayment{ID: "pay_1", Amount: 100, Currency: "EUR", AmountCaptured: 100, Status: "captured",
			Metadata: apiMetadata{OrderID: "42", SaleID: "1", UserID: "u"}},
	}})
	signed := func(secret string, at time.Time, b []byte) http.Header {
		return http.Header{SignatureHeader: {Sign(secret, at, b)}}
	}
	ev, err := c.Verify(signed(testWebhookSecret, now, body), body, now)
	if err != nil || ev.ID != "evt_1" || ev.Payment.OrderID != 42 || ev.Payment.Captured != (payment.Money{Minor: 100, Currency: "EUR"}) {
		t.Fatalf("a good notification: %+v, %v", ev, err)
	}
	good := signed(testWebhookSecret, now, body).Get(SignatureHeader)
	tampered := strings.Replace(string(body), `"amount":100`, `"amount":1`, 1)
	for name, c2 := range map[string]struct {
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		"another secret":       {signed("whsec_forged", now, body), body, now, payment.ErrBadSignature},
		"tampered body":        {signed(testWebhookSecret, now, body), []byte(tampered), now, payment.ErrBadSignature},
		"no header":            {http.Header{}, body, now, payment.ErrBadSignature},
		"no timestamp":         {http.Header{SignatureHeader: {good[strings.Index(good, "v1="):]}}, body, now, payment.ErrBadSignature},
		"no signature":         {http.Header{SignatureHeader: {good[:strings.Index(good, ",")]}}, body, now, payment.ErrBadSignature},
		"garbage":              {http.Header{SignatureHeader: {"t=abc,v1=zz"}}, body, now, payment.ErrBadSignature},
		"short signature":      {http.Header{SignatureHeader: {good[:len(good)-2]}}, body, now, payment.ErrBadSignature},
		"signed 6 minutes ago": {signed(testWebhookSecret, now.Add(-6*time.Minute), body), body, now, payment.ErrStale},
		"replayed an hour on":  {signed(testWebhookSecret, now, body), body, now.Add(time.Hour), payment.ErrStale},
		"signed in the future": {signed(testWebhookSecret, now.Add(10*time.Minute), body), body, now, payment.ErrStale},
		// The signature comes first: a stale forgery is a bad signature.
		"stale and forged": {signed("whsec_forged", now.Add(-time.Hour), body), body, now, payment.ErrBadSignature},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.Verify(c2.header, c2.body, c2.now); !errors.Is(err, c2.want) {
				t.Fatalf("got %v, want %v", err, c2.want)
			}
		})
	}
	other, _ := json.Marshal(apiEvent{Object: "event", ID: "evt_2", Type: "payment.created", Created: now})
	if _, err := c.Verify(signed(testWebhookSecret, now, other), other, now); !errors.Is(err, payment.ErrIgnored) {
		t.Fatalf("a kind not acted on: %v", err)
	}
	// Rolling the secret: the header may carry a signature under each.
	rolled := http.Header{SignatureHeader: {Sign("whsec_old", now, body) + "," + good[strings.Index(good, "v1="):]}}
	if _, err := c.Verify(rolled, body, now); err != nil {
		t.Fatalf("two signatures, one good: %v", err)
	}
}

func TestCancel(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		p := h.create()
		got, err := h.client.Cancel(ctx, p.ID)
		if err != nil || got.State != payment.Canceled {
			t.Fatalf("cancel a pending payment: %+v, %v", got, err)
		}
		h.expectEvent(p.ID, payment.Canceled)
		if again, err := h.client.Cancel(ctx, p.ID); err != nil || again.State != payment.Canceled {
			t.Fatalf("cancel again: %+v, %v", again, err)
		}
		pg := h.page(p)
		if strings.Contains(pg.body, `value="pay"`) || !strings.Contains(pg.body, "Cancelled") {
			t.Fatalf("a cancelled payment's page:\n%s", pg.body)
		}
		if resp := h.press(p, pg.token, "pay"); resp.StatusCode != http.StatusConflict {
			t.Fatalf("pay a cancelled payment: %s", resp.Status)
		}
		if got := h.get(p.ID); got.State != payment.Canceled {
			t.Fatalf("after paying a cancelled payment: %s", got.State)
		}

		// Paid as the window closed: the cancel answers captured, no error.
		q := h.create()
		h.pay(q)
		h.expectEvent(q.ID, payment.Captured)
		got, err = h.client.Cancel(ctx, q.ID)
		if err != nil || got.State != payment.Captured || got.Captured != q.Amount {
			t.Fatalf("cancel a captured payment: %+v, %v", got, err)
		}
		h.noMoreEvents()
	})
}

func TestRefund(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		p := h.create()
		if _, err := h.client.Refund(ctx, p.ID, "refund-1", "late"); !errors.Is(err, payment.ErrRejected) || apiCode(err) != "payment_not_captured" {
			t.Fatalf("refund a pending payment: %v", err)
		}
		h.pay(p)
		h.expectEvent(p.ID, payment.Captured)

		rf, err := h.client.Refund(ctx, p.ID, "refund-1", "order expired")
		if err != nil || rf.State != payment.RefundSucceeded || rf.PaymentID != p.ID || rf.Amount != p.Amount || rf.Provider != "builtin" {
			t.Fatalf("refund: %+v, %v", rf, err)
		}
		ev := h.expectEvent(p.ID, payment.Refunded)
		if ev.Refund == nil || ev.Refund.ID != rf.ID || ev.Payment.Captured != p.Amount {
			t.Fatalf("refund event %+v", ev)
		}
		again, err := h.client.Refund(ctx, p.ID, "refund-1", "order expired")
		if err != nil || again.ID != rf.ID {
			t.Fatalf("the same key again: %+v, %v; want refund %s", again, err, rf.ID)
		}
		if _, err := h.client.Refund(ctx, p.ID, "refund-2", "operator"); !errors.Is(err, payment.ErrRejected) ||
			apiCode(err) != "payment_already_refunded" {
			t.Fatalf("a second refund under another key: %v", err)
		}
		q := h.create()
		h.pay(q)
		h.expectEvent(q.ID, payment.Captured)
		if _, err := h.client.Refund(ctx, q.ID, "refund-1", "x"); apiCode(err) != "idempotency_key_reused" {
			t.Fatalf("a refund key reused for another payment: %v", err)
		}
		if _, err := h.client.Refund(ctx, "pay_nope", "refund-9", "x"); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("refund an unknown payment: %v", err)
		}
		if got := h.get(p.ID); got.State != payment.Refunded || got.Captured != p.Amount {
			t.Fatalf("after refund: %+v", got)
		}
		h.noMoreEvents()
	})
}

// Concurrent refunds under one key make one refund.
func TestRefundConcurrentSameKey(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db, func(o *options) { o.noRun = true })
		p := h.create()
		h.pay(p)
		ids := make(chan string, 8)
		for range 8 {
			go func() {
				rf, err := h.client.Refund(ctx, p.ID, "refund-same", "race")
				if err != nil {
					ids <- "error: " + err.Error()
					return
				}
				ids <- rf.ID
			}()
		}
		first := <-ids
		for range 7 {
			if id := <-ids; id != first || !strings.HasPrefix(id, "re_") {
				t.Fatalf("refunds %q and %q", first, id)
			}
		}
	})
}

func TestCapturedLists(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		start := h.clock.Now()
		var paid []payment.Payment
		for range 3 {
			p := h.create()
			h.pay(p)
			paid = append(paid, p)
			h.clock.Advance(time.Minute)
		}
		h.create() // pending: not listed
		if _, err := h.client.Refund(ctx, paid[1].ID, "r", "x"); err != nil {
			t.Fatal(err)
		}
		all, err := h.client.Captured(ctx, start, h.clock.Now())
		if err != nil || len(all) != 3 {
			t.Fatalf("captured: %d, %v", len(all), err)
		}
		for i, p := range all {
			if p.ID != paid[i].ID || p.Captured != paid[i].Amount {
				t.Fatalf("captured[%d] = %+v, want %s", i, p, paid[i].ID)
			}
		}
		if all[1].State != payment.Refunded {
			t.Fatalf("a refunded capture is listed as %s", all[1].State)
		}
		// [from, to): the first minute holds the first capture only.
		some, err := h.client.Captured(ctx, start, start.Add(time.Minute))
		if err != nil || len(some) != 1 || some[0].ID != paid[0].ID {
			t.Fatalf("captured in the first minute: %+v, %v", some, err)
		}
		// Pages of one, followed by their cursor.
		var seen []string
		after := ""
		for {
			path := "payments?limit=1&captured_from=" + start.UTC().Format(time.RFC3339Nano) + "&captured_to=" + h.clock.Now().UTC().Format(time.RFC3339Nano)
			if after != "" {
				path += "&after=" + after
			}
			resp, body := h.apiCall(http.MethodGet, path, testSecretKey, "")
			var list apiList
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
				t.Fatalf("list: %d %s", resp.StatusCode, body)
			}
			for _, p := range list.Data {
				seen = append(seen, p.ID)
			}
			if !list.HasMore {
				break
			}
			after = list.NextAfter
		}
		if len(seen) != 3 || seen[0] != paid[0].ID || seen[2] != paid[2].ID {
			t.Fatalf("paged: %v", seen)
		}
	})
}

func TestExpiredPaymentCannotBePaid(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db, func(o *options) { o.noControls = true })
		p := h.create()
		token := h.page(p).token
		h.clock.Advance(11 * time.Minute) // past ExpiresAt
		pg := h.page(p)
		if strings.Contains(pg.body, `value="pay"`) || strings.Contains(pg.body, `pay_late`) || !strings.Contains(pg.body, "Expired") {
			t.Fatalf("an expired payment's page:\n%s", pg.body)
		}
		if resp := h.press(p, token, "pay"); resp.StatusCode != http.StatusConflict {
			t.Fatalf("pay an expired payment: %s", resp.Status)
		}
		if resp := h.press(p, token, "pay_late"); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("pay late without the controls: %s", resp.Status)
		}
		if got := h.get(p.ID); got.State != payment.Canceled {
			t.Fatalf("expired: %s", got.State)
		}
		h.expectEvent(p.ID, payment.Canceled)
		h.noMoreEvents()
	})
}

// Nobody looks at an expired payment: the sender expires it, and tells.
func TestExpiryIsNotified(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"))
	p := h.create()
	h.clock.Advance(11 * time.Minute)
	h.expectEvent(p.ID, payment.Canceled)
}

func TestOutboxRetriesUntilDelivered(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		h.failFirst.Store(3)
		p := h.create()
		h.pay(p)
		ev := h.expectEvent(p.ID, payment.Captured)
		if n := h.attempts.Load(); n != 4 {
			t.Fatalf("%d deliveries, want 3 refused and 1 taken", n)
		}
		// The receiver took it before the sender recorded so.
		testenv.Eventually(t, 5*time.Second, func() error {
			var attempts int
			var delivered sql.NullInt64
			if err := db.QueryRow(`SELECT attempts, delivered_at FROM builtinpay_events WHERE id = $1`, ev.ID).Scan(&attempts, &delivered); err != nil {
				return err
			}
			if attempts != 4 || !delivered.Valid {
				return fmt.Errorf("outbox row: %d attempts, delivered %v", attempts, delivered.Valid)
			}
			return nil
		})
		if strings.Contains(h.logs.String(), testWebhookSecret) || strings.Contains(h.logs.String(), testSecretKey) {
			t.Fatal("a secret in the logs")
		}
		if !strings.Contains(h.logs.String(), "notification not delivered") {
			t.Fatalf("the failed deliveries were not logged:\n%s", h.logs.String())
		}
	})
}

// What one service could not deliver, the next over the same database
// does: the outbox is durable.
func TestOutboxSurvivesARestart(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		h.failFirst.Store(1 << 40)
		p := h.create()
		h.pay(p)
		testenv.Eventually(t, 10*time.Second, func() error {
			if h.attempts.Load() < 2 {
				return errors.New("the receiver was not tried twice yet")
			}
			return nil
		})
		h.stop()
		h.failFirst.Store(0)
		h.start(true, true)
		ev := h.expectEvent(p.ID, payment.Captured)
		// The new service sends the same event, not a new one.
		var id string
		if err := db.QueryRow(`SELECT id FROM builtinpay_events WHERE payment_id = $1`, p.ID).Scan(&id); err != nil || id != ev.ID {
			t.Fatalf("event %s, outbox %s (%v)", ev.ID, id, err)
		}
	})
}

func TestControlsProviderDown(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		p := h.create()
		if err := h.svc.SetControls(Controls{APIStatus: http.StatusServiceUnavailable}); err != nil {
			t.Fatal(err)
		}
		_, err := h.client.Get(ctx, p.ID)
		if !errors.Is(err, payment.ErrUnavailable) || !payment.Retryable(err) {
			t.Fatalf("provider down: %v", err)
		}
		if _, err := h.client.Cancel(ctx, p.ID); !errors.Is(err, payment.ErrUnavailable) {
			t.Fatalf("cancel, provider down: %v", err)
		}
		if err := h.svc.SetControls(Controls{APIStatus: http.StatusTooManyRequests, RetryAfter: 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err = h.client.Create(ctx, h.createRequest())
		var rl *payment.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second || rl.Provider != "builtin" || !payment.Retryable(err) {
			t.Fatalf("rate limited: %v", err)
		}
		if err := h.svc.SetControls(Controls{}); err != nil {
			t.Fatal(err)
		}
		if got := h.get(p.ID); got.State != payment.Pending {
			t.Fatalf("after the outage: %s", got.State)
		}
	})
}

// The controls over the API, for tests that run seckill as a process.
func TestControlsOverTheAPI(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"))
	resp, body := h.apiCall(http.MethodPut, "controls", testSecretKey, `{"api_status":429,"retry_after":"2s","notify_twice":true}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("put controls: %d %s", resp.StatusCode, body)
	}
	if c := h.svc.Controls(); c.APIStatus != 429 || c.RetryAfter != 2*time.Second || !c.NotifyTwice {
		t.Fatalf("controls %+v", c)
	}
	if resp, _ := h.apiCall(http.MethodGet, "payments/x", testSecretKey, ""); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("rate limited: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp, body := h.apiCall(http.MethodPut, "controls", testSecretKey, `{"api_status":418}`); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a bad status: %d %s", resp.StatusCode, body)
	}
	if resp, _ := h.apiCall(http.MethodPut, "controls", "", `{}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("controls without the key: %s", resp.Status)
	}
	if resp, _ := h.apiCall(http.MethodPut, "controls", testSecretKey, `{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("clear: %s", resp.Status)
	}
	p := h.create()
	if _, err := h.client.Cancel(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	resp, body = h.apiCall(http.MethodPost, "payments/"+p.ID+"/capture_late", testSecretKey, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"captured"`) {
		t.Fatalf("capture late: %d %s", resp.StatusCode, body)
	}
}

func TestControlsOffInProduction(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"), func(o *options) { o.noControls = true })
	if err := h.svc.SetControls(Controls{APIStatus: 503}); !errors.Is(err, ErrNoControls) {
		t.Fatalf("SetControls: %v", err)
	}
	p := h.create()
	if _, err := h.svc.CaptureLate(ctx, p.ID); !errors.Is(err, ErrNoControls) {
		t.Fatalf("CaptureLate: %v", err)
	}
	if resp, _ := h.apiCall(http.MethodPut, "controls", testSecretKey, `{"api_status":503}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("controls route: %s", resp.Status)
	}
	if strings.Contains(h.page(p).body, "pay_late") {
		t.Fatal("a Pay late button without the controls")
	}
}

func TestControlsDuplicateNotifications(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		if err := h.svc.SetControls(Controls{NotifyTwice: true}); err != nil {
			t.Fatal(err)
		}
		p := h.create()
		h.pay(p)
		first := h.expectEvent(p.ID, payment.Captured)
		second := h.expectEvent(p.ID, payment.Captured)
		if first.ID != second.ID || !first.At.Equal(second.At) {
			t.Fatalf("a repeat: %s at %s, then %s at %s", first.ID, first.At, second.ID, second.At)
		}
	})
}

func TestControlsDelayedAndOutOfOrderNotifications(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		if err := h.svc.SetControls(Controls{NotifyHold: true, NotifyOutOfOrder: true}); err != nil {
			t.Fatal(err)
		}
		p := h.create()
		h.pay(p)
		if _, err := h.client.Refund(ctx, p.ID, "r1", "x"); err != nil {
			t.Fatal(err)
		}
		h.noMoreEvents() // held
		if err := h.svc.SetControls(Controls{NotifyOutOfOrder: true}); err != nil {
			t.Fatal(err)
		}
		refunded := h.expectEvent(p.ID, payment.Refunded)
		captured := h.expectEvent(p.ID, payment.Captured)
		if !captured.At.Before(refunded.At) {
			t.Fatalf("At does not order them: captured %s, refunded %s", captured.At, refunded.At)
		}

		const delay = 300 * time.Millisecond
		if err := h.svc.SetControls(Controls{NotifyDelay: delay}); err != nil {
			t.Fatal(err)
		}
		q := h.create()
		paid := time.Now()
		h.pay(q)
		h.expectEvent(q.ID, payment.Captured)
		if waited := time.Since(paid); waited < delay {
			t.Fatalf("a delayed notification came after %s, want at least %s", waited, delay)
		}
	})
}

// Late capture: the cancel was answered "canceled", and the capture
// lands anyway, as when a provider's cancel and the buyer's payment cross.
func TestControlsLateCapture(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)

		// The Go method, after the cancel.
		p := h.create()
		if got, err := h.client.Cancel(ctx, p.ID); err != nil || got.State != payment.Canceled {
			t.Fatalf("cancel: %+v, %v", got, err)
		}
		h.expectEvent(p.ID, payment.Canceled)
		late, err := h.svc.CaptureLate(ctx, p.ID)
		if err != nil || late.State != payment.Captured || late.Captured != p.Amount {
			t.Fatalf("capture late: %+v, %v", late, err)
		}
		h.expectEvent(p.ID, payment.Captured)

		// The page's "Pay late" on a pending payment: the buyer goes back
		// at once, the shop's cancel is answered canceled, and the capture
		// follows it.
		q := h.create()
		pg := h.page(q)
		if !strings.Contains(pg.body, `value="pay_late"`) {
			t.Fatalf("no Pay late button with the controls on:\n%s", pg.body)
		}
		if resp := h.press(q, pg.token, "pay_late"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("pay late: %s", resp.Status)
		}
		if got := h.get(q.ID); got.State != payment.Pending {
			t.Fatalf("after Pay late, before the cancel: %s", got.State)
		}
		got, err := h.client.Cancel(ctx, q.ID)
		if err != nil || got.State != payment.Canceled {
			t.Fatalf("the shop's cancel: %+v, %v", got, err)
		}
		if got := h.get(q.ID); got.State != payment.Captured {
			t.Fatalf("after the cancel: %s", got.State)
		}
		h.expectEvent(q.ID, payment.Canceled)
		h.expectEvent(q.ID, payment.Captured)

		// The page of an expired payment offers Pay late, which captures.
		r := h.create()
		token := h.page(r).token
		h.clock.Advance(11 * time.Minute)
		if pg := h.page(r); !strings.Contains(pg.body, "Expired") || !strings.Contains(pg.body, `value="pay_late"`) {
			t.Fatalf("expired page with the controls:\n%s", pg.body)
		}
		if resp := h.press(r, token, "pay_late"); resp.StatusCode != http.StatusSeeOther ||
			!strings.Contains(resp.Header.Get("Location"), "payment_status=captured") {
			t.Fatalf("pay late an expired payment: %s %s", resp.Status, resp.Header.Get("Location"))
		}
		h.expectEvent(r.ID, payment.Canceled)
		h.expectEvent(r.ID, payment.Captured)
	})
}

// No error of the client quotes a secret: not the key, nor a password in
// the base URL.
func TestSecretsStayOutOfErrors(t *testing.T) {
	c, err := NewClient(ClientConfig{
		BaseURL: "http://user:hunter2-base-password@127.0.0.1:1/pay/", SecretKey: testSecretKey, WebhookSecret: testWebhookSecret,
		HTTPClient: &http.Client{Timeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, printed := range []string{fmt.Sprint(c.cfg), fmt.Sprintf("%+v", c.cfg), fmt.Sprintf("%v", Config{
		BaseURL: "http://x", SecretKey: testSecretKey, WebhookSecret: testWebhookSecret, WebhookURL: "http://u:hunter2-base-password@h/",
	})} {
		for _, secret := range []string{"hunter2-base-password", testSecretKey, testWebhookSecret} {
			if strings.Contains(printed, secret) {
				t.Fatalf("a printed config shows a secret: %s", printed)
			}
		}
	}
	_, err = c.Get(ctx, "pay_1")
	if !errors.Is(err, payment.ErrUnavailable) {
		t.Fatalf("unreachable: %v", err)
	}
	for _, secret := range []string{"hunter2-base-password", testSecretKey, testWebhookSecret} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error quotes a secret: %v", err)
		}
	}
}

// Concurrent creates under one key make one payment.
func TestCreateConcurrentSameKey(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db, func(o *options) { o.noRun = true })
		req := h.createRequest()
		ids := make(chan string, 8)
		for range 8 {
			go func() {
				p, err := h.client.Create(ctx, req)
				if err != nil {
					ids <- "error: " + err.Error()
					return
				}
				ids <- p.ID
			}()
		}
		first := <-ids
		for range 7 {
			if id := <-ids; id != first || !strings.HasPrefix(id, "pay_") {
				t.Fatalf("payments %q and %q", first, id)
			}
		}
	})
}

func TestFormatAmount(t *testing.T) {
	for _, c := range []struct {
		m    payment.Money
		want string
	}{
		{payment.Money{Minor: 1999, Currency: "USD"}, "19.99 USD"},
		{payment.Money{Minor: 5, Currency: "EUR"}, "0.05 EUR"},
		{payment.Money{Minor: 500, Currency: "JPY"}, "500 JPY"},
		{payment.Money{Minor: 1234, Currency: "KWD"}, "1.234 KWD"},
		{payment.Money{Minor: 700, Currency: "QQQ"}, "700 QQQ (minor units)"},
	} {
		if got := formatAmount(c.m); got != c.want {
			t.Errorf("formatAmount(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}

// Two instances over one database (two api processes) share the outbox:
// each notification is claimed by one, so a healthy receiver gets each
// once.
func TestTwoSendersShareTheOutbox(t *testing.T) {
	eachDB(t, func(t *testing.T, db *sql.DB) {
		h := newHarness(t, db)
		second, err := New(h.svc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- second.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })

		const n = 20
		want := map[string]bool{}
		for range n {
			p := h.create()
			h.pay(p)
			want[p.ID] = true
		}
		seen := map[string]bool{}
		for range n {
			ev := h.next()
			if seen[ev.ID] || !want[ev.Payment.ID] {
				t.Fatalf("event %s about %s: a repeat, or not ours", ev.ID, ev.Payment.ID)
			}
			seen[ev.ID] = true
		}
		if got := h.attempts.Load(); got != n {
			t.Fatalf("%d deliveries of %d notifications", got, n)
		}
	})
}

// "Pay late" on a payment nobody cancels: its window's end cancels it,
// and the capture follows that just the same.
func TestControlsLateCaptureAtExpiry(t *testing.T) {
	h := newHarness(t, openSQLite(t, t.TempDir()+"/pay.db"))
	p := h.create()
	if resp := h.press(p, h.page(p).token, "pay_late"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pay late: %s", resp.Status)
	}
	h.clock.Advance(11 * time.Minute)
	h.expectEvent(p.ID, payment.Canceled)
	h.expectEvent(p.ID, payment.Captured)
	if got := h.get(p.ID); got.State != payment.Captured {
		t.Fatalf("after the window: %s", got.State)
	}
}
