// Package wire is the api's wire format: the bodies it reads and writes,
// and the problem codes clients branch on. The api's handlers and the Go
// client (package client) share these types, so the two cannot drift; the
// package stands on its own (no database, no Temporal) so its decoding can
// be fuzzed without the rest of the api in the build.
package wire

import (
	"regexp"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/domain"
)

// CreateSaleBody is what an operator sends to create a sale.
type CreateSaleBody struct {
	Name       string    `json:"name" minLength:"1" maxLength:"200" doc:"Product name."`
	PriceCents int64     `json:"price_cents" minimum:"0" maximum:"100000000000" doc:"Price in the currency's minor units (cents; a currency without them, such as JPY, in whole units)."`
	Currency   string    `json:"currency,omitempty" pattern:"^[A-Z]{3}$" example:"EUR" doc:"The price's ISO 4217 currency code; absent: the deployment's default currency."`
	Stock      int       `json:"stock" minimum:"1" maximum:"10000000" doc:"Units to sell."`
	StartsAt   time.Time `json:"starts_at" doc:"When buying opens (RFC 3339)."`
	EndsAt     time.Time `json:"ends_at" doc:"When buying closes (RFC 3339); after starts_at."`
	// PaymentTimeoutSeconds is optional: 0 (absent) takes the server's
	// --payment-timeout.
	PaymentTimeoutSeconds int `json:"payment_timeout_seconds,omitempty" minimum:"10" maximum:"86400" doc:"How long a buyer has to pay, in seconds; absent: the deployment's default."`
}

// Resolve checks what the schema cannot: that the currency is one ISO
// 4217 lists, and the window's order. A currency of the wrong shape, or a
// time that is zero (the body or the field did not parse), has an error of
// its own already: checking it again would add a second, phantom error.
func (b *CreateSaleBody) Resolve(huma.Context) []error {
	if currencyShape.MatchString(b.Currency) {
		if _, err := domain.ParseCurrency(b.Currency); err != nil {
			return []error{&huma.ErrorDetail{Location: "body.currency", Message: "not an ISO 4217 currency code", Value: b.Currency}}
		}
	}
	if b.StartsAt.IsZero() || b.EndsAt.IsZero() {
		return nil
	}
	if !b.EndsAt.After(b.StartsAt) {
		return []error{&huma.ErrorDetail{Location: "body.ends_at", Message: "must be after starts_at", Value: b.EndsAt}}
	}
	if b.EndsAt.Sub(b.StartsAt) > 366*24*time.Hour {
		return []error{&huma.ErrorDetail{Location: "body.ends_at", Message: "a sale lasts at most a year", Value: b.EndsAt}}
	}
	return nil
}

// currencyShape is the schema's pattern of a currency code.
var currencyShape = regexp.MustCompile(`^[A-Z]{3}$`)

// AddUnitsBody is what an operator sends to add units to a sale.
type AddUnitsBody struct {
	Units int `json:"units" minimum:"1" maximum:"1000000" doc:"Units to add to the sale's stock, at most a million at once."`
}

// RefundBody is what an operator sends to refund a paid order.
type RefundBody struct {
	Reason  string `json:"reason" minLength:"1" maxLength:"500" pattern:"\\S" example:"the parcel was lost in transit" doc:"Why the order is refunded: recorded as the order's refund_reason and shown to the buyer."`
	Restock bool   `json:"restock,omitempty" default:"false" doc:"Put the unit back on sale: done only while the sale is open (not ended, not cancelled), once; the order then becomes REFUNDED_RESTOCKED and its buyer may buy again. Otherwise, or on a closed sale (which is no error), the order becomes REFUNDED and its reason says why the unit stayed out."`
}

// Sale is a sale on the wire.
type Sale struct {
	ID         string    `json:"id" pattern:"^[0-9]+$" example:"7262577180163178496" doc:"The sale's id: digits, a 64-bit integer too large for JavaScript's numbers."`
	Name       string    `json:"name"`
	PriceCents int64     `json:"price_cents" doc:"Price in the currency's minor units."`
	Currency   string    `json:"currency" pattern:"^[A-Z]{3}$" example:"EUR" doc:"The price's ISO 4217 currency code."`
	Stock      int       `json:"stock" doc:"Units put on sale."`
	Remaining  int       `json:"remaining" doc:"Units still available (live, from Redis)."`
	State      string    `json:"state" enum:"upcoming,active,sold_out,ended,cancelled" doc:"cancelled: an operator cancelled the sale (it has ended, and its unpaid orders are cancelled)."`
	StartsAt   time.Time `json:"starts_at"`
	EndsAt     time.Time `json:"ends_at"`
	// CancelledAt is set once an operator cancelled the sale.
	CancelledAt           *time.Time `json:"cancelled_at,omitempty" doc:"When an operator cancelled the sale."`
	PaymentTimeoutSeconds int        `json:"payment_timeout_seconds" doc:"How long a buyer of this sale has to pay, in seconds (the sale's own, or the server's default)."`
}

// SaleStats is the operator's view of a sale.
type SaleStats struct {
	SaleID         string         `json:"sale_id" pattern:"^[0-9]+$" example:"7262577180163178496"`
	Stock          int            `json:"stock" doc:"Units put on sale."`
	DBStock        int            `json:"db_stock" doc:"Units left in the database (the source of truth)."`
	RedisRemaining int            `json:"redis_remaining" doc:"Units Redis may still admit."`
	RedisBuyers    int64          `json:"redis_buyers" doc:"Buyers holding a unit in Redis."`
	RelayBacklog   int64          `json:"relay_backlog" doc:"Admitted orders whose workflow has not started yet."`
	Pending        int64          `json:"pending" doc:"Admitted orders not written to the database yet."`
	Orders         map[string]int `json:"orders" doc:"Orders written to the database, by status (PENDING, AWAITING_PAYMENT, ...)."`
	OpenOrders     int64          `json:"open_orders" doc:"Orders neither final nor paid: PENDING and AWAITING_PAYMENT ones, written or not yet."`
	Cancelling     bool           `json:"cancelling" doc:"The sale was cancelled and its open orders are still being cancelled."`
}

// Order is an order on the wire.
type Order struct {
	ID          string        `json:"id" pattern:"^[0-9]+$" example:"7262577203974242304" doc:"The order's id: digits, a 64-bit integer too large for JavaScript's numbers."`
	SaleID      string        `json:"sale_id" pattern:"^[0-9]+$" example:"7262577180163178496"`
	UserID      string        `json:"user_id" doc:"The buyer (the token's subject)."`
	Status      domain.Status `json:"status" enum:"PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED,REFUNDED,REFUNDED_RESTOCKED"`
	Reason      string        `json:"reason" doc:"Why the order ended as it did (FAILED, CANCELLED, EXPIRED), or what became of a refunded order's unit (REFUNDED, REFUNDED_RESTOCKED); empty otherwise."`
	AmountCents int64         `json:"amount_cents" doc:"The price the buyer was admitted at, in the currency's minor units."`
	Currency    string        `json:"currency" pattern:"^[A-Z]{3}$" example:"EUR" doc:"The amount's ISO 4217 currency code: the sale's."`
	WorkflowID  string        `json:"workflow_id" doc:"The id of the order's Temporal workflow, for the Temporal Web UI."`
	// WorkflowURL is set when the deployment names its Web UI.
	WorkflowURL string    `json:"workflow_url,omitempty" format:"uri" doc:"The order's workflow in the Temporal Web UI; absent when the deployment has no Web UI configured."`
	AdmittedAt  time.Time `json:"admitted_at" doc:"When the buyer was admitted (the purchase's 202), on the admitting api's clock, to the millisecond. Not the time the order's id encodes, which may run seconds ahead. For orders admitted before the api recorded it: the time the order's id encodes (never later than the time of the read for an order not written yet)."`
	CreatedAt   time.Time `json:"created_at" doc:"When the order was written to the database (for an order not written yet: when it was admitted)."`
	UpdatedAt   time.Time `json:"updated_at"`
	// PaidAt is set once the order is PAID.
	PaidAt *time.Time `json:"paid_at,omitempty" doc:"When the payment was recorded: PAID orders only (absent for orders paid before this field existed)."`
	// QueuePosition and ETASeconds are set only for a PENDING order still
	// waiting for its workflow to start.
	QueuePosition *int64 `json:"queue_position,omitempty" minimum:"1" doc:"PENDING orders only: the order's place in the sale's line, counting itself: admitted orders of the sale whose workflow has not started, admitted no later than this one. Absent once the workflow has started (the order may stay PENDING a moment longer), or when Redis cannot tell."`
	ETASeconds    *int64 `json:"eta_seconds,omitempty" minimum:"1" doc:"With queue_position: an estimate of the seconds until the order's workflow starts, from the rate at which the sale's line moved over the last half minute. Absent when the line has not moved lately."`
	// PaymentProvider and PaymentID are set once the order's row names a
	// payment at a provider.
	PaymentProvider string `json:"payment_provider,omitempty" example:"builtin" doc:"The payment provider that took the order's payment (or the refunded one); absent for orders paid without a provider."`
	PaymentID       string `json:"payment_id,omitempty" doc:"The provider's id of that payment."`
	// RefundedAt and RefundReason are set once a capture the order did
	// not keep was refunded, or an operator refunded the order.
	RefundedAt   *time.Time `json:"refunded_at,omitempty" doc:"When an operator refunded the order (REFUNDED, REFUNDED_RESTOCKED), or when a payment the order did not keep (captured after the order ended, a second capture, a wrong amount) was refunded; absent otherwise."`
	RefundReason string     `json:"refund_reason,omitempty" doc:"Why that payment was refunded: for an operator's refund, the operator's reason."`
	// Payment is set only in the answer to a pay of an order that pays at
	// a provider.
	Payment *PaymentAction `json:"payment,omitempty" doc:"In the answer to a pay (202) when the deployment takes payments at a provider: the payment the buyer completes there. The order stays AWAITING_PAYMENT until the provider reports the capture."`
}

// PaymentAction is what a buyer's client needs to complete a payment at
// the provider: a hosted page to send the buyer to, or a client secret for
// the provider's own client library.
type PaymentAction struct {
	Provider     string `json:"provider" example:"builtin" doc:"The payment provider: builtin or stripe."`
	ID           string `json:"id" doc:"The provider's id of the payment."`
	RedirectURL  string `json:"redirect_url,omitempty" format:"uri" doc:"The provider's hosted page to send the buyer to (builtin); it sends the buyer back to the shop when done."`
	ClientSecret string `json:"client_secret,omitempty" doc:"The secret the provider's client library completes the payment with (Stripe.js)."`
}

// PaymentNotified is the answer to a provider's notification.
type PaymentNotified struct {
	Received bool `json:"received" doc:"Always true: the notification was verified and taken."`
}

// Purchase is the answer to a purchase: the buyer's order, PENDING until
// its workflow has written it.
type Purchase struct {
	OrderID    string        `json:"order_id" pattern:"^[0-9]+$" example:"7262577203974242304" doc:"The order's id, to pass on as is to GET /v1/orders/{id}."`
	Status     domain.Status `json:"status" enum:"PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED,REFUNDED,REFUNDED_RESTOCKED" doc:"PENDING: the order's workflow has yet to confirm it."`
	WorkflowID string        `json:"workflow_id"`
}

// Problem is an RFC 9457 problem+json body with a stable machine-readable
// code, the field clients branch on.
type Problem struct {
	huma.ErrorModel
	Code    string `json:"code" enum:"BAD_REQUEST,VALIDATION_FAILED,UNAUTHORIZED,FORBIDDEN,NOT_FOUND,SOLD_OUT,NOT_STARTED,ENDED,ALREADY_PURCHASED,INVALID_STATE,BODY_TOO_LARGE,RATE_LIMITED,UNAVAILABLE,UNCONFIRMED,INTERNAL" doc:"Stable machine-readable error code, the value to branch on." example:"SOLD_OUT"`
	OrderID string `json:"order_id,omitempty" pattern:"^[0-9]+$" example:"7262577203974242304" doc:"With ALREADY_PURCHASED: the buyer's existing order. With UNCONFIRMED: the order the buyer has if the purchase was taken."`
	// OrderStatus is named so because `status` is the HTTP status (RFC 9457).
	OrderStatus domain.Status `json:"order_status,omitempty" doc:"With INVALID_STATE: the order's actual status (for a pay that lost to the timer, EXPIRED)." enum:"PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED,REFUNDED,REFUNDED_RESTOCKED"`
}

// Problem codes: the enum of Problem.Code (a test keeps the two equal).
const (
	CodeBadRequest       = "BAD_REQUEST"
	CodeValidation       = "VALIDATION_FAILED"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeForbidden        = "FORBIDDEN"
	CodeNotFound         = "NOT_FOUND"
	CodeSoldOut          = "SOLD_OUT"
	CodeNotStarted       = "NOT_STARTED"
	CodeEnded            = "ENDED"
	CodeAlreadyPurchased = "ALREADY_PURCHASED"
	CodeInvalidState     = "INVALID_STATE"
	CodeTooLarge         = "BODY_TOO_LARGE"
	CodeRateLimited      = "RATE_LIMITED"
	CodeUnavailable      = "UNAVAILABLE"
	// CodeUnconfirmed: the purchase may or may not have been taken (Redis
	// did not answer, or no replica confirmed it in time); retry with the
	// same Idempotency-Key to learn which. Never "nothing changed".
	CodeUnconfirmed = "UNCONFIRMED"
	CodeInternal    = "INTERNAL"
)

// Codes are all the problem codes.
var Codes = []string{
	CodeBadRequest, CodeValidation, CodeUnauthorized, CodeForbidden, CodeNotFound, CodeSoldOut, CodeNotStarted,
	CodeEnded, CodeAlreadyPurchased, CodeInvalidState, CodeTooLarge, CodeRateLimited, CodeUnavailable, CodeUnconfirmed, CodeInternal,
}

// EngineProbeBody asks for an engine probe (admin).
type EngineProbeBody struct {
	Workflows int `json:"workflows" minimum:"1" maximum:"20000" default:"1000" doc:"How many no-op workflows to run."`
	// Keep is for benchmarks: the server's work of deleting the workflows
	// lands 10 to 40 s after the deletion, in whatever is measured next.
	Keep bool `json:"keep,omitempty" doc:"Leave the probe's workflows in place instead of deleting them once it has measured: a benchmark that measures more after the probe deletes them when it is done, with DELETE /v1/admin/engine-probe."`
}

// ProbeCleanup is what deleting the probe workflows did.
type ProbeCleanup struct {
	Deleted       int     `json:"deleted" doc:"Probe workflows deleted. The Temporal server takes them off its lists within about a minute."`
	Undeleted     int     `json:"undeleted" doc:"Probe workflows whose deletion failed (Temporal busy or unreachable); they stay listed."`
	DeleteSeconds float64 `json:"delete_seconds" doc:"How long the deletion requests took."`
}

// EngineProbe is what an engine probe measured: the Temporal engine's own
// rate with the order worker, in the shape the orders take.
type EngineProbe struct {
	Workflows       int      `json:"workflows" doc:"No-op workflows run."`
	Seconds         float64  `json:"seconds" doc:"From the first workflow's start to the last one's close, as the Temporal server recorded them."`
	WorkflowsPerSec float64  `json:"workflows_per_second" doc:"workflows / seconds: the engine's ceiling for the orders of this deployment."`
	StartsSeconds   float64  `json:"starts_seconds" doc:"From the first workflow's start to the last one's, as the server recorded them."`
	Relays          []string `json:"relays" doc:"The relays that started them (their consumer names: host, process id, start time)."`
	Deleted         int      `json:"deleted" doc:"Probe workflows deleted once the probe had measured, outside its window: this probe's, and an earlier probe's found left over (its api died before deleting them). The Temporal server takes them off its lists within about a minute."`
	Undeleted       int      `json:"undeleted" doc:"Probe workflows whose deletion failed (Temporal busy or unreachable): they stay listed until a later probe deletes them, or the namespace's retention ends them. The measurement stands."`
	DeleteSeconds   float64  `json:"delete_seconds" doc:"How long the deletion requests took, after the measured window."`
}
