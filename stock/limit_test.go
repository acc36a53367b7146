package stock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/stock"
)

// admit runs n purchases of buyer on sale at rate and returns how many
// were not rate limited and the first refusal.
func admit(t *testing.T, st *stock.Stock, sale int64, buyer string, rate, n int) (passed int, refused *domain.RateLimitedError) {
	t.Helper()
	for i := range n {
		_, err := st.Admit(context.Background(), stock.Purchase{
			SaleID: sale, UserID: buyer, OrderID: int64(1000 + i), BuyerRate: rate,
		})
		var limited *domain.RateLimitedError
		var already *domain.AlreadyPurchasedError
		switch {
		case errors.As(err, &limited):
			if refused == nil {
				refused = limited
			}
		case err == nil, errors.As(err, &already):
			passed++
		default:
			t.Fatalf("purchase %d: %v", i, err)
		}
	}
	return passed, refused
}

func TestBuyerRateLimitRunsInTheReservation(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 11, 10)
	openSale(t, st, 12, 10)

	// A burst of one second's worth passes (the first takes a unit, the
	// rest are answered "already purchased"); the next is refused with the
	// time until one more would pass.
	passed, refused := admit(t, st, 11, "hasty", 3, 3)
	if passed != 3 || refused != nil {
		t.Fatalf("a burst of 3 at 3/s: %d passed, refused %v; want all 3", passed, refused)
	}
	before := snapshot(t, st, 11)
	passed, refused = admit(t, st, 11, "hasty", 3, 2)
	if passed != 0 || refused == nil {
		t.Fatalf("2 more: %d passed, refused %v; want both refused", passed, refused)
	}
	if d := refused.RetryAfter; d <= 0 || d > time.Second/3+time.Millisecond {
		t.Fatalf("retry after %s, want within (0, 1/3 s]", d)
	}
	// A refusal reads and writes nothing of the sale: same version (no
	// admission, no release), same stock, buyers and backlog.
	after := snapshot(t, st, 11)
	if after.Version != before.Version || after.Remaining != before.Remaining ||
		len(after.Buyers) != len(before.Buyers) || after.Backlog != before.Backlog {
		t.Fatalf("a refused purchase changed the sale: %+v, then %+v", before, after)
	}

	// The budget is the buyer's on this sale: another buyer, and the same
	// buyer on another sale, have their own.
	if passed, refused := admit(t, st, 11, "calm", 3, 1); passed != 1 || refused != nil {
		t.Fatalf("another buyer: %d passed, refused %v", passed, refused)
	}
	if passed, refused := admit(t, st, 12, "hasty", 3, 1); passed != 1 || refused != nil {
		t.Fatalf("the same buyer on another sale: %d passed, refused %v", passed, refused)
	}
	// The state goes away by itself once the burst is back.
	ttl, err := rdb.PTTL(ctx, stock.RateKey(11, "hasty")).Result()
	if err != nil || ttl <= 0 || ttl > time.Second+time.Millisecond {
		t.Fatalf("rate key ttl = %s, %v; want within (0, 1 s]", ttl, err)
	}

	// No rate: no limit, and no state.
	if passed, refused := admit(t, st, 12, "free", 0, 20); passed != 20 || refused != nil {
		t.Fatalf("rate 0: %d of 20 passed, refused %v", passed, refused)
	}
	if n, _ := rdb.Exists(ctx, stock.RateKey(12, "free")).Result(); n != 0 {
		t.Fatal("rate 0 left a rate key")
	}
}

// The limit counts like github.com/go-redis/redis_rate's PerSecond, the
// maintained limiter seckill uses for the per-address and websocket
// limits: the same burst passes, and the refusal asks for the same wait.
// Both refill one request an interval, so a burst that takes longer than
// an interval (a loaded machine, at 50/s one of 20 ms) passes one more
// for each interval it took, in either limiter: each is held to the
// burst plus what its own burst's time refilled.
func TestBuyerRateLimitAgreesWithRedisRate(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 13, 10)
	for _, rate := range []int{1, 4, 50} {
		interval := time.Second / time.Duration(rate)
		refilled := func(took time.Duration) int { return int(took / interval) }
		lib := redis_rate.NewLimiter(rdb)
		libPassed := 0
		var libWait time.Duration
		key := fmt.Sprintf("test:rate:agree:%d", rate)
		libBegan := time.Now()
		for range rate + 2 {
			res, err := lib.Allow(ctx, key, redis_rate.PerSecond(rate))
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed > 0 {
				libPassed++
			} else if libWait == 0 {
				libWait = res.RetryAfter
			}
		}
		libTook := time.Since(libBegan)
		began := time.Now()
		passed, refused := admit(t, st, 13, fmt.Sprintf("agree-%d", rate), rate, rate+2)
		took := time.Since(began)
		if libPassed < rate || libPassed > rate+refilled(libTook) || passed < rate || passed > rate+refilled(took) || refused == nil {
			t.Fatalf("rate %d: %d passed in %s, refused %v; redis_rate passed %d in %s; want the burst of %d, and one more for each %s the burst took",
				rate, passed, took, refused, libPassed, libTook, rate, interval)
		}
		// Both waits are one interval less the time the burst took.
		for _, d := range []time.Duration{libWait, refused.RetryAfter} {
			if d <= 0 || d > interval+time.Millisecond {
				t.Fatalf("rate %d: waits %s (redis_rate) and %s; want within (0, %s]", rate, libWait, refused.RetryAfter, interval)
			}
		}
	}
}
