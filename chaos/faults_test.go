package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/stock"
)

// postgresHostPort is where the test Postgres listens.
func postgresHostPort(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(os.Getenv("SECKILL_TEST_DATABASE_URL"))
	if err != nil || u.Host == "" {
		testenv.DatabaseURL(t) // skips or fails as configured
		t.Fatalf("SECKILL_TEST_DATABASE_URL has no host: %v", err)
	}
	return u.Host
}

// viaProxy is a fresh test database reached through proxy.
func viaProxy(t *testing.T, proxy *testenv.Proxy) string {
	t.Helper()
	u, err := url.Parse(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	return u.String()
}

func mustParseRedisURL(t *testing.T, s string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// (a) The worker is SIGKILLed in the middle of the sagas and comes back
// 5 s later: every order reaches its end, and the ledger shows no
// duplicate stock movement (the audit checks it per order).
func TestWorkerKilledMidSaga(t *testing.T) {
	t.Parallel()
	c := start(t, setup{})
	c.startWorker("worker")
	w := c.wave(c.apis[0])
	c.waitFor(c.apis[0], "sagas under way", func(st bench.Stats) bool { return created(st) >= 25 })
	c.kill("worker")
	time.Sleep(5 * time.Second) // the outage itself, not a synchronisation
	c.startWorker("worker")
	w.finish("worker SIGKILLed mid-saga, restarted 5 s later", "workflows resumed on the new worker; activities idempotent by order id")
}

// (b) Temporal is down for 10 s while buyers are still buying: purchases
// keep getting 202, the intents queue in Redis and every order completes
// once Temporal is back.
func TestTemporalDownDuringTheWave(t *testing.T) {
	t.Parallel()
	c := start(t, setup{})
	c.startWorker("worker")
	w := c.wave(c.apis[0])
	c.waitFor(c.apis[0], "the sale to exist", func(bench.Stats) bool { return true })
	c.Temporal.Stop()
	time.Sleep(10 * time.Second) // the outage
	c.Temporal.Start()
	w.finish("Temporal server stopped for 10 s during the wave", "purchases answered 202 throughout; intents queued in Redis and were started when Temporal returned")
	if n := w.result.Outcomes["UNAVAILABLE"]; n != 0 {
		t.Fatalf("%d purchases answered 503 while only Temporal was down", n)
	}
}

// (c) Postgres refuses connections for 10 s while activities run: they
// retry and the orders complete; compensations balance exactly.
func TestPostgresDownDuringActivities(t *testing.T) {
	t.Parallel()
	proxy := testenv.NewProxy(t, postgresHostPort(t))
	c := start(t, setup{databaseURL: viaProxy(t, proxy)})
	c.startWorker("worker")
	w := c.wave(c.apis[0])
	c.waitFor(c.apis[0], "sagas under way", func(st bench.Stats) bool { return created(st) >= 25 })
	proxy.Cut()
	time.Sleep(10 * time.Second) // the outage
	proxy.Restore()
	w.finish("Postgres connections refused for 10 s during the sagas", "activities retried with backoff; every order completed, compensations balanced")
}

// (d) The api is SIGKILLed after reserve.lua admitted buyers and its relay
// read their intents, but before it started their workflows (a test hook
// holds its relay): an api started after the kill reclaims the intents the
// dead relay had read, reads the rest, and starts each order exactly once.
// The second api starts only then: a relay running beside the doomed one
// would read the intents first as often as not, and there would be nothing
// to reclaim.
func TestAPIKilledBetweenReserveAndStart(t *testing.T) {
	t.Parallel()
	_, db := testenv.Redis(t)
	redisURL := testenv.RedisURL(testenv.RedisAddr(t), db)
	// The doomed relay must take the intents as they come: while its api has
	// purchases in flight it would otherwise yield (--relay-yield) and leave
	// them to the other relay, and there would be nothing to crash on.
	c := start(t, setup{redisAddr: redisURL, apiEnv: [][]string{{"SECKILL_RELAY_START_DELAY=1h", "SECKILL_RELAY_YIELD=0"}}})
	c.startWorker("worker")
	doomed := c.apis[0]
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := signer.Mint("chaos-admin", auth.RoleAdmin, time.Hour)
	ctx := context.Background()
	sale, err := client.New(doomed, admin, nil).CreateSale(ctx, wire.CreateSaleBody{Name: "chaos", PriceCents: 1, Stock: units,
		StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// Buyers all go to the doomed api, whose relay reads their intents and
	// then holds them.
	var (
		mu     sync.Mutex
		orders = map[string]string{} // order id -> token
		wg     sync.WaitGroup
		next   = make(chan int)
	)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				tok, _ := signer.Mint(fmt.Sprintf("d-%d", i), auth.RoleBuyer, time.Hour)
				if p, err := client.New(doomed, tok, nil).Purchase(ctx, sale.ID, ""); err == nil {
					mu.Lock()
					orders[p.OrderID] = tok
					mu.Unlock()
				}
			}
		})
	}
	for i := range buyers {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(orders) != units {
		t.Fatalf("%d purchases accepted, want %d", len(orders), units)
	}
	rdb := redis.NewClient(mustParseRedisURL(t, redisURL))
	defer rdb.Close()
	var saleID int64
	fmt.Sscan(sale.ID, &saleID)
	stream := stock.KeysFor(saleID).Intents
	// The doomed relay reads a batch and holds it; how many of the intents
	// that batch has depends on when its relay listed the sale.
	var read int64
	testenv.Eventually(t, time.Minute, func() error {
		p, err := rdb.XPending(context.Background(), stream, "relay").Result()
		if err != nil || p.Count == 0 {
			return fmt.Errorf("pending %+v %v: the doomed relay has read no intent yet", p, err)
		}
		read = p.Count
		return nil
	})
	c.kill("api-0")
	killed := time.Now()
	survivor := c.startAPI(nil)
	c.waitFor(survivor, "every order written", func(st bench.Stats) bool { return st.Orders["AWAITING_PAYMENT"] == units })
	reclaimed := time.Since(killed)
	for id, tok := range orders {
		if err := payAtProvider(ctx, client.New(survivor, tok, nil), id); err != nil {
			t.Fatalf("pay %s: %v", id, err)
		}
	}
	out := c.auditQuiescent(sale.ID)
	record("api SIGKILLed after reserve.lua, before its relay started the workflows",
		fmt.Sprintf("an api started after the kill reclaimed the %d intents the dead relay had read (XAUTOCLAIM), read the rest and started each order once", read),
		bench.Result{Accepted: len(orders), Paid: len(orders), CreatedSeconds: reclaimed.Seconds(),
			Lost: paidByID(len(orders))}, out)
}

// (e) Redis restarts after the wave: without persistence the reconciler
// rebuilds every live sale from Postgres and no unit is sold twice; with
// AOF nothing is lost.
func TestRedisRestartAfterTheWave(t *testing.T) {
	t.Parallel()
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprintf("aof=%v", aof), func(t *testing.T) {
			r := testenv.StartRedisServer(t, aof)
			c := start(t, setup{redisAddr: r.Addr()})
			c.startWorker("worker")
			w := c.wave(c.apis[0])
			<-w.done
			r.Restart()
			behaviour := "AOF replayed: nothing lost, nothing to repair"
			if !aof {
				behaviour = "Redis came back empty; the worker's reconciler rebuilt the sale from Postgres under the redsync lock"
			}
			w.finish(fmt.Sprintf("Redis restarted after the wave (AOF %v)", map[bool]string{true: "on", false: "off"}[aof]), behaviour)
			// No unit sold twice: a second wave on the same sale finds only
			// the cancelled units.
			st, _, err := c.saleStats(c.apis[0])
			if err != nil {
				t.Fatal(err)
			}
			if st.RedisRemaining != st.DBStock {
				t.Fatalf("after the restart redis %d != db %d", st.RedisRemaining, st.DBStock)
			}
		})
	}
}

// (f) Two apis and two workers; one worker is killed three times during
// the wave.
func TestWorkerKilledRepeatedly(t *testing.T) {
	t.Parallel()
	c := start(t, setup{apiEnv: [][]string{nil, nil}})
	c.startWorker("worker-a")
	c.startWorker("worker-b")
	w := c.wave(c.apis[1])
	for i, at := range []int{25, 100, 200} {
		c.waitFor(c.apis[0], fmt.Sprintf("%d orders", at), func(st bench.Stats) bool { return created(st) >= at })
		c.kill("worker-a")
		c.startWorker("worker-a")
		t.Logf("worker-a killed and restarted (%d)", i+1)
	}
	w.finish("two apis, two workers; one worker SIGKILLed 3 times during the wave", "the surviving worker and each restarted one picked up the open workflows")
}

// (h) A real process exit at a fault point (SECKILL_FAULTS, docs/
// reliability.md): an api whose relay exits, with no deferred cleanup,
// right after it started an order's workflow and before it acknowledged the
// intent. The other api's relay reclaims the intent, meets the workflow the
// dead one started (the same order), acknowledges it, and the wave ends
// clean.
func TestAPIExitsBetweenStartAndAck(t *testing.T) {
	t.Parallel()
	c := start(t, setup{apiEnv: [][]string{{"SECKILL_FAULTS=relay.start=exit", "SECKILL_RELAY_YIELD=0"}, nil}})
	c.startWorker("worker")
	doomed, survivor := c.procs["api-0"], c.apis[1]
	w := c.wave(survivor)
	testenv.Eventually(t, 3*time.Minute, func() error {
		if !doomed.Exited() {
			return fmt.Errorf("the doomed api has not reached relay.start yet")
		}
		return nil
	})
	if code := doomed.ExitCode(); code != 70 {
		t.Fatalf("the doomed api exited %d, want 70 (the fault point's exit)", code)
	}
	w.finish("api exits at relay.start (workflow started, intent not acknowledged)", "the other api's relay reclaimed the intent, found the same order's workflow and acknowledged it")
}
