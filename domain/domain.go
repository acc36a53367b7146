// Package domain holds the vocabulary every layer of seckill shares: order
// statuses, the order events pushed to buyers, and the typed business
// outcomes that the API maps to HTTP answers in one place.
package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Status is an order's lifecycle state (docs/design.md §1.2).
type Status string

const (
	StatusPending         Status = "PENDING"          // admitted by Redis; the workflow has not written the order yet
	StatusAwaitingPayment Status = "AWAITING_PAYMENT" // stock deducted in the database, order row written
	StatusPaid            Status = "PAID"
	StatusCancelled       Status = "CANCELLED" // the buyer cancelled
	StatusExpired         Status = "EXPIRED"   // payment timed out
	StatusFailed          Status = "FAILED"    // the saga failed
	// StatusRefunded: an operator refunded the paid order and its unit
	// stays out of the sale (not asked to restock, or the sale had closed):
	// the unit is still the order's, as a PAID order's is.
	StatusRefunded Status = "REFUNDED"
	// StatusRefundedRestocked: an operator refunded the paid order and its
	// unit went back on sale, to the database and to Redis, its buyer freed.
	StatusRefundedRestocked Status = "REFUNDED_RESTOCKED"
)

// Final reports whether no further transition can happen.
func (s Status) Final() bool {
	switch s {
	case StatusPaid, StatusCancelled, StatusExpired, StatusFailed, StatusRefunded, StatusRefundedRestocked:
		return true
	}
	return false
}

// Live reports whether the order holds a unit of stock. Orders that ended
// without a sale gave their unit back, and so did a refunded order whose
// unit was restocked; a refunded order not restocked keeps it.
func (s Status) Live() bool {
	switch s {
	case StatusPending, StatusAwaitingPayment, StatusPaid, StatusRefunded:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool { return s.Live() || s.Final() }

// LiveStatuses are the statuses that hold a unit of stock.
var LiveStatuses = []Status{StatusPending, StatusAwaitingPayment, StatusPaid, StatusRefunded}

// Refunded reports whether an operator refunded the order (restocked or
// not).
func (s Status) Refunded() bool { return s == StatusRefunded || s == StatusRefundedRestocked }

// OrderRef identifies an admitted order and what it is for. Every saga step
// carries it, so each step can be retried, or compensated, on its own.
//
// On the wire (workflow inputs, activity inputs) its ids are JSON strings:
// the Temporal Web UI is JavaScript, where a 64-bit number is rounded. Ids
// written as numbers by earlier versions still decode (see jsonID).
type OrderRef struct {
	OrderID     int64  `json:"order_id"`
	SaleID      int64  `json:"sale_id"`
	UserID      string `json:"user_id"`
	AmountCents int64  `json:"amount_cents"`
	// IdempotencyKey is the Idempotency-Key of the purchase that won the
	// unit, "" if it had none: kept with the order's row so that a sale
	// rebuilt from the database still answers its retry with the 202.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// AdmittedAt is when the admitting api admitted the order, on its own
	// clock, to the millisecond: the order's admitted_at. Zero for orders
	// admitted before it was carried; their rows take the id's time.
	AdmittedAt time.Time `json:"admitted_at,omitzero"`
}

// orderRefJSON is OrderRef's wire shape.
type orderRefJSON struct {
	OrderID        jsonID    `json:"order_id"`
	SaleID         jsonID    `json:"sale_id"`
	UserID         string    `json:"user_id"`
	AmountCents    int64     `json:"amount_cents"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	AdmittedAt     time.Time `json:"admitted_at,omitzero"`
}

// MarshalJSON writes the ids as strings.
func (r OrderRef) MarshalJSON() ([]byte, error) {
	return json.Marshal(orderRefJSON{jsonID(r.OrderID), jsonID(r.SaleID), r.UserID, r.AmountCents, r.IdempotencyKey, r.AdmittedAt})
}

// UnmarshalJSON reads ids written as strings or, by earlier versions, as
// numbers.
func (r *OrderRef) UnmarshalJSON(b []byte) error {
	var w orderRefJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = OrderRef{OrderID: int64(w.OrderID), SaleID: int64(w.SaleID), UserID: w.UserID, AmountCents: w.AmountCents, IdempotencyKey: w.IdempotencyKey,
		AdmittedAt: w.AdmittedAt}
	return nil
}

// jsonID is a 64-bit id written as a JSON string and read from a string or
// a number.
type jsonID int64

func (id jsonID) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(id), 10) + `"`), nil
}

func (id *jsonID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("id %s: %w", b, err)
	}
	*id = jsonID(v)
	return nil
}

// WorkflowID is the Temporal workflow id of an order. Starting it with
// REJECT_DUPLICATE makes the start idempotent per order.
func WorkflowID(orderID int64) string { return "order-" + strconv.FormatInt(orderID, 10) }

// Event is what a buyer is told about one of their orders.
type Event struct {
	Type    string    `json:"type"` // always "order"
	OrderID string    `json:"order_id"`
	SaleID  string    `json:"sale_id"`
	UserID  string    `json:"-"`
	Status  Status    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// QueuePosition and ETASeconds are a PENDING order's Place, when it
	// is known; 0 (omitted) otherwise.
	QueuePosition int64 `json:"queue_position,omitempty"`
	ETASeconds    int64 `json:"eta_seconds,omitempty"`
	// RefundedPayment is set on the event that tells the buyer a payment
	// of theirs was given back (one that came after the order ended, a
	// second one, a wrong amount): its id at the provider. Status is the
	// order's own.
	RefundedPayment string `json:"refunded_payment,omitempty"`
}

// Place is where a PENDING order stands in its sale's line: the admitted
// orders of the sale whose workflow has not started (docs/design.md §3.11).
type Place struct {
	// Position is 1 for the next order to start, and counts the order
	// itself.
	Position int64
	// ETASeconds estimates the wait from the line's recent departure
	// rate, rounded up; 0 when there is no rate to go by.
	ETASeconds int64
}

// NewEvent builds the event for an order reaching status.
func NewEvent(orderID, saleID int64, userID string, status Status, reason string, at time.Time) Event {
	return Event{
		Type:    "order",
		OrderID: strconv.FormatInt(orderID, 10),
		SaleID:  strconv.FormatInt(saleID, 10),
		UserID:  userID,
		Status:  status,
		Reason:  reason,
		At:      at.UTC(),
	}
}

// Business outcomes. The API turns each into one HTTP status and code.
var (
	ErrSoldOut     = errors.New("sold out")
	ErrNotStarted  = errors.New("sale has not started")
	ErrEnded       = errors.New("sale has ended")
	ErrUnknownSale = errors.New("unknown sale")
	ErrNotFound    = errors.New("not found")
	// ErrOutOfStock means the database had no unit left for an order Redis
	// admitted: Redis and Postgres drifted. The saga compensates.
	ErrOutOfStock = errors.New("out of stock in database")
	// ErrInvalidOrder means an order cannot be written as asked (unknown
	// sale, a second live order for the buyer, ...). Retrying cannot help.
	ErrInvalidOrder = errors.New("invalid order")
	// ErrConflict means the order is not in a state that allows the request
	// (paying a cancelled order, say).
	ErrConflict = errors.New("order state does not allow this")
	// ErrUnavailable means a dependency needed to answer is down; nothing
	// was changed.
	ErrUnavailable = errors.New("service unavailable")
	// ErrCompensated means a forward step arrived after its order had been
	// compensated (a deduction whose restore already ran): it must not land.
	ErrCompensated = errors.New("order already compensated")
	// ErrSaleCancelled means an operator cancelled the order's sale before
	// the order's stock was deducted: the order ends without a sale.
	ErrSaleCancelled = errors.New("sale cancelled")

	// ErrAdmittedAfterEnd means an order reached the database after its
	// sale had ended, admitted by a Redis that had not learnt of the end
	// yet; it takes no unit.
	ErrAdmittedAfterEnd = errors.New("admitted after the sale ended")
)

// RateLimitedError refuses a request beyond a rate limit; RetryAfter is
// how long until it would be allowed.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many requests; retry after %s", e.RetryAfter)
}

// AlreadyPurchasedError is returned when the buyer already holds a unit of
// the sale; OrderID is that order, so a retried request can find it.
type AlreadyPurchasedError struct {
	OrderID int64
}

func (e *AlreadyPurchasedError) Error() string {
	return fmt.Sprintf("already purchased: order %d", e.OrderID)
}

// StateError is a request the order's status does not allow (paying a
// cancelled order, cancelling a paid one). Status is the order's actual
// status, or the one it is already committed to reach, so the caller learns
// what happened instead. It is an ErrConflict.
type StateError struct {
	Status Status
	// Detail says, in words a buyer may read, why the request was refused.
	Detail string
}

func (e *StateError) Error() string { return e.Detail }

// Is makes errors.Is(err, ErrConflict) hold for a StateError.
func (e *StateError) Is(target error) bool { return target == ErrConflict }
