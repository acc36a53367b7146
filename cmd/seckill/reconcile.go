package main

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// repairKinds are the kind labels of seckill_reconciler_repairs_total.
var repairKinds = []string{"rebuilt", "buyer_restored", "stale_released", "remaining_fixed"}

// reconcilerMetrics counts repairs by kind and retired sales.
func reconcilerMetrics(reg prometheus.Registerer) (func(reconcile.Report), func(int64)) {
	repairs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconciler_repairs_total",
		Help: "Redis/Postgres drift the reconciler repaired, by kind.",
	}, []string{"kind"})
	retired := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_sales_retired_total",
		Help: "Ended, drained sales whose keys the reconciler dropped from Redis.",
	})
	reg.MustRegister(repairs, retired)
	// Every kind is exported from the start, at zero, so a first repair is
	// an increase an alert sees, not a series appearing out of nowhere.
	for _, kind := range repairKinds {
		repairs.WithLabelValues(kind)
	}
	return func(r reconcile.Report) {
			if r.Rebuilt {
				repairs.WithLabelValues("rebuilt").Inc()
			}
			repairs.WithLabelValues("buyer_restored").Add(float64(r.BuyersRestored))
			repairs.WithLabelValues("stale_released").Add(float64(r.StaleReleased))
			if r.RemainingFixed {
				repairs.WithLabelValues("remaining_fixed").Inc()
			}
		}, func(int64) {
			retired.Inc()
		}
}

// runReconciler runs the periodic reconciler, which also retires ended
// sales from Redis, until ctx ends (interval 0: never).
func runReconciler(ctx context.Context, d *deps, interval, retireAfter time.Duration) {
	if interval <= 0 {
		return
	}
	onRepair, onRetire := reconcilerMetrics(d.registry)
	rc := &reconcile.Reconciler{Store: d.store, Stock: d.stock, RetireAfter: retireAfter, OnRepair: onRepair, OnRetire: onRetire}
	go func() { _ = rc.Run(ctx, interval) }()
}
