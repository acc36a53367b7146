// Package reconcile repairs drift between Redis (the admission filter) and
// Postgres (the source of truth) for live sales: a Redis that lost its data,
// buyers Redis forgot, reservations whose order ended without their release,
// and a remaining count that no longer matches the database.
//
// Each sale is reconciled under its redsync lock (Redlock over the
// configured Redis nodes, extended while the work runs), so several
// workers can run the loop and only one touches a sale at a time.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Report says what a pass over one sale repaired.
type Report struct {
	SaleID           int64
	Rebuilt          bool // Redis did not know the sale; loaded from the database
	BuyersRestored   int  // live orders Redis did not hold a buyer entry for
	StaleReleased    int  // ended orders whose Redis reservation was still held
	RemainingFixed   bool // Redis remaining set to the database stock
	RemainingWas     int
	RemainingNow     int
	SkippedInFlight  int // orders admitted but not yet in the database: remaining left alone
	ReleaseGraceLeft int // ended orders younger than the grace period, left to their saga
}

// Repaired reports whether anything changed.
func (r Report) Repaired() bool {
	return r.Rebuilt || r.BuyersRestored > 0 || r.StaleReleased > 0 || r.RemainingFixed
}

// Reconciler repairs sales.
type Reconciler struct {
	Store *store.Store
	Stock *stock.Stock
	// Grace is how long an ended order may keep its Redis reservation
	// before the reconciler releases it (its saga normally does so within
	// milliseconds). Default 1 minute.
	Grace time.Duration
	// OnRepair, if set, is told of every pass that changed something.
	OnRepair func(Report)
	Logger   *slog.Logger
}

// setIfScript sets the remaining count only if it still holds the value
// read, so an admission that happens meanwhile is never overwritten.
var setIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0`)

// Sale reconciles one sale under its lock.
func (rc *Reconciler) Sale(ctx context.Context, saleID int64) (Report, error) {
	rep := Report{SaleID: saleID}
	err := rc.Stock.WithSaleLock(ctx, saleID, func(ctx context.Context) error {
		var err error
		rep, err = rc.sale(ctx, saleID)
		return err
	})
	if err == nil && rep.Repaired() {
		rc.logger().Warn("reconciler repaired a sale", "sale_id", saleID, "rebuilt", rep.Rebuilt,
			"buyers_restored", rep.BuyersRestored, "stale_released", rep.StaleReleased,
			"remaining_fixed", rep.RemainingFixed, "remaining_was", rep.RemainingWas, "remaining_now", rep.RemainingNow)
		if rc.OnRepair != nil {
			rc.OnRepair(rep)
		}
	}
	return rep, err
}

func (rc *Reconciler) sale(ctx context.Context, saleID int64) (Report, error) {
	rep := Report{SaleID: saleID}
	sl, err := rc.Store.Sale(ctx, saleID)
	if err != nil {
		return rep, err
	}
	rows, err := rc.Store.Client().Order.Query().Where(order.SaleID(saleID)).
		Select(order.FieldID, order.FieldUserID, order.FieldStatus, order.FieldUpdatedAt).All(ctx)
	if err != nil {
		return rep, fmt.Errorf("orders of sale %d: %w", saleID, err)
	}
	liveByUser := map[string]int64{}
	byID := map[int64]struct {
		status  domain.Status
		updated time.Time
	}{}
	for _, o := range rows {
		s := domain.Status(o.Status)
		byID[o.ID] = struct {
			status  domain.Status
			updated time.Time
		}{s, o.UpdatedAt}
		if s.Live() {
			liveByUser[o.UserID] = o.ID
		}
	}

	state, err := rc.Stock.Inspect(ctx, saleID)
	if err != nil {
		return rep, err
	}
	if !state.Warm {
		// Redis lost the sale (a restart without persistence): the
		// database knows the stock and who holds a unit.
		loaded, err := rc.Stock.Load(ctx, stock.Sale{ID: sl.ID, PriceCents: sl.PriceCents,
			StartsAt: sl.StartsAt, EndsAt: sl.EndsAt, Remaining: sl.Stock, Buyers: liveByUser})
		if err != nil {
			return rep, err
		}
		rep.Rebuilt = loaded
		rep.RemainingNow = sl.Stock
		return rep, nil
	}

	buyers, err := rc.Stock.Buyers(ctx, saleID)
	if err != nil {
		return rep, err
	}
	keys := stock.KeysFor(saleID)
	rdb := rc.Stock.Client()
	for user, id := range liveByUser {
		if _, ok := buyers[user]; ok {
			continue
		}
		// HSETNX: never replace a newer reservation of the same buyer.
		if ok, err := rdb.HSetNX(ctx, keys.Buyers, user, strconv.FormatInt(id, 10)).Result(); err != nil {
			return rep, err
		} else if ok {
			rep.BuyersRestored++
			buyers[user] = id
		}
	}
	grace := rc.Grace
	if grace <= 0 {
		grace = time.Minute
	}
	for user, id := range buyers {
		row, ok := byID[id]
		switch {
		case !ok:
			rep.SkippedInFlight++ // admitted, its workflow has not written it yet
		case !row.status.Live() && time.Since(row.updated) < grace:
			rep.ReleaseGraceLeft++
		case !row.status.Live():
			// The order ended but its reservation is still held: the
			// saga's release was lost. Give the unit back.
			released, err := rc.Stock.Release(ctx, saleID, user, id)
			if err != nil {
				return rep, err
			}
			if released {
				rep.StaleReleased++
			}
		}
	}

	// With nothing on its way, Redis must hold exactly the database's
	// stock. Orders in flight make the right number unknowable, so the
	// count is left for a later pass.
	if rep.SkippedInFlight > 0 || rep.ReleaseGraceLeft > 0 || state.Backlog > 0 {
		return rep, nil
	}
	sl, err = rc.Store.Sale(ctx, saleID) // again: releases above may race a restore
	if err != nil {
		return rep, err
	}
	cur, err := rdb.Get(ctx, keys.Stock).Int()
	if err != nil {
		return rep, fmt.Errorf("remaining of sale %d: %w", saleID, err)
	}
	rep.RemainingWas, rep.RemainingNow = cur, cur
	if cur != sl.Stock {
		ok, err := setIfScript.Run(ctx, rdb, []string{keys.Stock}, cur, sl.Stock).Int()
		if err != nil {
			return rep, err
		}
		if ok == 1 {
			rep.RemainingFixed, rep.RemainingNow = true, sl.Stock
		}
	}
	return rep, nil
}

// All reconciles every sale that has not ended.
func (rc *Reconciler) All(ctx context.Context) ([]Report, error) {
	sales, err := rc.Store.Sales(ctx, 1000)
	if err != nil {
		return nil, err
	}
	var reps []Report
	for _, s := range sales {
		if !time.Now().Before(s.EndsAt) {
			continue
		}
		r, err := rc.Sale(ctx, s.ID)
		if err != nil {
			return reps, fmt.Errorf("reconcile sale %d: %w", s.ID, err)
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// Run reconciles every interval until ctx ends.
func (rc *Reconciler) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := rc.All(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (rc *Reconciler) logger() *slog.Logger {
	if rc.Logger != nil {
		return rc.Logger
	}
	return slog.Default()
}
