package stripe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/seckill/seckill/payment"
)

// eventJSON is a webhook event as Stripe sends it.
func eventJSON(t *testing.T, id, typ, apiVersion string, object map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": apiVersion, "created": 1700000100,
		"type": typ, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": object},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signed is body signed at `at` with secret, by the library's test helper.
func signed(body []byte, secret string, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	h := http.Header{}
	h.Set("Stripe-Signature", sp.Header)
	return h
}

func verifier(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Config{SecretKey: testKey, WebhookSecret: testSecret, URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func refundJSON(status string) map[string]any {
	return map[string]any{
		"id": "re_1", "object": "refund", "amount": 2500, "currency": "jpy", "status": status,
		"payment_intent": "pi_v", "charge": "ch_1", "created": 1700000090,
	}
}

func TestVerifyParsesTheEventsSeckillActsOn(t *testing.T) {
	now := time.Unix(1700000200, 0)
	failed := map[string]any{"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined"}}
	for _, tc := range []struct {
		typ    string
		object map[string]any
		want   payment.Payment
		refund *payment.Refund
	}{
		{
			typ:    "payment_intent.succeeded",
			object: intentJSON("pi_v", "succeeded", map[string]any{"amount_received": 2500}),
			want:   payment.Payment{OrderID: 42, Amount: payment.Money{Minor: 2500, Currency: "JPY"}, Captured: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Captured},
		},
		{
			typ:    "payment_intent.payment_failed",
			object: intentJSON("pi_v", "requires_payment_method", failed),
			want:   payment.Payment{OrderID: 42, Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Declined},
		},
		{
			// The event is the failure even if its snapshot lacks the error.
			typ:    "payment_intent.payment_failed",
			object: intentJSON("pi_v", "requires_payment_method", nil),
			want:   payment.Payment{OrderID: 42, Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Declined},
		},
		{
			typ:    "payment_intent.canceled",
			object: intentJSON("pi_v", "canceled", nil),
			want:   payment.Payment{OrderID: 42, Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Canceled},
		},
		{
			typ:    "refund.created",
			object: refundJSON("pending"),
			want:   payment.Payment{Amount: payment.Money{Minor: 2500, Currency: "JPY"}, Captured: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Captured},
			refund: &payment.Refund{Provider: "stripe", ID: "re_1", PaymentID: "pi_v", Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.RefundPending},
		},
		{
			typ:    "refund.updated",
			object: refundJSON("succeeded"),
			want:   payment.Payment{Amount: payment.Money{Minor: 2500, Currency: "JPY"}, Captured: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Refunded},
			refund: &payment.Refund{Provider: "stripe", ID: "re_1", PaymentID: "pi_v", Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.RefundSucceeded},
		},
		{
			typ:    "refund.failed",
			object: refundJSON("failed"),
			want:   payment.Payment{Amount: payment.Money{Minor: 2500, Currency: "JPY"}, Captured: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.Captured},
			refund: &payment.Refund{Provider: "stripe", ID: "re_1", PaymentID: "pi_v", Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: payment.RefundFailed},
		},
	} {
		t.Run(tc.typ+"/"+fmt.Sprint(tc.want.State), func(t *testing.T) {
			body := eventJSON(t, "evt_1", tc.typ, stripego.APIVersion, tc.object)
			ev, err := verifier(t).Verify(signed(body, testSecret, now.Add(-time.Minute)), body, now)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Provider, want.ID = "stripe", "pi_v"
			if tc.refund == nil {
				want.Created = time.Unix(1700000000, 0).UTC()
			}
			if ev.ID != "evt_1" || !ev.At.Equal(time.Unix(1700000100, 0)) {
				t.Errorf("event %s at %v", ev.ID, ev.At)
			}
			if ev.Payment != want {
				t.Errorf("payment\n got  %+v\n want %+v", ev.Payment, want)
			}
			if ev.Payment.ClientSecret != "" {
				t.Errorf("an event carries the client secret")
			}
			switch {
			case tc.refund == nil && ev.Refund != nil:
				t.Errorf("refund %+v", ev.Refund)
			case tc.refund != nil && (ev.Refund == nil || *ev.Refund != *tc.refund):
				t.Errorf("refund %+v, want %+v", ev.Refund, tc.refund)
			}
		})
	}
}

func TestVerifyRefusesForgedStaleAndOtherNotifications(t *testing.T) {
	now := time.Unix(1700000200, 0)
	good := eventJSON(t, "evt_2", "payment_intent.succeeded", stripego.APIVersion, intentJSON("pi_v", "succeeded", map[string]any{"amount_received": 2500}))
	tampered := bytes.Replace(good, []byte(`"amount_received":2500`), []byte(`"amount_received":2501`), 1)
	if bytes.Equal(good, tampered) {
		t.Fatal("the tampering changed nothing")
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"no signature", http.Header{}, good, payment.ErrBadSignature},
		{"garbage signature header", http.Header{"Stripe-Signature": {"nonsense"}}, good, payment.ErrBadSignature},
		{"tampered body", signed(good, testSecret, now), tampered, payment.ErrBadSignature},
		{"wrong secret", signed(good, "whsec_someoneelse", now), good, payment.ErrBadSignature},
		// Signature first: a forgery is a forgery, however old it claims to be.
		{"wrong secret, stale", signed(good, "whsec_someoneelse", now.Add(-time.Hour)), good, payment.ErrBadSignature},
		{"stale", signed(good, testSecret, now.Add(-5*time.Minute-time.Second)), good, payment.ErrStale},
		{"a replay a day later", signed(good, testSecret, now.Add(-24*time.Hour)), good, payment.ErrStale},
		{"ignored type", nil, eventJSON(t, "evt_3", "customer.created", stripego.APIVersion, map[string]any{"id": "cus_1", "object": "customer"}), payment.ErrIgnored},
		{"charge.refunded (refund.* reports it)", nil, eventJSON(t, "evt_4", "charge.refunded", stripego.APIVersion, map[string]any{"id": "ch_1", "object": "charge"}), payment.ErrIgnored},
		{"another release train", nil, eventJSON(t, "evt_5", "payment_intent.succeeded", "2025-08-27.basil", intentJSON("pi_v", "succeeded", nil)), ErrAPIVersion},
		{"an account's pre-train version", nil, eventJSON(t, "evt_6", "payment_intent.succeeded", "2024-06-20", intentJSON("pi_v", "succeeded", nil)), ErrAPIVersion},
		{"signed, not an event", nil, []byte(`{"object":"payment_intent","id":"pi_v"}`), payment.ErrRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = signed(tc.body, testSecret, now)
			}
			ev, err := verifier(t).Verify(h, tc.body, now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v (event %+v), want %v", err, ev, tc.want)
			}
			for _, other := range []error{payment.ErrBadSignature, payment.ErrStale, payment.ErrIgnored, ErrAPIVersion} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("%v is also %v", err, other)
				}
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error shows the signing secret: %v", err)
			}
		})
	}
}

// The age is measured against the caller's now, within the tolerance
// configured, and a signature from the near future (clock skew) passes.
func TestVerifyMeasuresAgeAgainstNow(t *testing.T) {
	body := eventJSON(t, "evt_7", "payment_intent.canceled", stripego.APIVersion, intentJSON("pi_v", "canceled", nil))
	signedAt := time.Unix(1700000000, 0)
	h := signed(body, testSecret, signedAt)
	p, err := New(Config{SecretKey: testKey, WebhookSecret: testSecret, Tolerance: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		now  time.Time
		want error
	}{
		{signedAt.Add(-30 * time.Second), nil},
		{signedAt.Add(time.Minute), nil},
		{signedAt.Add(time.Minute + time.Second), payment.ErrStale},
	} {
		if _, err := p.Verify(h, body, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("now = signed %+v: %v, want %v", tc.now.Sub(signedAt), err, tc.want)
		}
	}
}

func TestConfigNeverShowsItsSecrets(t *testing.T) {
	cfg := Config{SecretKey: testKey, WebhookSecret: testSecret, URL: "http://127.0.0.1:12111"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("stripe", "config", cfg)
	for _, shown := range []string{
		fmt.Sprint(cfg), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%s", cfg),
		logged.String(),
	} {
		if strings.Contains(shown, testKey) || strings.Contains(shown, testSecret) {
			t.Fatalf("secret shown: %s", shown)
		}
		if !strings.Contains(shown, "127.0.0.1:12111") {
			t.Errorf("URL not shown: %s", shown)
		}
	}
	for _, bad := range []Config{{WebhookSecret: testSecret}, {SecretKey: testKey}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%v) accepted a config without a secret", bad)
		}
	}
}
