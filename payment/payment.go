// Package payment is the port between an order and a payment provider
// (docs/design.md §4.10): what seckill asks of any provider, in the terms
// providers offer. The order's workflow owns the sequence (create a payment
// when the buyer pays, take the provider's word that it was captured, cancel
// it at the payment window's end, refund money that came too late or
// wrong); an adapter per provider maps these calls onto its API and its
// notifications onto Event.
//
// Adapters: payment/builtin, the payment service inside the binary that
// `seckill dev`, the tests, the demo page and the bench pay through; and
// payment/stripe, Stripe's PaymentIntents.
package payment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Money is an amount in its currency's minor units (cents, fen; the
// currency's exponent is the provider's business, as ISO 4217 gives it) and
// the currency's ISO 4217 code, upper case.
type Money struct {
	Minor    int64  `json:"minor"`
	Currency string `json:"currency"`
}

func (m Money) String() string { return fmt.Sprintf("%d %s (minor units)", m.Minor, m.Currency) }

// State is where a payment stands at its provider.
type State string

const (
	// Pending: created; the buyer has not paid, or the provider has not
	// decided. It may still be captured, declined or cancelled.
	Pending State = "pending"
	// Captured: the money was taken. Final at the provider until a refund.
	Captured State = "captured"
	// Declined: this payment failed (a card refused); no money moved. The
	// buyer may pay again, with a new payment.
	Declined State = "declined"
	// Canceled: cancelled before capture; no money will move.
	Canceled State = "canceled"
	// Refunded: captured, then given back whole.
	Refunded State = "refunded"
)

// Final reports whether the payment can no longer change but by a refund.
func (s State) Final() bool { return s != Pending }

// CreateRequest asks for a payment of one order.
type CreateRequest struct {
	OrderID int64
	SaleID  int64
	UserID  string
	Amount  Money
	// Key makes the create idempotent at the provider: the same key
	// answers the same payment. One per payment attempt of an order (a
	// declined payment's retry is a new attempt, with a new key).
	Key string
	// ReturnURL is where a hosted payment page sends the buyer back.
	ReturnURL string
	// ExpiresAt is the payment window's end. A provider that can expire a
	// payment by itself may be told; the workflow cancels it at that time
	// in any case.
	ExpiresAt time.Time
}

// Payment is a provider's record of one payment.
type Payment struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`       // the provider's id
	OrderID  int64  `json:"order_id"` // from what the create attached to it
	Amount   Money  `json:"amount"`   // what was asked
	// Captured is what was taken: zero unless State is Captured or
	// Refunded. The workflow compares it with the order's amount.
	Captured Money `json:"captured"`
	State    State `json:"state"`
	// What the buyer's client needs to pay, one of the two: a hosted
	// page's URL to send the buyer to, or a client secret for the
	// provider's own client library.
	RedirectURL  string `json:"redirect_url,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// SealedAction is the two above sealed (seal.go), in their place: the
	// payment as the StartPayment activity answers it into the order's
	// history. Only the api opens it.
	SealedAction string    `json:"sealed_action,omitempty"`
	Created      time.Time `json:"created"`
}

// RefundState is where a refund stands at its provider.
type RefundState string

const (
	RefundPending   RefundState = "pending"
	RefundSucceeded RefundState = "succeeded"
	RefundFailed    RefundState = "failed"
)

// Refund is the refund of a captured payment, whole.
type Refund struct {
	Provider  string      `json:"provider"`
	ID        string      `json:"id"`
	PaymentID string      `json:"payment_id"`
	Amount    Money       `json:"amount"`
	State     RefundState `json:"state"`
}

// Event is a verified notification: what the provider says happened to a
// payment. Notifications arrive late, twice and out of order: ID repeats
// with a repeat, and At orders them.
type Event struct {
	ID      string    `json:"id"`
	At      time.Time `json:"at"`
	Payment Payment   `json:"payment"` // the payment as of the event
	// Refund is set for a refund's event.
	Refund *Refund `json:"refund,omitempty"`
}

// Provider is a payment provider, as an adapter presents it. Every method
// that calls the provider may return a *RateLimitedError or an error
// wrapping ErrUnavailable (both worth retrying later) or ErrRejected (a
// refusal that a retry does not change).
type Provider interface {
	// Name is the provider's name in URLs, metrics and the order's record
	// ("builtin", "stripe").
	Name() string
	// Create creates a payment, idempotent by req.Key.
	Create(ctx context.Context, req CreateRequest) (Payment, error)
	// Get reads a payment.
	Get(ctx context.Context, id string) (Payment, error)
	// Cancel cancels a payment that was not captured. One already captured
	// (the buyer paid as the window closed) is no error: the Payment
	// returned says Captured, and the caller decides. Cancelling one
	// already cancelled or declined answers it as it is.
	Cancel(ctx context.Context, id string) (Payment, error)
	// Refund gives a captured payment's money back, whole, idempotent by
	// key: the same key answers the same refund.
	Refund(ctx context.Context, paymentID, key, reason string) (Refund, error)
	// Captured lists the payments captured in [from, to), for the
	// reconciliation of a provider's records against the orders.
	Captured(ctx context.Context, from, to time.Time) ([]Payment, error)
	// Verify checks a notification's signature, before anything else, and
	// its age against now, then parses it: ErrBadSignature, ErrStale, or
	// ErrIgnored for a kind of event seckill does not act on.
	Verify(header http.Header, body []byte, now time.Time) (Event, error)
	// Sealer seals the client action of this provider's payments into
	// the order's history and opens it for the buyer (seal.go), with a
	// key derived from the adapter's secret key.
	Sealer() *Sealer
}

// Errors an adapter returns, wrapped with what it knows.
var (
	// ErrUnavailable: the provider could not be reached or failed (5xx, a
	// timeout). Worth retrying.
	ErrUnavailable = errors.New("payment provider unavailable")
	// ErrRejected: the provider refused the request (4xx other than a
	// rate limit); retrying it does not help.
	ErrRejected = errors.New("payment provider rejected the request")
	// ErrNotFound: no such payment at the provider.
	ErrNotFound = errors.New("no such payment")
	// ErrBadSignature: a notification whose signature does not verify.
	ErrBadSignature = errors.New("payment notification signature does not verify")
	// ErrStale: a notification signed too long ago (a replay).
	ErrStale = errors.New("payment notification too old")
	// ErrIgnored: a verified notification of a kind seckill does not act on.
	ErrIgnored = errors.New("payment notification of a kind not acted on")
	// ErrNotReadable: a verified notification this deployment cannot read
	// safely as configured (Stripe: an event of another API release
	// train). The endpoint answers 5xx, so the provider sends it again
	// while the operator fixes the configuration: acting on a misreading
	// could move money wrongly, and a 2xx would lose it.
	ErrNotReadable = errors.New("payment notification this deployment cannot read as configured")
)

// RateLimitedError is the provider's 429: try again after RetryAfter (zero
// when the provider did not say).
type RateLimitedError struct {
	Provider   string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s: rate limited, retry after %s", e.Provider, e.RetryAfter)
	}
	return e.Provider + ": rate limited"
}

// Retryable reports whether err is worth retrying later: a rate limit or
// the provider unavailable.
func Retryable(err error) bool {
	return errors.As(err, new(*RateLimitedError)) || errors.Is(err, ErrUnavailable)
}

// ValidCurrency reports whether code has the shape of an ISO 4217 code:
// three upper-case letters. Whether a provider accepts it is the
// provider's answer.
func ValidCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	for _, c := range code {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
