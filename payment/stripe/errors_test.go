package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/payment"
)

// stripeError writes an error the way Stripe's API does.
func stripeError(w http.ResponseWriter, status int, typ, code, msg string, extra map[string]any) {
	body := map[string]any{"type": typ, "message": msg}
	if code != "" {
		body["code"] = code
	}
	for k, v := range extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_seckilltest")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// fakeStripe answers every request with h and counts them.
func fakeStripe(t *testing.T, h http.HandlerFunc) (*Provider, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	p, _ := newProvider(t, srv.URL)
	return p, &hits
}

func TestStripeErrorsMapOntoThePortsErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  http.HandlerFunc
		retry   time.Duration // want a *payment.RateLimitedError with this RetryAfter
		want    []error       // want errors.Is for each
		notWant []error
	}{
		{
			name: "429 with Retry-After",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				stripeError(w, 429, "invalid_request_error", "rate_limit", "Too many requests", nil)
			},
			retry: 7 * time.Second,
		},
		{
			name: "429 as an HTTP date",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
				stripeError(w, 429, "invalid_request_error", "rate_limit", "Too many requests", nil)
			},
			retry: -1, // between 59 and 60 minutes; checked below
		},
		{
			name: "429 lock timeout, no Retry-After",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 429, "invalid_request_error", "lock_timeout", "This object cannot be accessed right now", nil)
			},
			retry: 0,
		},
		{
			name: "500",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 500, "api_error", "", "Something went wrong on Stripe's end.", nil)
			},
			want:    []error{payment.ErrUnavailable},
			notWant: []error{payment.ErrRejected},
		},
		{
			name: "502 from a proxy, not Stripe's JSON",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(502)
				fmt.Fprint(w, "<html>Bad Gateway</html>")
			},
			want:    []error{payment.ErrUnavailable},
			notWant: []error{payment.ErrRejected},
		},
		{
			name: "404 resource_missing",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 404, "invalid_request_error", "resource_missing", "No such payment_intent: 'pi_nope'", nil)
			},
			want:    []error{payment.ErrNotFound, payment.ErrRejected},
			notWant: []error{payment.ErrUnavailable},
		},
		{
			name: "400 resource_missing in a parameter",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 400, "invalid_request_error", "resource_missing", "No such payment_intent: 'pi_nope'", map[string]any{"param": "payment_intent"})
			},
			want: []error{payment.ErrNotFound, payment.ErrRejected},
		},
		{
			name: "400 invalid parameter",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 400, "invalid_request_error", "parameter_invalid_integer", "Invalid integer: x", nil)
			},
			want:    []error{payment.ErrRejected},
			notWant: []error{payment.ErrNotFound, payment.ErrUnavailable},
		},
		{
			name: "409 idempotency key in use",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 409, "idempotency_error", "idempotency_key_in_use", "There is currently another in-progress request using this Idempotent Key", nil)
			},
			want:    []error{payment.ErrUnavailable},
			notWant: []error{payment.ErrRejected},
		},
		{
			name: "400 idempotency key reused with other parameters",
			answer: func(w http.ResponseWriter, r *http.Request) {
				stripeError(w, 400, "idempotency_error", "", "Keys for idempotent requests can only be used with the same parameters they were first used with.", nil)
			},
			want: []error{payment.ErrRejected},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, hits := fakeStripe(t, tc.answer)
			_, err := p.Get(context.Background(), "pi_nope")
			if err == nil {
				t.Fatal("no error")
			}
			// The library's own retries are off: the workflow's activity retries.
			if n := hits.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			var rl *payment.RateLimitedError
			switch {
			case tc.retry == -1:
				if !errors.As(err, &rl) || rl.RetryAfter < 59*time.Minute || rl.RetryAfter > time.Hour {
					t.Fatalf("%v: want a rate limit of about an hour", err)
				}
			case tc.want == nil:
				if !errors.As(err, &rl) || rl.RetryAfter != tc.retry || rl.Provider != "stripe" {
					t.Fatalf("%v: want a rate limit, retry after %s", err, tc.retry)
				}
			default:
				if errors.As(err, &rl) {
					t.Fatalf("%v: a rate limit", err)
				}
			}
			if !payment.Retryable(err) && (tc.want == nil || errors.Is(err, payment.ErrUnavailable)) {
				t.Errorf("%v: not retryable", err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("%v: not %v", err, w)
				}
			}
			for _, w := range tc.notWant {
				if errors.Is(err, w) {
					t.Errorf("%v: is %v", err, w)
				}
			}
		})
	}
}

func TestStripeErrorKeepsItsDetailsButNoSecret(t *testing.T) {
	p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
		// Stripe masks keys itself; an error that echoed one whole, and
		// carried an intent with its client secret, must not pass either on.
		stripeError(w, 401, "invalid_request_error", "", "Invalid API Key provided: "+testKey, map[string]any{
			"payment_intent": map[string]any{"id": "pi_1", "object": "payment_intent", "client_secret": "pi_1_secret_leak"},
		})
	})
	_, err := p.Get(context.Background(), "pi_1")
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, payment.ErrRejected) {
		t.Fatalf("%v: want an APIError, rejected", err)
	}
	if ae.Status != 401 || ae.RequestID != "req_seckilltest" || ae.Op != "get payment pi_1" {
		t.Errorf("%+v", ae)
	}
	msg := err.Error()
	for _, secret := range []string{testKey, "pi_1_secret_leak"} {
		if strings.Contains(msg, secret) {
			t.Fatalf("error shows %q: %s", secret, msg)
		}
	}
	if !strings.Contains(msg, "Invalid API Key provided: (redacted)") {
		t.Errorf("error %q", msg)
	}
}

func TestNoAnswerIsUnavailable(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // its port now refuses connections
		p, rec := newProvider(t, srv.URL)
		_, err := p.Get(context.Background(), "pi_1")
		if !errors.Is(err, payment.ErrUnavailable) || errors.Is(err, payment.ErrRejected) {
			t.Fatalf("%v: want ErrUnavailable", err)
		}
		if n := len(rec.all()); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := p.Get(ctx, "pi_1")
			errc <- err
		}()
		cancel()
		err := <-errc
		if !errors.Is(err, payment.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("%v: want ErrUnavailable wrapping context.Canceled", err)
		}
	})
}

// intentJSON is a payment intent as Stripe sends it.
func intentJSON(id, status string, extra map[string]any) map[string]any {
	pi := map[string]any{
		"id": id, "object": "payment_intent", "amount": 2500, "amount_received": 0,
		"currency": "jpy", "status": status, "created": 1700000000,
		"client_secret": id + "_secret_x", "livemode": false,
		"metadata": map[string]any{"order_id": "42", "sale_id": "3", "user_id": "u"},
	}
	for k, v := range extra {
		pi[k] = v
	}
	return pi
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestIntentStatusesMapOntoStates(t *testing.T) {
	declined := map[string]any{"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}}
	for _, tc := range []struct {
		status   string
		extra    map[string]any
		want     payment.State
		captured int64
	}{
		{"requires_payment_method", nil, payment.Pending, 0},
		{"requires_payment_method", declined, payment.Declined, 0},
		{"requires_confirmation", nil, payment.Pending, 0},
		{"requires_action", nil, payment.Pending, 0},
		{"processing", nil, payment.Pending, 0},
		{"requires_capture", map[string]any{"amount_capturable": 2500}, payment.Pending, 0},
		{"succeeded", map[string]any{"amount_received": 2500}, payment.Captured, 2500},
		{"canceled", nil, payment.Canceled, 0},
		{"a_status_from_the_future", nil, payment.Pending, 0},
	} {
		name := tc.status
		if tc.extra != nil {
			name += "+" + strings.Join(func() (ks []string) {
				for k := range tc.extra {
					ks = append(ks, k)
				}
				return
			}(), "+")
		}
		t.Run(name, func(t *testing.T) {
			p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, intentJSON("pi_s", tc.status, tc.extra))
			})
			pay, err := p.Get(context.Background(), "pi_s")
			if err != nil {
				t.Fatal(err)
			}
			want := payment.Payment{
				Provider: "stripe", ID: "pi_s", OrderID: 42,
				Amount: payment.Money{Minor: 2500, Currency: "JPY"}, State: tc.want,
				ClientSecret: "pi_s_secret_x", Created: time.Unix(1700000000, 0).UTC(),
			}
			if tc.captured > 0 {
				want.Captured = payment.Money{Minor: tc.captured, Currency: "JPY"}
			}
			if pay != want {
				t.Fatalf("got  %+v\nwant %+v", pay, want)
			}
		})
	}
}

// The buyer paid as the window closed: Stripe refuses the cancel, and the
// answer is the capture, not an error. Likewise an intent cancelled
// already; one processing cannot be cancelled yet and is worth asking again.
func TestCancelAnswersTheIntentStripeWouldNotCancel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    string
		inError   bool // Stripe's error carries the intent; else the adapter reads it
		wantState payment.State
		wantErr   error
	}{
		{"succeeded, in the error", "succeeded", true, payment.Captured, nil},
		{"succeeded, read after", "succeeded", false, payment.Captured, nil},
		{"canceled already", "canceled", true, payment.Canceled, nil},
		{"processing", "processing", true, payment.Pending, ErrProcessing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := intentJSON("pi_c", tc.status, map[string]any{"amount_received": 2500})
			var reads atomic.Int64
			p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents/pi_c/cancel":
					extra := map[string]any{}
					if tc.inError {
						extra["payment_intent"] = pi
					}
					stripeError(w, 400, "invalid_request_error", "payment_intent_unexpected_state",
						"You cannot cancel this PaymentIntent because it has a status of "+tc.status+".", extra)
				case r.Method == http.MethodGet && r.URL.Path == "/v1/payment_intents/pi_c":
					reads.Add(1)
					writeJSON(w, pi)
				default:
					http.NotFound(w, r)
				}
			})
			pay, err := p.Cancel(context.Background(), "pi_c")
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && !payment.Retryable(err) {
				t.Errorf("%v: not retryable", err)
			}
			if pay.ID != "pi_c" || pay.State != tc.wantState {
				t.Fatalf("payment %+v, want state %s", pay, tc.wantState)
			}
			if tc.wantState == payment.Captured && pay.Captured != (payment.Money{Minor: 2500, Currency: "JPY"}) {
				t.Errorf("captured %v", pay.Captured)
			}
			if want := map[bool]int64{true: 0, false: 1}[tc.inError]; reads.Load() != want {
				t.Errorf("%d reads, want %d", reads.Load(), want)
			}
		})
	}
}

// Captured follows Stripe's pages and keeps the intents that succeeded.
func TestCapturedFollowsPagesAndKeepsSucceeded(t *testing.T) {
	var mu sync.Mutex
	var pages []string
	p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("starting_after")
		mu.Lock()
		pages = append(pages, after)
		mu.Unlock()
		page := map[string]any{"object": "list", "url": "/v1/payment_intents"}
		switch after {
		case "":
			page["has_more"] = true
			page["data"] = []any{
				intentJSON("pi_1", "succeeded", map[string]any{"amount_received": 2500}),
				intentJSON("pi_2", "canceled", nil),
			}
		case "pi_2":
			page["has_more"] = false
			page["data"] = []any{
				intentJSON("pi_3", "requires_payment_method", nil),
				intentJSON("pi_4", "succeeded", map[string]any{"amount_received": 2400}), // a wrong amount is still a capture
			}
		default:
			t.Errorf("starting_after=%q", after)
		}
		writeJSON(w, page)
	})
	got, err := p.Captured(context.Background(), time.Unix(1700000000, 0), time.Unix(1700086400, 0))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(pages) != "[ pi_2]" {
		t.Errorf("pages %q", pages)
	}
	if len(got) != 2 || got[0].ID != "pi_1" || got[1].ID != "pi_4" || got[1].Captured.Minor != 2400 || got[1].State != payment.Captured {
		t.Fatalf("captured %+v", got)
	}
}
