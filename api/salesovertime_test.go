package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// A shop runs sales for years: with 1,000 sales loaded in Redis (most
// tiny and long ended, a few live) purchases are answered as fast as with
// ten, the relay reads only the live streams on a bounded number of
// connections, and once the ended sales retire their keys leave Redis while
// their buyers still find their orders and get ENDED.
func TestThousandSalesOverTime(t *testing.T) {
	s := start(t, options{cfg: api.Config{UserRate: -1, SaleRate: -1}})
	ctx := context.Background()
	const withOrders = 20

	live := []wire.Sale{s.createSale(40), s.createSale(40), s.createSale(40)}
	var ended []int64
	endedSale := func(i int, buyers map[string]int64) {
		t.Helper()
		at := time.Now().Add(-time.Hour)
		sl, err := s.store.CreateSale(ctx, store.NewSale{Name: fmt.Sprintf("past %d", i), PriceCents: 100, Stock: 1,
			StartsAt: at.Add(-time.Hour), EndsAt: at})
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, sl.ID)
		remaining := 1
		for user, id := range buyers {
			ref := domain.OrderRef{OrderID: id, SaleID: sl.ID, UserID: user, AmountCents: 100}
			if err := s.store.DeductStock(ctx, ref); err != nil {
				t.Fatal(err)
			}
			if err := s.store.CreateOrder(ctx, ref); err != nil {
				t.Fatal(err)
			}
			if err := s.store.MarkPaid(ctx, id); err != nil {
				t.Fatal(err)
			}
			remaining--
		}
		if _, err := s.stock.Warm(ctx, stock.Sale{ID: sl.ID, PriceCents: 100, StartsAt: sl.StartsAt, EndsAt: sl.EndsAt,
			Remaining: remaining, Buyers: buyers}); err != nil {
			t.Fatal(err)
		}
	}
	// Ten sales loaded: the three live ones and seven ended.
	for i := range 7 {
		endedSale(i, nil)
	}
	latency10 := s.purchaseWave(live[0].ID, "ten", 40)

	// A thousand: 990 more ended sales, the first 20 with a paid order.
	var paidBuyers []string
	for i := range 990 {
		var buyers map[string]int64
		if i < withOrders {
			user := fmt.Sprintf("past-buyer-%02d", i)
			paidBuyers = append(paidBuyers, user)
			// An id minted two hours ago, as the sale's api would have.
			buyers = map[string]int64{user: orderid.FirstAt(time.Now().Add(-2*time.Hour)) + int64(i)}
		}
		endedSale(7+i, buyers)
	}
	if n := s.redis.SCard(ctx, stock.SalesKey).Val(); n != 1000 {
		t.Fatalf("%d sales loaded, want 1000", n)
	}
	latency1000 := s.purchaseWave(live[1].ID, "thousand", 40)
	t.Logf("purchase latency with 10 sales loaded: %s; with 1,000: %s", latency10, latency1000)

	// The relay reads the live sales only (it lists them every second),
	// with one blocking read, and the api's Redis pool never ran dry.
	testenv.Eventually(t, 10*time.Second, func() error {
		m := s.metrics()
		if m["seckill_relay_live_sales"] != 3 || m["seckill_relay_blocking_reads"] > 1 || m["seckill_relay_streams_read"] > 3 {
			return fmt.Errorf("relay: %v live sales, %v streams read, %v blocking reads; want 3, at most 3, at most 1",
				m["seckill_relay_live_sales"], m["seckill_relay_streams_read"], m["seckill_relay_blocking_reads"])
		}
		return nil
	})
	if st := s.redis.PoolStats(); st.Timeouts != 0 {
		t.Fatalf("the Redis pool timed out %d times (pool stats %+v)", st.Timeouts, *st)
	}

	// Every winner's order is written.
	testenv.Eventually(t, 2*time.Minute, func() error {
		n, err := s.store.Client().Order.Query().Where(order.StatusEQ(order.StatusAWAITING_PAYMENT)).Count(ctx)
		if err == nil && n != 80 {
			err = fmt.Errorf("%d of 80 orders awaiting payment", n)
		}
		return err
	})

	// The ended sales retire; the live ones stay.
	rc := &reconcile.Reconciler{Store: s.store, Stock: s.stock, RetireAfter: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	retired, err := rc.Retire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(retired)
	if !slices.Equal(retired, ended) {
		t.Fatalf("retired %d sales, want the %d ended ones", len(retired), len(ended))
	}
	pipe := s.redis.Pipeline()
	exists := make([]interface{ Val() int64 }, len(ended))
	for i, id := range ended {
		exists[i] = pipe.Exists(ctx, stock.KeysFor(id).All()...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range exists {
		if e.Val() != 0 {
			t.Fatalf("retired sale %d still has %d keys in Redis", ended[i], e.Val())
		}
	}
	if n := s.redis.SCard(ctx, stock.SalesKey).Val(); n != 3 {
		t.Fatalf("%d sales loaded after retirement, want the 3 live ones", n)
	}

	// Their buyers still find their orders, and buying again is ENDED
	// (from the database: the sale stays out of Redis).
	for i, user := range paidBuyers {
		r := s.do("GET", "/v1/orders", s.token(user, auth.RoleBuyer), nil)
		var orders []wire.Order
		r.decode(t, &orders)
		if r.status != http.StatusOK || len(orders) != 1 || orders[0].Status != domain.StatusPaid {
			t.Fatalf("%s's orders after retirement: %d %s", user, r.status, r.body)
		}
		sale := strconv.FormatInt(ended[7+i], 10)
		if got := s.buy(sale, user); got.status != http.StatusConflict || got.problem(t).Code != wire.CodeEnded {
			t.Fatalf("buying a retired sale: %d %s, want ENDED", got.status, got.body)
		}
		if n := s.redis.Exists(ctx, stock.KeysFor(ended[7+i]).Meta).Val(); n != 0 {
			t.Fatal("a purchase loaded a retired sale back into Redis")
		}
	}

	// The invariants hold for every sale, retired or live.
	for _, id := range append(ended, idsOf(live)...) {
		r, err := audit.Sale(ctx, audit.Sources{Store: s.store, Stock: s.stock}, id, audit.Expect{Settled: true})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("sale %d:\n%s", id, r)
		}
	}
}

func idsOf(sales []wire.Sale) []int64 {
	ids := make([]int64, len(sales))
	for i, sl := range sales {
		ids[i], _ = strconv.ParseInt(sl.ID, 10, 64)
	}
	return ids
}

// purchaseWave has n buyers buy one unit of sale at once and returns the
// median answer time; every answer must be a 202 or a business 409.
func (s *system) purchaseWave(sale, prefix string, n int) time.Duration {
	s.t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		times []time.Duration
	)
	for i := range n {
		wg.Go(func() {
			begin := time.Now()
			r := s.buy(sale, fmt.Sprintf("%s-%03d", prefix, i))
			d := time.Since(begin)
			mu.Lock()
			defer mu.Unlock()
			times = append(times, d)
			if r.status != http.StatusAccepted && r.status != http.StatusConflict {
				s.t.Errorf("purchase answered %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	slices.Sort(times)
	return times[len(times)/2]
}

// metrics reads the api's registry, as the binary's metrics listener
// serves it, into name → value (unlabelled series).
func (s *system) metrics() map[string]float64 {
	s.t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(s.srv.Registry(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
