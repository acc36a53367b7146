package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// drainAdmissions waits, once the api has stopped admitting, until every
// admitted order has its row in the database: until then an admission
// lives only in Redis, and `seckill dev`'s in-process Redis keeps nothing
// across a restart. It gives up after timeout and names the orders still
// unplaced at ERROR: their buyers were told 202. It returns those orders.
func drainAdmissions(st *stock.Stock, db *store.Store, timeout time.Duration) []int64 {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	started := time.Now()
	var left []int64 // the last answer
	for announced := false; ; {
		now, err := unplaced(ctx, st, db)
		if err == nil {
			left = now
			if len(left) == 0 {
				if announced {
					slog.Info("every admitted order is placed", "waited", time.Since(started).Round(time.Millisecond))
				}
				return nil
			}
			if !announced {
				slog.Info("stopping: waiting for admitted orders to be placed before exit", "orders", len(left), "up_to", timeout)
				announced = true
			}
		}
		select {
		case <-ctx.Done():
			if left == nil {
				slog.Error("stopping: could not check that every admitted order is placed", "err", err)
				return nil
			}
			slog.Error("stopping with admitted orders unplaced: their buyers were told 202, and the in-process Redis that holds them keeps nothing",
				"orders", fmt.Sprint(left), "count", len(left), "waited", timeout)
			return left
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unplaced lists the orders Redis holds a unit for that have no row yet,
// over every sale loaded in Redis.
func unplaced(ctx context.Context, st *stock.Stock, db *store.Store) ([]int64, error) {
	sales, err := st.Sales(ctx)
	if err != nil {
		return nil, err
	}
	var held []int64
	for _, sale := range sales {
		buyers, err := st.Buyers(ctx, sale)
		if err != nil {
			return nil, err
		}
		for _, id := range buyers {
			held = append(held, id)
		}
	}
	written, err := db.OrdersWritten(ctx, held)
	if err != nil {
		return nil, err
	}
	held = slices.DeleteFunc(held, func(id int64) bool { return written[id] })
	slices.Sort(held)
	return held, nil
}
