// Package domain holds the vocabulary every layer of seckill shares: order
// statuses, the order events pushed to buyers, and the typed business
// outcomes that the API maps to HTTP answers in one place.
package domain

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Status is an order's lifecycle state (SPEC §2).
type Status string

const (
	StatusPending         Status = "PENDING"          // admitted by Redis; the workflow has not written the order yet
	StatusAwaitingPayment Status = "AWAITING_PAYMENT" // stock deducted in the database, order row written
	StatusPaid            Status = "PAID"
	StatusCancelled       Status = "CANCELLED" // the buyer cancelled
	StatusExpired         Status = "EXPIRED"   // payment timed out
	StatusFailed          Status = "FAILED"    // the saga failed
)

// Final reports whether no further transition can happen.
func (s Status) Final() bool {
	switch s {
	case StatusPaid, StatusCancelled, StatusExpired, StatusFailed:
		return true
	}
	return false
}

// Live reports whether the order holds a unit of stock. Orders that ended
// without a sale gave their unit back.
func (s Status) Live() bool {
	switch s {
	case StatusPending, StatusAwaitingPayment, StatusPaid:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool { return s.Live() || s.Final() }

// LiveStatuses are the statuses that hold a unit of stock.
var LiveStatuses = []Status{StatusPending, StatusAwaitingPayment, StatusPaid}

// OrderRef identifies an admitted order and what it is for. Every saga step
// carries it, so each step can be retried, or compensated, on its own.
type OrderRef struct {
	OrderID     int64  `json:"order_id"`
	SaleID      int64  `json:"sale_id"`
	UserID      string `json:"user_id"`
	AmountCents int64  `json:"amount_cents"`
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
)

// AlreadyPurchasedError is returned when the buyer already holds a unit of
// the sale; OrderID is that order, so a retried request can find it.
type AlreadyPurchasedError struct {
	OrderID int64
}

func (e *AlreadyPurchasedError) Error() string {
	return fmt.Sprintf("already purchased: order %d", e.OrderID)
}
