package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/stock"
)

func newStock(t *testing.T) (*stock.Stock, *redis.Client) {
	t.Helper()
	rdb, _ := testenv.Redis(t)
	return newStockOn(rdb), rdb
}

func newStockOn(rdb *redis.Client) *stock.Stock {
	return stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
}

var testenvRedis = testenv.Redis

// openSale warms a sale that is on now.
func openSale(t *testing.T, st *stock.Stock, id int64, units int) {
	t.Helper()
	loaded, err := st.Warm(context.Background(), stock.Sale{
		ID: id, PriceCents: 999, Remaining: units,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
	})
	if err != nil || !loaded {
		t.Fatalf("warm: loaded=%v err=%v", loaded, err)
	}
}

func TestReserveNeverOversells(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 1, 100)
	var ids atomic.Int64 // order ids need only be unique here

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		won     = map[int64]string{}
		soldOut int
	)
	for i := range 1000 {
		wg.Go(func() {
			user := fmt.Sprintf("user-%d", i)
			id, err := st.Reserve(ctx, 1, user, ids.Add(1), "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won[id] = user
			case errors.Is(err, domain.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("reserve %s: %v", user, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 100 || soldOut != 900 {
		t.Fatalf("won %d, sold out %d; want 100 and 900", len(won), soldOut)
	}
	state, err := st.Inspect(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if state.Remaining != 0 || state.Buyers != 100 || state.Backlog != 100 {
		t.Fatalf("state = %+v, want 0 remaining, 100 buyers, 100 intents", state)
	}
	// Every intent names a winner, with the order id the winner got.
	msgs, err := rdb.XRange(ctx, stock.KeysFor(1).Intents, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		var id int64
		fmt.Sscan(m.Values["order_id"].(string), &id)
		if won[id] != m.Values["user_id"] || m.Values["sale_id"] != "1" || m.Values["amount_cents"] != "999" {
			t.Fatalf("intent %v does not match a winner", m.Values)
		}
	}
}

func TestReserveOneUnitPerBuyer(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 2, 10)
	var ids atomic.Int64

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted []int64
		repeats []int64
	)
	for range 50 {
		wg.Go(func() {
			id, err := st.Reserve(ctx, 2, "alice", ids.Add(1), "")
			var already *domain.AlreadyPurchasedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted = append(granted, id)
			case errors.As(err, &already):
				repeats = append(repeats, already.OrderID)
			default:
				t.Errorf("reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if len(granted) != 1 || len(repeats) != 49 {
		t.Fatalf("granted %d, repeats %d; want 1 and 49", len(granted), len(repeats))
	}
	for _, id := range repeats {
		if id != granted[0] {
			t.Fatalf("repeat got order %d, want the existing order %d", id, granted[0])
		}
	}
	if left, _ := st.Remaining(ctx, 2); left != 9 {
		t.Fatalf("remaining = %d, want 9", left)
	}
}

func TestReleaseIsIdempotentAndOnlyFreesItsOwnOrder(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 3, 1)
	first, err := st.Reserve(ctx, 3, "bob", 1001, "")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, 3, "bob", 9999); err != nil || ok {
		t.Fatalf("release of another order id: released=%v err=%v; want nothing released", ok, err)
	}
	if ok, err := st.Release(ctx, 3, "carol", first); err != nil || ok {
		t.Fatalf("release under another user: released=%v err=%v; want nothing released", ok, err)
	}
	if ok, err := st.Release(ctx, 3, "bob", first); err != nil || !ok {
		t.Fatalf("release: released=%v err=%v; want released", ok, err)
	}
	if ok, err := st.Release(ctx, 3, "bob", first); err != nil || ok {
		t.Fatalf("second release: released=%v err=%v; want nothing released", ok, err)
	}
	if left, _ := st.Remaining(ctx, 3); left != 1 {
		t.Fatalf("remaining = %d, want 1 after one release", left)
	}
	// Bob buys again; the stale release of his first order must not free
	// the unit of his second.
	second, err := st.Reserve(ctx, 3, "bob", 1002, "")
	if err != nil || second != 1002 {
		t.Fatalf("buy again: %d, %v", second, err)
	}
	if ok, _ := st.Release(ctx, 3, "bob", first); ok {
		t.Fatal("a stale release freed the buyer's new unit")
	}
	if holder, ok, _ := st.Holder(ctx, 3, "bob"); !ok || holder != second {
		t.Fatalf("holder = %d, %v; want %d", holder, ok, second)
	}
}

func TestReserveWindowAndUnknownSale(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	now := time.Now()
	mustWarm := func(id int64, start, end time.Time) {
		if _, err := st.Warm(ctx, stock.Sale{ID: id, Remaining: 5, StartsAt: start, EndsAt: end}); err != nil {
			t.Fatal(err)
		}
	}
	mustWarm(10, now.Add(time.Hour), now.Add(2*time.Hour))
	mustWarm(11, now.Add(-2*time.Hour), now.Add(-time.Hour))
	for _, tc := range []struct {
		sale int64
		want error
	}{
		{10, domain.ErrNotStarted},
		{11, domain.ErrEnded},
		{12, domain.ErrUnknownSale},
	} {
		if _, err := st.Reserve(ctx, tc.sale, "dave", 7, ""); !errors.Is(err, tc.want) {
			t.Errorf("sale %d: err = %v, want %v", tc.sale, err, tc.want)
		}
		if s, _ := st.Inspect(ctx, tc.sale); s.Backlog != 0 {
			t.Errorf("sale %d: a refused request queued an intent", tc.sale)
		}
	}
}

func TestWarmDoesNotResetASaleInProgress(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 4, 5)
	if _, err := st.Reserve(ctx, 4, "erin", 1, ""); err != nil {
		t.Fatal(err)
	}
	loaded, err := st.Warm(ctx, stock.Sale{ID: 4, Remaining: 5, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil || loaded {
		t.Fatalf("second warm: loaded=%v err=%v; want nothing loaded", loaded, err)
	}
	if left, _ := st.Remaining(ctx, 4); left != 4 {
		t.Fatalf("remaining = %d, want 4", left)
	}
	if sales, _ := st.Sales(ctx); len(sales) != 1 || sales[0] != 4 {
		t.Fatalf("registered sales = %v, want [4]", sales)
	}
}

func TestWarmRestoresBuyers(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	_, err := st.Warm(ctx, stock.Sale{ID: 5, Remaining: 2, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
		Buyers: map[string]int64{"frank": 77}})
	if err != nil {
		t.Fatal(err)
	}
	var already *domain.AlreadyPurchasedError
	if _, err := st.Reserve(ctx, 5, "frank", 78, ""); !errors.As(err, &already) || already.OrderID != 77 {
		t.Fatalf("reserve by a restored buyer: %v; want already purchased order 77", err)
	}
}

func TestScriptsSurviveScriptCacheFlush(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 6, 3)
	if _, err := st.Reserve(ctx, 6, "gina", 1, ""); err != nil {
		t.Fatal(err)
	}
	// A Redis restart or failover empties the script cache: EVALSHA then
	// fails with NOSCRIPT and the script must be sent again.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, 6, "hank", 2, ""); err != nil {
		t.Fatalf("reserve after SCRIPT FLUSH: %v", err)
	}
}

func TestKeysOfASaleShareOneSlot(t *testing.T) {
	// Ask a real Redis in cluster mode where each key lives. Its cluster
	// bus port is a free one of its own: by default it is the port plus
	// 10,000, in the kernel's range for outgoing connections, where one of
	// them may hold it.
	srv := testenv.StartRedisServer(t, false, "--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", "--cluster-port", fmt.Sprint(testenv.FreePort(t)))
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	slots := map[int64]bool{}
	for _, sale := range []int64{1, 42, 123456789} {
		k := stock.KeysFor(sale)
		var first int64 = -1
		for _, key := range append(k.All(), stock.RateKey(sale, "some-buyer")) {
			slot, err := c.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if first >= 0 && slot != first {
				t.Fatalf("sale %d: key %s is in slot %d, not %d", sale, key, slot, first)
			}
			first = slot
		}
		slots[first] = true
	}
	if len(slots) < 2 {
		t.Fatal("different sales should spread over slots")
	}
}

func TestIdempotencyKeyReplaysTheWinningRequest(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 7, 5)
	id, err := st.Reserve(ctx, 7, "ida", 500, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	// The same request retried (same key): the same order, as a success.
	if again, err := st.Reserve(ctx, 7, "ida", 501, "key-1"); err != nil || again != id {
		t.Fatalf("retry with the same key = %d, %v; want %d", again, err, id)
	}
	// Another request of the same buyer: already purchased.
	var already *domain.AlreadyPurchasedError
	if _, err := st.Reserve(ctx, 7, "ida", 502, "key-2"); !errors.As(err, &already) || already.OrderID != id {
		t.Fatalf("another key: %v, want already purchased %d", err, id)
	}
	if _, err := st.Reserve(ctx, 7, "ida", 503, ""); !errors.As(err, &already) {
		t.Fatalf("no key: %v, want already purchased", err)
	}
	if left, _ := st.Remaining(ctx, 7); left != 4 {
		t.Fatalf("remaining = %d, want 4: retries must not take units", left)
	}
	// After a release the old key no longer replays a dead order.
	if ok, _ := st.Release(ctx, 7, "ida", id); !ok {
		t.Fatal("release failed")
	}
	if next, err := st.Reserve(ctx, 7, "ida", 504, "key-1"); err != nil || next != 504 {
		t.Fatalf("buying again after release = %d, %v; want the new order 504", next, err)
	}
}

// One engine probe at a time in the deployment: a second is refused at
// once (not queued) while the first runs, and the lock is free after.
func TestProbeLockIsTakenOnceWithoutWaiting(t *testing.T) {
	ctx := context.Background()
	st, _ := newStock(t)
	held, err := st.WithProbeLock(ctx, func(ctx context.Context) error {
		again, err := st.WithProbeLock(ctx, func(context.Context) error {
			t.Error("a second probe ran under the lock the first holds")
			return nil
		})
		if err != nil || again {
			t.Errorf("second probe: held %v, err %v; want refused without an error", again, err)
		}
		return nil
	})
	if err != nil || !held {
		t.Fatalf("first probe: held %v, err %v", held, err)
	}
	ran := false
	if held, err := st.WithProbeLock(ctx, func(context.Context) error { ran = true; return nil }); err != nil || !held || !ran {
		t.Fatalf("probe after the first ended: held %v, ran %v, err %v", held, ran, err)
	}
}
