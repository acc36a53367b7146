package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/worker"
)

// MigrateCmd creates the tables and registers the search attributes. Both
// steps are idempotent, so it runs safely on every deploy.
type MigrateCmd struct {
	Services
	SkipTemporal bool `name:"skip-temporal" help:"Only migrate the database."`
}

func (c *MigrateCmd) Run(ctx context.Context) error {
	d, err := c.connect(ctx, !c.SkipTemporal, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.store.Migrate(ctx); err != nil {
		return err
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
