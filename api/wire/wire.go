// Package wire holds request bodies whose decoding and validation stand on
// their own, so they can be fuzzed without the rest of the api (and its
// dependencies) in the build.
package wire

import (
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// CreateSaleBody is what an operator sends to create a sale.
type CreateSaleBody struct {
	Name       string    `json:"name" minLength:"1" maxLength:"200" doc:"Product name."`
	PriceCents int64     `json:"price_cents" minimum:"0" maximum:"100000000000" doc:"Price in cents."`
	Stock      int       `json:"stock" minimum:"1" maximum:"10000000" doc:"Units to sell."`
	StartsAt   time.Time `json:"starts_at" doc:"When buying opens (RFC 3339)."`
	EndsAt     time.Time `json:"ends_at" doc:"When buying closes (RFC 3339); after starts_at."`
	// PaymentTimeoutSeconds is optional: 0 (absent) takes the server's
	// --payment-timeout.
	PaymentTimeoutSeconds int `json:"payment_timeout_seconds,omitempty" minimum:"10" maximum:"86400" doc:"How long a buyer has to pay, in seconds (default: the server's --payment-timeout)."`
}

// Resolve checks what the schema cannot: the window's order.
func (b *CreateSaleBody) Resolve(huma.Context) []error {
	if !b.EndsAt.After(b.StartsAt) {
		return []error{&huma.ErrorDetail{Location: "body.ends_at", Message: "must be after starts_at", Value: b.EndsAt}}
	}
	if b.EndsAt.Sub(b.StartsAt) > 366*24*time.Hour {
		return []error{&huma.ErrorDetail{Location: "body.ends_at", Message: "a sale lasts at most a year", Value: b.EndsAt}}
	}
	return nil
}
