package stripe

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/seckill/seckill/payment"
)

// APIError is Stripe's answer to a failed request, as the adapter keeps
// it: the library's *stripe.Error prints itself as JSON including any
// payment intent it carries, client secret and all, so it is not wrapped.
// It wraps the port's error for its kind (payment.ErrUnavailable,
// payment.ErrRejected, or payment.ErrNotFound with payment.ErrRejected).
type APIError struct {
	Op        string // what the adapter was doing
	Status    int    // HTTP status
	Type      string // Stripe's error type: invalid_request_error, api_error, …
	Code      string // Stripe's error code, when it gave one: resource_missing, …
	Message   string // Stripe's message, with the secret key blotted out
	RequestID string // Stripe's request id, for its support
	kinds     []error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stripe: %s: %v: HTTP %d %s", e.Op, e.kinds[0], e.Status, e.Type)
	if e.Code != "" {
		b.WriteString("/" + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

func (e *APIError) Unwrap() []error { return e.kinds }

// fail maps an error from the library onto the port's:
//
//	HTTP 429                                 *payment.RateLimitedError (Retry-After when Stripe sends one)
//	HTTP 5xx                                 payment.ErrUnavailable
//	HTTP 409 idempotency_key_in_use          payment.ErrUnavailable (the same key's first request is still running)
//	HTTP 404, or code resource_missing       payment.ErrNotFound and payment.ErrRejected
//	other HTTP 4xx                           payment.ErrRejected
//	no answer (network, timeout, a body that
//	is not Stripe's JSON, a cancelled context) payment.ErrUnavailable, wrapping the cause
func (p *Provider) fail(op string, err error) error {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("stripe: %s: %w: %w", op, payment.ErrUnavailable, err)
	}
	if se.HTTPStatusCode == http.StatusTooManyRequests {
		return &payment.RateLimitedError{Provider: Name, RetryAfter: retryAfter(se, time.Now())}
	}
	e := &APIError{
		Op:        op,
		Status:    se.HTTPStatusCode,
		Type:      string(se.Type),
		Code:      string(se.Code),
		Message:   p.scrub(se.Msg),
		RequestID: se.RequestID,
	}
	switch {
	case se.HTTPStatusCode >= 500 || se.HTTPStatusCode < 400:
		e.kinds = []error{payment.ErrUnavailable}
	case se.HTTPStatusCode == http.StatusConflict && se.Code == stripego.ErrorCodeIdempotencyKeyInUse:
		e.kinds = []error{payment.ErrUnavailable}
	case se.HTTPStatusCode == http.StatusNotFound || se.Code == stripego.ErrorCodeResourceMissing:
		// Stripe answers an unknown object in a parameter (a refund's
		// payment_intent) with 400 resource_missing, and in the path with 404.
		e.kinds = []error{payment.ErrNotFound, payment.ErrRejected}
	default:
		e.kinds = []error{payment.ErrRejected}
	}
	return e
}

// scrub blots the secret key out of a message. Stripe's messages mask keys
// themselves ("sk_test_****1234"); this is for the day one does not.
func (p *Provider) scrub(msg string) string {
	if p.secretKey == "" {
		return msg
	}
	return strings.ReplaceAll(msg, p.secretKey, "(redacted)")
}

// retryAfter reads a 429's Retry-After header (seconds, or an HTTP date),
// which the library keeps on the error's last response; zero when absent.
// Stripe does not promise one: the workflow's backoff applies then.
func retryAfter(se *stripego.Error, now time.Time) time.Duration {
	if se.LastResponse == nil {
		return 0
	}
	v := strings.TrimSpace(se.LastResponse.Header.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
