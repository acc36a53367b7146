package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/reconcile"
)

// ReconcileCmd repairs Redis↔Postgres drift of live sales once.
type ReconcileCmd struct {
	Services
	Sale []int64 `name:"sale" help:"Sales to reconcile (default: every sale that has not ended)."`
}

func (c *ReconcileCmd) Run(ctx context.Context) error {
	d, err := c.connect(ctx, false, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	rc := &reconcile.Reconciler{Store: d.store, Stock: d.stock}
	var reps []reconcile.Report
	if len(c.Sale) == 0 {
		if reps, err = rc.All(ctx); err != nil {
			return err
		}
	}
	for _, id := range c.Sale {
		r, err := rc.Sale(ctx, id)
		if err != nil {
			return err
		}
		reps = append(reps, r)
	}
	for _, r := range reps {
		fmt.Printf("sale %d: %+v\n", r.SaleID, r)
	}
	return nil
}

// runReconciler runs the periodic reconciler, which also retires ended
// sales from Redis, until ctx ends (interval 0: never).
func runReconciler(ctx context.Context, d *deps, interval, retireAfter time.Duration) {
	if interval <= 0 {
		return
	}
	rc := (&reconcile.Reconciler{Store: d.store, Stock: d.stock, RetireAfter: retireAfter}).WithMetrics(d.registry)
	go func() { _ = rc.Run(ctx, interval) }()
}
