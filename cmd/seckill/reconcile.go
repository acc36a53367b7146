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
	Sale     []int64 `name:"sale" help:"Sales to reconcile (default: every sale that has not ended)."`
	Stranded bool    `name:"stranded" default:"true" negatable:"" help:"Also end the orders whose workflow closed without ending them (an operator's Terminate); needs Temporal."`
}

func (c *ReconcileCmd) Run(ctx context.Context) error {
	d, err := c.connect(ctx, c.Stranded, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	rc := &reconcile.Reconciler{Store: d.store, Stock: d.stock, Temporal: d.temporal, Events: d.events}
	if c.Stranded {
		ends, err := rc.Stranded(ctx)
		for _, e := range ends {
			fmt.Printf("order %d (sale %d): workflow %s; ended %s: %s\n", e.Ref.OrderID, e.Ref.SaleID, e.Closed, e.Status, e.Reason)
		}
		if err != nil {
			return err
		}
	}
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
// sales from Redis, until ctx ends (interval 0: never). lostAfter is
// Reconciler.LostAfter.
func runReconciler(ctx context.Context, d *deps, interval, retireAfter, lostAfter time.Duration) {
	if interval <= 0 {
		return
	}
	rc := (&reconcile.Reconciler{Store: d.store, Stock: d.stock, RetireAfter: retireAfter, LostAfter: lostAfter,
		Temporal: d.temporal, Events: d.events}).WithMetrics(d.registry)
	go func() { _ = rc.Run(ctx, interval) }()
}
