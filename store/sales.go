package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
)

// NewSale is what an operator gives to create a sale.
type NewSale struct {
	Name string
	// PriceCents is in Currency's minor units.
	PriceCents int64
	// Currency is an ISO 4217 code; "" is domain.DefaultCurrency.
	Currency string
	Stock    int
	StartsAt time.Time
	EndsAt   time.Time
	// PaymentTimeout is the sale's own payment timeout, whole seconds;
	// 0: the server's.
	PaymentTimeout time.Duration
}

// CreateSale writes a sale with its full stock.
func (s *Store) CreateSale(ctx context.Context, n NewSale) (*ent.Sale, error) {
	if !n.EndsAt.After(n.StartsAt) {
		return nil, fmt.Errorf("%w: ends_at must be after starts_at", domain.ErrInvalidOrder)
	}
	currency, err := domain.ParseCurrency(cmp.Or(n.Currency, domain.DefaultCurrency))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", domain.ErrInvalidOrder, err)
	}
	c := s.db.Sale.Create().
		SetName(n.Name).
		SetPriceCents(n.PriceCents).
		SetCurrency(currency).
		SetTotalStock(n.Stock).
		SetStock(n.Stock).
		SetStartsAt(n.StartsAt.UTC()).
		SetEndsAt(n.EndsAt.UTC())
	if n.PaymentTimeout > 0 {
		c.SetPaymentTimeoutSeconds(int(n.PaymentTimeout / time.Second))
	}
	sl, err := c.Save(ctx)
	if ent.IsValidationError(err) {
		return nil, fmt.Errorf("%w: %v", domain.ErrInvalidOrder, err)
	}
	if err != nil {
		return nil, fmt.Errorf("create sale: %w", err)
	}
	return sl, nil
}

// Sale returns one sale, or domain.ErrUnknownSale.
func (s *Store) Sale(ctx context.Context, id int64) (*ent.Sale, error) {
	sl, err := s.db.Sale.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, domain.ErrUnknownSale
	}
	if err != nil {
		return nil, fmt.Errorf("get sale %d: %w", id, err)
	}
	return sl, nil
}
