package stripe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
)

const (
	testKey    = "sk_test_seckillNotARealKey0123456789"
	testSecret = "whsec_seckillNotARealSecret"
)

// recorder keeps what the adapter sends: stripe-mock answers fixtures and
// keeps nothing, so the request is where the adapter's work shows.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	Method, Path string
	Header       http.Header
	Form         url.Values // the form body, or the query of a GET
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := recorded{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Form: req.URL.Query()}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > 0 {
			if rec.Form, err = url.ParseQuery(string(body)); err != nil {
				return nil, err
			}
		}
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, rec)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// only is the one request sent, failing the test if there were more or none.
func (r *recorder) only(t *testing.T) recorded {
	t.Helper()
	reqs := r.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests sent, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}

// newProvider is the adapter calling baseURL through a recorder.
func newProvider(t *testing.T, baseURL string) (*Provider, *recorder) {
	t.Helper()
	rec := &recorder{next: http.DefaultTransport}
	p, err := New(Config{
		SecretKey:     testKey,
		WebhookSecret: testSecret,
		URL:           baseURL,
		HTTPClient:    &http.Client{Transport: rec, Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func mockProvider(t *testing.T) (*Provider, *recorder) {
	t.Helper()
	return newProvider(t, testenv.StripeMockURL(t))
}

// wantForm checks the request's form fields.
func wantForm(t *testing.T, req recorded, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := req.Form.Get(k); got != v {
			t.Errorf("%s %s: %s = %q, want %q (form %v)", req.Method, req.Path, k, got, v, req.Form)
		}
	}
}

// wantHeaders checks what every request to Stripe carries: the key as a
// bearer token and the library's API version.
func wantHeaders(t *testing.T, req recorded) {
	t.Helper()
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := req.Header.Get("Stripe-Version"); got != stripego.APIVersion {
		t.Errorf("Stripe-Version = %q, want %q", got, stripego.APIVersion)
	}
}

func TestCreateSendsAnIdempotentPaymentIntentToStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	pay, err := p.Create(context.Background(), payment.CreateRequest{
		OrderID: 9007199254740993, // beyond a float64's integers
		SaleID:  7,
		UserID:  "buyer-1",
		Amount:  payment.Money{Minor: 1999, Currency: "EUR"},
		Key:     "order-9007199254740993-attempt-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	req := rec.only(t)
	if req.Method != http.MethodPost || req.Path != "/v1/payment_intents" {
		t.Fatalf("sent %s %s", req.Method, req.Path)
	}
	wantHeaders(t, req)
	if got := req.Header.Get("Idempotency-Key"); got != "order-9007199254740993-attempt-1" {
		t.Errorf("Idempotency-Key = %q", got)
	}
	wantForm(t, req, map[string]string{
		"amount":                             "1999",
		"currency":                           "eur",
		"automatic_payment_methods[enabled]": "true",
		"metadata[order_id]":                 "9007199254740993",
		"metadata[sale_id]":                  "7",
		"metadata[user_id]":                  "buyer-1",
	})
	// stripe-mock echoes amount and currency and answers the rest from its
	// fixture: an id, a client secret, and (oddly for a new intent) a
	// last_payment_error on requires_payment_method, which reads Declined.
	if !strings.HasPrefix(pay.ID, "pi_") || !strings.HasPrefix(pay.ClientSecret, "pi_") {
		t.Errorf("id %q, client secret %q", pay.ID, pay.ClientSecret)
	}
	if pay.Provider != "stripe" || pay.Amount != (payment.Money{Minor: 1999, Currency: "EUR"}) {
		t.Errorf("payment %+v", pay)
	}
	if pay.State != payment.Declined || pay.Captured != (payment.Money{}) {
		t.Errorf("state %s, captured %v: want the fixture's requires_payment_method with last_payment_error", pay.State, pay.Captured)
	}
	if !pay.Created.Equal(time.Unix(1234567890, 0)) {
		t.Errorf("created %v", pay.Created)
	}
}

// A request the adapter cannot make right is refused before it is sent.
func TestCreateRefusesWhatStripeWouldWithoutARequest(t *testing.T) {
	p, rec := newProvider(t, "http://127.0.0.1:1") // nothing listens there
	good := payment.CreateRequest{OrderID: 1, Amount: payment.Money{Minor: 100, Currency: "USD"}, Key: "k"}
	for name, mutate := range map[string]func(*payment.CreateRequest){
		"no key":             func(r *payment.CreateRequest) { r.Key = "" },
		"zero amount":        func(r *payment.CreateRequest) { r.Amount.Minor = 0 },
		"lower-case code":    func(r *payment.CreateRequest) { r.Amount.Currency = "usd" },
		"not a 4217 code":    func(r *payment.CreateRequest) { r.Amount.Currency = "DOLLARS" },
		"no currency at all": func(r *payment.CreateRequest) { r.Amount.Currency = "" },
	} {
		req := good
		mutate(&req)
		if _, err := p.Create(context.Background(), req); !errors.Is(err, payment.ErrRejected) {
			t.Errorf("%s: %v, want ErrRejected", name, err)
		}
	}
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

// stripe-mock validates requests against the API's spec: its refusal comes
// back as ErrRejected, with Stripe's message.
func TestStripeMockValidationErrorIsRejected(t *testing.T) {
	p, _ := mockProvider(t)
	// No amount: a request Create never sends, made through the adapter's
	// client to reach stripe-mock's validation.
	_, err := p.client.V1PaymentIntents.Create(context.Background(), &stripego.PaymentIntentCreateParams{Currency: stripego.String("usd")})
	if err == nil {
		t.Fatal("stripe-mock accepted an intent without an amount")
	}
	err = p.fail("create payment", err)
	var ae *APIError
	if !errors.Is(err, payment.ErrRejected) || errors.Is(err, payment.ErrNotFound) || !errors.As(err, &ae) {
		t.Fatalf("%v: want ErrRejected", err)
	}
	if ae.Status != 400 || ae.Type != "invalid_request_error" || !strings.Contains(ae.Message, "amount") {
		t.Fatalf("%+v", ae)
	}
}

func TestGetReadsAPaymentIntentFromStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	pay, err := p.Get(context.Background(), "pi_seckill1")
	if err != nil {
		t.Fatal(err)
	}
	req := rec.only(t)
	if req.Method != http.MethodGet || req.Path != "/v1/payment_intents/pi_seckill1" {
		t.Fatalf("sent %s %s", req.Method, req.Path)
	}
	wantHeaders(t, req)
	// The fixture: 1099 usd, created 1234567890; the id is the path's.
	if pay.ID != "pi_seckill1" || pay.Amount != (payment.Money{Minor: 1099, Currency: "USD"}) || pay.ClientSecret == "" {
		t.Fatalf("payment %+v", pay)
	}
}

func TestCancelAbandonsAPaymentIntentAtStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	pay, err := p.Cancel(context.Background(), "pi_seckill2")
	if err != nil {
		t.Fatal(err)
	}
	req := rec.only(t)
	if req.Method != http.MethodPost || req.Path != "/v1/payment_intents/pi_seckill2/cancel" {
		t.Fatalf("sent %s %s", req.Method, req.Path)
	}
	wantHeaders(t, req)
	wantForm(t, req, map[string]string{"cancellation_reason": "abandoned"})
	if pay.ID != "pi_seckill2" || pay.ClientSecret != "" {
		t.Fatalf("payment %+v", pay)
	}
}

func TestRefundRefundsAPaymentIntentWholeAtStripeMock(t *testing.T) {
	for _, tc := range []struct {
		reason, stripeReason string
	}{
		{"late_capture", ""},
		{"duplicate", "duplicate"},
		{"requested_by_customer", "requested_by_customer"},
		{"fraudulent", ""}, // Radar's business, never the saga's
	} {
		t.Run(tc.reason, func(t *testing.T) {
			p, rec := mockProvider(t)
			r, err := p.Refund(context.Background(), "pi_seckill3", "refund-order-5", tc.reason)
			if err != nil {
				t.Fatal(err)
			}
			req := rec.only(t)
			if req.Method != http.MethodPost || req.Path != "/v1/refunds" {
				t.Fatalf("sent %s %s", req.Method, req.Path)
			}
			wantHeaders(t, req)
			if got := req.Header.Get("Idempotency-Key"); got != "refund-order-5" {
				t.Errorf("Idempotency-Key = %q", got)
			}
			wantForm(t, req, map[string]string{
				"payment_intent":           "pi_seckill3",
				"reason":                   tc.stripeReason,
				"metadata[seckill_reason]": tc.reason,
				"amount":                   "", // whole: Stripe refunds what remains
			})
			// stripe-mock echoes the intent; its fixture refund succeeded, 100 usd.
			want := payment.Refund{Provider: "stripe", PaymentID: "pi_seckill3", Amount: payment.Money{Minor: 100, Currency: "USD"}, State: payment.RefundSucceeded}
			if !strings.HasPrefix(r.ID, "re_") {
				t.Errorf("refund id %q", r.ID)
			}
			r.ID = ""
			if r != want {
				t.Errorf("refund %+v, want %+v", r, want)
			}
		})
	}
}

func TestCapturedListsByCreationTimeAtStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	from := time.Unix(1_700_000_000, 0)
	to := time.Unix(1_700_003_600, 500_000_000) // rounded up to the second
	got, err := p.Captured(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	req := rec.only(t)
	if req.Method != http.MethodGet || req.Path != "/v1/payment_intents" {
		t.Fatalf("sent %s %s", req.Method, req.Path)
	}
	wantHeaders(t, req)
	wantForm(t, req, map[string]string{"created[gte]": "1700000000", "created[lt]": "1700003601", "limit": "100"})
	// The fixture's one intent is requires_payment_method: not a capture.
	if len(got) != 0 {
		t.Fatalf("captured %+v", got)
	}
}
