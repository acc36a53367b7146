package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/payment"
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

// PaymentReconcileFlags time the reconciliation of the payment provider's
// records against the orders, which the periodic reconciler runs (worker
// and dev; docs/design.md §4.10).
type PaymentReconcileFlags struct {
	PaymentReconcileInterval time.Duration `name:"payment-reconcile-interval" env:"SECKILL_PAYMENT_RECONCILE_INTERVAL" default:"5m" help:"How often the payment provider's captures of the recent sales are compared with the orders, once for the deployment, and a capture no order kept is refunded (0 = never; nothing without --payment-provider)."`
	PaymentSettleMargin      time.Duration `name:"payment-settle-margin" env:"SECKILL_PAYMENT_SETTLE_MARGIN" default:"10m" help:"How old a capture must be before that reconciliation acts on it: the order's workflow and the provider's notification have this long to keep or refund it. Keep it above --payment-grace."`
}

// check refuses a margin that would race the order's own workflow.
func (f PaymentReconcileFlags) check(grace time.Duration) error {
	if f.PaymentReconcileInterval < 0 {
		return errors.New("--payment-reconcile-interval must not be negative (0 = never)")
	}
	if f.PaymentSettleMargin <= grace {
		return fmt.Errorf("--payment-settle-margin (%s) must be longer than --payment-grace (%s): a capture younger than that may still be the order's to decide",
			f.PaymentSettleMargin, grace)
	}
	return nil
}

// reconcilePayments is what the periodic reconciler needs to reconcile
// the provider's records.
type reconcilePayments struct {
	providers map[string]payment.Provider
	PaymentReconcileFlags
}

// runReconciler runs the periodic reconciler, which also retires ended
// sales from Redis and reconciles the payment provider's records, until
// ctx ends (interval 0: never). lostAfter is Reconciler.LostAfter.
func runReconciler(ctx context.Context, d *deps, interval, retireAfter, lostAfter time.Duration, pay reconcilePayments) {
	if interval <= 0 {
		return
	}
	payEvery := pay.PaymentReconcileInterval
	if payEvery == 0 {
		payEvery = -1 // never
	}
	rc := (&reconcile.Reconciler{Store: d.store, Stock: d.stock, RetireAfter: retireAfter, LostAfter: lostAfter,
		Temporal: d.temporal, Events: d.events, Providers: pay.providers, PaymentInterval: payEvery,
		SettleMargin: pay.PaymentSettleMargin}).WithMetrics(d.registry)
	go func() { _ = rc.Run(ctx, interval) }()
}
