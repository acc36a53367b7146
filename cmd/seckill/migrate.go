package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/worker"
)

// MigrateCmd creates the tables and registers the search attributes. Both
// steps are idempotent, so it runs safely on every deploy.
type MigrateCmd struct {
	Services
	CurrencyFlags
	SkipTemporal bool `name:"skip-temporal" help:"Only migrate the database."`
}

func (c *MigrateCmd) Run(ctx context.Context) error {
	currency, err := c.currency()
	if err != nil {
		return err
	}
	d, err := c.connect(ctx, !c.SkipTemporal, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.store.Migrate(ctx); err != nil {
		return err
	}
	// The built-in payment provider's records, in their own tables.
	if err := builtin.Migrate(ctx, d.store.DB()); err != nil {
		return err
	}
	filled, err := d.store.FillCurrency(ctx, currency)
	if err != nil {
		return err
	}
	if filled > 0 {
		slog.Info("sales without a currency given the default", "sales", filled, "currency", currency)
	}
	slog.Info("database schema up to date")
	if c.SkipTemporal {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitTemporal(tctx, d.temporal, c.TemporalNamespace); err != nil {
		return err
	}
	if err := worker.RegisterSearchAttributes(tctx, d.temporal, c.TemporalNamespace); err != nil {
		return fmt.Errorf("register search attributes: %w", err)
	}
	slog.Info("temporal search attributes registered", "namespace", c.TemporalNamespace)
	return nil
}
