package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/stock"
)

// RedisCeiling returns a measurement of bare reserve.lua calls against the
// Redis at opts, on a scratch sale in that server's database db (not the
// one seckill uses, so no relay ever sees the scratch intents). It is the
// fastest admission this machine's Redis allows, for the same users,
// units and concurrency; the scratch keys are deleted afterwards.
func RedisCeiling(opts *redis.Options, db int) func(ctx context.Context, users, units, concurrency int) (time.Duration, error) {
	return func(ctx context.Context, users, units, concurrency int) (time.Duration, error) {
		st, sale, cleanup, err := scratchSale(ctx, opts, db, units, concurrency)
		if err != nil {
			return 0, err
		}
		defer cleanup()
		var (
			next   atomic.Int64
			wg     sync.WaitGroup
			failed atomic.Value
		)
		begin := time.Now()
		for range concurrency {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(users) || ctx.Err() != nil {
						return
					}
					_, err := st.Reserve(ctx, sale, fmt.Sprintf("ceiling-%d", i), i+1, "")
					if err != nil && !isBusinessOutcome(err) {
						failed.Store(err)
					}
				}
			})
		}
		wg.Wait()
		d := time.Since(begin)
		if err, _ := failed.Load().(error); err != nil {
			return 0, err
		}
		return d, ctx.Err()
	}
}

// scratchSale warms a scratch sale of units on a client of its own (a pool
// for concurrency callers) to database db of the Redis at opts: not the
// one seckill uses, so no relay ever sees its intents. cleanup deletes its
// keys and closes the client.
func scratchSale(ctx context.Context, opts *redis.Options, db, units, concurrency int) (st *stock.Stock, sale int64, cleanup func(), err error) {
	o := *opts
	o.DB = db
	o.PoolSize = concurrency * 2
	rdb := redis.NewClient(&o)
	// An empty database only: a scratch sale is listed as a live sale, and
	// a seckill relay on that database would start orders for its intents
	// (the bare HTTP limit's buyers are raw tokens, which no order takes).
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n > 0 {
		rdb.Close()
		if err == nil {
			err = fmt.Errorf("database %d of the Redis at %s holds %d keys: the scratch sales need an empty database that no seckill uses (--ceiling-db)", db, o.Addr, n)
		}
		return nil, 0, nil, err
	}
	st = stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	sale = int64(1<<50 + rand.IntN(1<<20))
	cleanup = func() {
		cctx := context.WithoutCancel(ctx)
		rdb.Del(cctx, stock.KeysFor(sale).All()...)
		rdb.SRem(cctx, stock.SalesKey, sale)
		rdb.Close()
	}
	if _, err := st.Warm(ctx, stock.Sale{ID: sale, PriceCents: 100, Remaining: units,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		cleanup()
		return nil, 0, nil, err
	}
	return st, sale, cleanup, nil
}
