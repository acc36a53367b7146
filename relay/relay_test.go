package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/workflows"
)

// admit warms a sale and reserves n units for n buyers, queueing n intents.
func admit(t *testing.T, st *stock.Stock, sale int64, n int) { admitB(t, st, sale, n) }

func admitB(t testing.TB, st *stock.Stock, sale int64, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Warm(ctx, stock.Sale{ID: sale, PriceCents: 100, Remaining: n,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids := orderid.New(3)
	for i := range n {
		id, err := ids.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reserve(ctx, sale, fmt.Sprintf("buyer-%d", i), id, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func newStock(t *testing.T) (*stock.Stock, *redis.Client) { return newStockB(t) }

func newStockB(t testing.TB) (*stock.Stock, *redis.Client) {
	rdb, _ := testenv.Redis(t)
	return stock.New(rdb, redsync.New(goredis.NewPool(rdb))), rdb
}

// workflowsOf counts the order workflows of a sale that Temporal knows.
func workflowsOf(ctx context.Context, c client.Client, sale int64) (int64, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf("SaleId = '%d'", sale),
	})
	return resp.GetCount(), err
}

func run(t *testing.T, r *relay.Relay) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func TestIntentsQueuedWhileTemporalIsDownAllStart(t *testing.T) {
	st, rdb := newStock(t)
	tp := testenv.NewTemporal(t) // not running yet
	c := tp.Client()
	admit(t, st, 1, 30)

	r := relay.New(st, relay.NewTemporalStarter(c), relay.Options{Consumer: "a"})
	run(t, r)
	// The relay is trying and failing; nothing is lost meanwhile.
	testenv.Eventually(t, 30*time.Second, func() error {
		if r.Counts().Failures == 0 {
			return fmt.Errorf("no start attempted yet")
		}
		return nil
	})
	if n := rdb.XLen(context.Background(), stock.KeysFor(1).Intents).Val(); n != 30 {
		t.Fatalf("backlog while Temporal is down = %d, want 30", n)
	}
	// A failed start leaves its order in line.
	if n := rdb.ZCard(context.Background(), stock.KeysFor(1).Line).Val(); n != 30 {
		t.Fatalf("line while Temporal is down = %d, want 30", n)
	}

	tp.Start()
	ctx := context.Background()
	testenv.Eventually(t, 60*time.Second, func() error {
		if got := r.Counts().Created; got != 30 {
			return fmt.Errorf("%d of 30 workflows started", got)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		n, err := workflowsOf(ctx, c, 1)
		if err == nil && n != 30 {
			err = fmt.Errorf("temporal lists %d order workflows, want 30", n)
		}
		return err
	})
	// The started orders left the stream and the line together, and count
	// as departures.
	k := stock.KeysFor(1)
	testenv.Eventually(t, 30*time.Second, func() error {
		if x, l, n := rdb.XLen(ctx, k.Intents).Val(), rdb.ZCard(ctx, k.Line).Val(), rdb.Get(ctx, k.Started).Val(); x != 0 || l != 0 || n != "30" {
			return fmt.Errorf("after the starts: backlog %d, line %d, departures %q; want 0, 0, 30", x, l, n)
		}
		return nil
	})
}

// A malformed intent is dropped, and its order leaves the line with it.
func TestMalformedIntentLeavesTheLine(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	admit(t, st, 5, 0)
	k := stock.KeysFor(5)
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Intents, Values: []any{stock.IntentOrderID, "77", stock.IntentSaleID, "5"}})
	rdb.ZAdd(ctx, k.Line, redis.Z{Score: 1, Member: "77"})
	r := relay.New(st, relay.NewTemporalStarter(testenv.NewTemporal(t).Client()), relay.Options{Consumer: "a"})
	run(t, r)
	testenv.Eventually(t, 30*time.Second, func() error {
		if c := r.Counts(); c.Dropped != 1 {
			return fmt.Errorf("%d dropped", c.Dropped)
		}
		if x, l := rdb.XLen(ctx, k.Intents).Val(), rdb.Exists(ctx, k.Line).Val(); x != 0 || l != 0 {
			return fmt.Errorf("backlog %d, line exists %d", x, l)
		}
		return nil
	})
}

func TestCrashedRelaysIntentsAreReclaimedOnce(t *testing.T) {
	st, rdb := newStock(t)
	tp := testenv.StartTemporal(t)
	c := tp.Client()
	ctx := context.Background()
	const n = 40
	admit(t, st, 2, n)

	// Relay "doomed" reads the intents and dies before starting any.
	crashed := make(chan struct{})
	var once sync.Once
	doomedCtx, kill := context.WithCancel(ctx)
	doomed := relay.New(st, relay.NewTemporalStarter(c), relay.Options{
		Consumer: "doomed",
		BeforeStart: func(context.Context, []int64) {
			once.Do(func() { kill(); close(crashed) })
		},
	})
	go func() { _ = doomed.Run(doomedCtx) }()
	<-crashed
	pending, err := rdb.XPending(ctx, stock.KeysFor(2).Intents, "relay").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != n || pending.Consumers["doomed"] != n {
		t.Fatalf("pending = %+v, want all %d held by the crashed relay", pending, n)
	}

	// Two live relays share the group; whoever reclaims, each order starts once.
	opts := relay.Options{MinIdle: 500 * time.Millisecond}
	var relays []*relay.Relay
	for _, name := range []string{"b", "c"} {
		o := opts
		o.Consumer = name
		r := relay.New(st, relay.NewTemporalStarter(tp.Client()), o) // a client each, like separate api instances
		relays = append(relays, r)
		run(t, r)
	}
	created := func() int64 {
		var sum int64
		for _, r := range relays {
			sum += r.Counts().Created
		}
		return sum
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if got := created(); got != n {
			return fmt.Errorf("%d of %d workflows started", got, n)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		got, err := workflowsOf(ctx, c, 2)
		if err == nil && got != n {
			err = fmt.Errorf("temporal lists %d order workflows, want %d", got, n)
		}
		return err
	})
	if got := created(); got != n {
		t.Fatalf("relays created %d workflows, want exactly %d", got, n)
	}
	// Each batch is acknowledged after its starts were counted: wait for it.
	testenv.Eventually(t, 10*time.Second, func() error {
		if p, err := rdb.XPending(ctx, stock.KeysFor(2).Intents, "relay").Result(); err != nil || p.Count != 0 {
			return fmt.Errorf("%d intents still pending (%v)", p.Count, err)
		}
		return nil
	})
}

func TestStartIsIdempotentPerOrder(t *testing.T) {
	tp := testenv.StartTemporal(t)
	starter := relay.NewTemporalStarter(tp.Client())
	ctx := context.Background()
	in := workflows.OrderInput{Order: domain.OrderRef{OrderID: 77, SaleID: 3, UserID: "u", AmountCents: 1}}
	for i, want := range []bool{true, false, false} {
		created, err := starter.Start(ctx, in)
		if err != nil || created != want {
			t.Fatalf("start #%d: created=%v err=%v; want created=%v", i+1, created, err, want)
		}
	}
}

// An order id minted twice: the second order's start meets the first's
// workflow. It is a collision, not a duplicate of the same order: the
// starter says so, and the relay never acknowledges that intent.
func TestStartOfAnotherOrderUnderTheSameIDIsACollision(t *testing.T) {
	tp := testenv.StartTemporal(t)
	starter := relay.NewTemporalStarter(tp.Client())
	ctx := context.Background()
	first := workflows.OrderInput{Order: domain.OrderRef{OrderID: 78, SaleID: 3, UserID: "u", AmountCents: 1}}
	if created, err := starter.Start(ctx, first); err != nil || !created {
		t.Fatalf("first start: %v %v", created, err)
	}
	for _, other := range []domain.OrderRef{
		{OrderID: 78, SaleID: 3, UserID: "someone-else", AmountCents: 1},
		{OrderID: 78, SaleID: 4, UserID: "u", AmountCents: 1},
	} {
		created, err := starter.Start(ctx, workflows.OrderInput{Order: other})
		var col *relay.CollisionError
		if created || !errors.As(err, &col) || col.SaleID != "3" || col.UserID != "u" {
			t.Fatalf("start of %+v under a taken id: created=%v err=%v; want a CollisionError naming sale 3, user u", other, created, err)
		}
	}
	if created, err := starter.Start(ctx, first); err != nil || created {
		t.Fatalf("the same order again: created=%v err=%v; want a duplicate", created, err)
	}
}
