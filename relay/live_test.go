package relay_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/workflows"
)

// recordingStarter accepts every start and remembers the orders.
type recordingStarter struct {
	mu     sync.Mutex
	orders []int64
}

func (s *recordingStarter) Start(_ context.Context, in workflows.OrderInput) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders = append(s.orders, in.Order.OrderID)
	return true, nil
}

func (s *recordingStarter) started() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.orders...)
}

// relayClient is a Redis client of the relay's own on the test's database,
// so its pool counts the relay's connections and nothing else. It closes
// after the relay stopped (cleanups run last registered first).
func relayClient(t *testing.T, db int) (*stock.Stock, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), DB: db, PoolSize: 256})
	t.Cleanup(func() { rdb.Close() })
	return stock.New(rdb, redsync.New(goredis.NewPool(rdb))), rdb
}

// gauge reads a gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// Sales over time: with many sales loaded, most of them ended and drained,
// the relay reads the live ones only, and holds the same one or two Redis
// connections as with a handful of sales, not one per sale.
func TestRelayCostFollowsLiveSales(t *testing.T) {
	const live, perSale = 5, 20
	for _, loaded := range []int{10, 1000} {
		t.Run(fmt.Sprintf("%d sales", loaded), func(t *testing.T) {
			setup, db := testenv.Redis(t)
			st := stock.New(setup, redsync.New(goredis.NewPool(setup)))
			ctx := context.Background()
			for sale := range int64(live) {
				admitB(t, st, sale+1, perSale)
			}
			// The ended sales: some never had an intent, the others were
			// drained, leaving an empty stream with its consumer group.
			for i := range loaded - live {
				id := int64(1000 + i)
				if _, err := st.Load(ctx, stock.Sale{ID: id, PriceCents: 100, Remaining: 3,
					StartsAt: time.Now().Add(-2 * time.Hour), EndsAt: time.Now().Add(-time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 {
					if err := setup.XGroupCreateMkStream(ctx, stock.KeysFor(id).Intents, "relay", "0").Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := setup.SCard(ctx, stock.SalesKey).Val(); n != int64(loaded) {
				t.Fatalf("%d sales loaded, want %d", n, loaded)
			}

			rst, rdb := relayClient(t, db)
			reg := prometheus.NewRegistry()
			starter := &countingStarter{}
			r := relay.New(rst, starter, relay.Options{Consumer: "a", Metrics: reg})
			begun := time.Now()
			run(t, r)

			var maxConns uint32
			var maxStreams, maxBlocking int
			sample := func() {
				maxConns = max(maxConns, rdb.PoolStats().TotalConns)
				rd := r.Reading()
				maxStreams = max(maxStreams, rd.StreamsRead)
				maxBlocking = max(maxBlocking, rd.BlockingReads)
			}
			testenv.Eventually(t, 30*time.Second, func() error {
				sample()
				if n := starter.n.Load(); n != live*perSale {
					return fmt.Errorf("%d of %d workflows started", n, live*perSale)
				}
				return nil
			})
			took := time.Since(begun)
			testenv.Eventually(t, 10*time.Second, func() error {
				sample()
				if got := r.Reading().LiveSales; got != live {
					return fmt.Errorf("relay reads %d sales, want the %d live ones", got, live)
				}
				return nil
			})
			sample()
			listStart := time.Now()
			if _, err := rst.LiveSales(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d sales loaded (%d live): %d orders started in %s; relay connections %d (pool: %d hits, %d misses, %d waits); "+
				"streams per read ≤ %d; blocking reads ≤ %d; one listing of the live sales %s",
				loaded, live, live*perSale, took.Round(time.Millisecond), maxConns, rdb.PoolStats().Hits, rdb.PoolStats().Misses,
				rdb.PoolStats().WaitCount, maxStreams, maxBlocking, time.Since(listStart).Round(time.Microsecond))
			if g := gauge(t, reg, "seckill_relay_live_sales"); g != live {
				t.Errorf("seckill_relay_live_sales = %v, want %d", g, live)
			}
			if maxStreams > live {
				t.Errorf("a read named %d streams, want at most the %d live ones", maxStreams, live)
			}
			if maxBlocking > 1 {
				t.Errorf("%d blocking reads at once, want at most 1", maxBlocking)
			}
			// The pool keeps the connections it opened (an idle one closes
			// after 30 minutes), so its total is the most the relay held at once.
			if maxConns > 2 {
				t.Errorf("the relay held %d Redis connections, want at most 2 whatever the number of sales", maxConns)
			}
			if c := r.Counts(); c.Created != live*perSale || c.Failures != 0 || c.Dropped != 0 {
				t.Errorf("counts = %+v", c)
			}
		})
	}
}

// A sale that ended with intents still in its stream, some of them read by
// a relay that died before starting them, is drained by a relay started
// after the end under the same name; then it is not read any more.
func TestEndedSaleIsDrainedAfterRestart(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	const sale, n = 7, 15
	admit(t, st, sale, n)
	key := stock.KeysFor(sale).Intents
	// The dead relay "a" had read 5 of them.
	if err := rdb.XGroupCreateMkStream(ctx, key, "relay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "a",
		Streams: []string{key, ">"}, Count: 5, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	// The sale ends (by Redis's clock, which admission goes by).
	if err := rdb.HSet(ctx, stock.KeysFor(sale).Meta, "ends_ms", time.Now().Add(-time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if ids, err := st.LiveSales(ctx); err != nil || len(ids) != 1 || ids[0] != sale {
		t.Fatalf("live sales = %v (%v), want the ended sale with intents", ids, err)
	}

	starter := &recordingStarter{}
	r := relay.New(st, starter, relay.Options{Consumer: "a"})
	run(t, r)
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := len(starter.started()); got != n {
			return fmt.Errorf("%d of %d workflows started", got, n)
		}
		return nil
	})
	testenv.Eventually(t, 10*time.Second, func() error {
		if l := rdb.XLen(ctx, key).Val(); l != 0 {
			return fmt.Errorf("%d intents left in the stream", l)
		}
		if p := rdb.XPending(ctx, key, "relay").Val(); p == nil || p.Count != 0 {
			return fmt.Errorf("pending = %+v", p)
		}
		if got := r.Reading().LiveSales; got != 0 {
			return fmt.Errorf("the relay still reads %d sales", got)
		}
		return nil
	})
	if ids, err := st.LiveSales(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("live sales after the drain = %v (%v), want none", ids, err)
	}
	seen := map[int64]bool{}
	for _, id := range starter.started() {
		if seen[id] {
			t.Fatalf("order %d started twice", id)
		}
		seen[id] = true
	}
	if c := r.Counts(); c.Created != n {
		t.Fatalf("counts = %+v, want %d created", c, n)
	}
}

// XAUTOCLAIM follows its cursor: an entry a crashed relay left behind a
// long run of pending entries that are not idle yet is reclaimed without
// waiting for the run to age.
func TestReclaimReachesPastEntriesNotIdleYet(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	const sale, n = 9, 61
	admit(t, st, sale, n)
	key := stock.KeysFor(sale).Intents
	if err := rdb.XGroupCreateMkStream(ctx, key, "relay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "dead",
		Streams: []string{key, ">"}, Count: n, Block: -1}).Result()
	if err != nil || len(res[0].Messages) != n {
		t.Fatalf("read %v (%v), want %d entries", res, err, n)
	}
	// Only the last entry has been idle long enough to be taken over.
	tail := res[0].Messages[n-1]
	if err := rdb.Do(ctx, "XCLAIM", key, "relay", "dead", 0, tail.ID, "IDLE", time.Hour.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
	tailOrder, _ := strconv.ParseInt(tail.Values["order_id"].(string), 10, 64)

	// With Batch 2 one XAUTOCLAIM looks at 20 pending entries: the 60 not
	// idle yet ahead of the tail take three calls to get past.
	starter := &recordingStarter{}
	r := relay.New(st, starter, relay.Options{Consumer: "live", MinIdle: 30 * time.Minute, Batch: 2})
	run(t, r)
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := starter.started(); len(got) != 1 || got[0] != tailOrder {
			return fmt.Errorf("started %v, want only the idle order %d", got, tailOrder)
		}
		p := rdb.XPending(ctx, key, "relay").Val()
		if p == nil || p.Count != n-1 || p.Consumers["dead"] != n-1 {
			return fmt.Errorf("pending = %+v, want the %d entries not idle yet with the dead relay", p, n-1)
		}
		return nil
	})
	if l := rdb.XLen(ctx, key).Val(); l != n-1 {
		t.Fatalf("stream holds %d entries, want %d (the reclaimed one deleted)", l, n-1)
	}
}
