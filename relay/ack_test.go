package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/workflows"
)

// The relay's acknowledgement answers for the server it read the intents
// from. Here it reads an intent from an old primary that no replica
// confirmed; before its WAIT, the address it uses moves to a promoted
// server that never had the intent and has a replica of its own. The
// wait must fail (the intent stays pending), not be answered by the new
// primary: that would start a workflow for a purchase told UNCONFIRMED,
// which a keyed retry then admits again.
func TestRelayAcknowledgesOnTheServerItReadFrom(t *testing.T) {
	old := testenv.StartRedisServer(t, false) // no replica: nothing it takes is confirmed
	promoted := testenv.StartRedisServer(t, false)
	_, port, _ := net.SplitHostPort(promoted.Addr())
	testenv.StartRedisServer(t, false, "--replicaof", "127.0.0.1", port)
	ctx := context.Background()
	policy := redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond}

	direct := redis.NewClient(&redis.Options{Addr: promoted.Addr()})
	defer direct.Close()
	onPromoted := stock.New(direct, redsync.New(goredis.NewPool(direct)))
	onPromoted.Acknowledge(policy)
	testenv.Eventually(t, 30*time.Second, func() error { return onPromoted.AwaitReplicas(ctx) })

	// One admission on the old primary, taken while its replica was gone.
	oldClient := redis.NewClient(&redis.Options{Addr: old.Addr()})
	defer oldClient.Close()
	admit(t, stock.New(oldClient, redsync.New(goredis.NewPool(oldClient))), 51, 1)

	addr := testenv.NewProxy(t, old.Addr()) // the address every process uses
	rdb := redis.NewClient(&redis.Options{Addr: addr.Addr()})
	defer rdb.Close()
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	st.Acknowledge(policy)

	started := make(chan int64, 1)
	refused := make(chan struct{})
	var once sync.Once
	logs := slog.New(&hook{on: func(msg string) {
		if strings.Contains(msg, "not yet on a replica") {
			once.Do(func() { close(refused) })
		}
	}})
	var moved sync.Once
	r := relay.New(st, starterFunc(func(_ context.Context, in workflows.OrderInput) (bool, error) {
		select {
		case started <- in.Order.OrderID:
		default:
		}
		return true, nil
	}), relay.Options{Consumer: "a", Logger: logs, BeforeStart: func(context.Context, []int64) {
		// The intent is read. The old primary is cut off and the address
		// now names the promoted server.
		moved.Do(func() { addr.Retarget(promoted.Addr()); addr.Drop() })
	}})
	run(t, r)
	select {
	case id := <-started:
		t.Fatalf("order %d started: its intent was acknowledged by a server that never had it", id)
	case <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay neither started nor refused the intent within 30s")
	}
}

type starterFunc func(context.Context, workflows.OrderInput) (bool, error)

func (f starterFunc) Start(ctx context.Context, in workflows.OrderInput) (bool, error) {
	return f(ctx, in)
}

// hook is a slog handler that hands each record's message to on.
type hook struct{ on func(string) }

func (h *hook) Enabled(context.Context, slog.Level) bool      { return true }
func (h *hook) Handle(_ context.Context, r slog.Record) error { h.on(r.Message); return nil }
func (h *hook) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *hook) WithGroup(string) slog.Handler                 { return h }

// Intents read from a primary the fence no longer vouches for are not
// started, and their orders are handed to Options.Fenced, which records
// them (docs/design.md §3.14): their buyers were told 202 or UNCONFIRMED,
// and a failover loses them.
func TestRelayRecordsTheIntentsTheFenceStopped(t *testing.T) {
	primary := testenv.StartRedisServer(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer rdb.Close()
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	admit(t, st, 52, 1) // before the fence: admitted without acknowledgement
	// A fence no Sentinel ever confirmed does not hold.
	fence := redisack.NewFence(rdb, "seckill", nil, redis.Options{})
	defer fence.Close()
	st.Acknowledge(redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond, Fence: fence})

	started := make(chan int64, 1)
	fenced := make(chan []domain.OrderRef, 1)
	r := relay.New(st, starterFunc(func(_ context.Context, in workflows.OrderInput) (bool, error) {
		started <- in.Order.OrderID
		return true, nil
	}), relay.Options{Consumer: "a", Fenced: func(_ context.Context, orders []domain.OrderRef) error {
		select {
		case fenced <- orders:
		default:
		}
		return nil
	}})
	run(t, r)
	select {
	case id := <-started:
		t.Fatalf("order %d started with the fence closed", id)
	case orders := <-fenced:
		if len(orders) != 1 || orders[0].SaleID != 52 || orders[0].UserID == "" {
			t.Fatalf("fenced orders %+v, want the one admission of sale 52", orders)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the relay neither started nor recorded the intent within 30s")
	}
}

// A purchase the fence let through just before it closed may write its
// intent after the relay's last read of new entries. While the relay's own
// pending intents wait for the fence to open again, it goes on reading the
// new ones and hands their orders to Options.Fenced too: the old
// primary's demotion would discard an intent nobody read, and with it the
// only trace of a 202 (docs/design.md §3.14).
func TestRelayRecordsIntentsWrittenAfterTheFenceStoppedItsOwn(t *testing.T) {
	primary := testenv.StartRedisServer(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer rdb.Close()
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	ctx := context.Background()
	if _, err := st.Warm(ctx, stock.Sale{ID: 53, PriceCents: 100, Remaining: 5,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids := orderid.New(4)
	reserve := func(st *stock.Stock, user string) {
		t.Helper()
		id, err := ids.Next()
		if err == nil {
			_, err = st.Reserve(ctx, 53, user, id, "")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reserve(st, "buyer-0") // before the fence closed
	fence := redisack.NewFence(rdb, "seckill", nil, redis.Options{})
	defer fence.Close()
	st.Acknowledge(redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond, Fence: fence})

	var mu sync.Mutex
	recorded := map[string]bool{} // buyers handed to Fenced
	r := relay.New(st, starterFunc(func(_ context.Context, in workflows.OrderInput) (bool, error) {
		t.Errorf("order %d started with the fence closed", in.Order.OrderID)
		return true, nil
	}), relay.Options{Consumer: "a", Fenced: func(_ context.Context, orders []domain.OrderRef) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range orders {
			recorded[o.UserID] = true
		}
		return nil
	}})
	run(t, r)
	await := func(user string) {
		t.Helper()
		testenv.Eventually(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if !recorded[user] {
				return fmt.Errorf("%s's intent, written while the relay's own intents waited for the fence, was not handed to Fenced (handed: %v)", user, recorded)
			}
			return nil
		})
	}
	await("buyer-0")

	// The late purchase's intent lands now, written by a process whose
	// fence still held (no acknowledgement asked here).
	reserve(stock.New(rdb, redsync.New(goredis.NewPool(rdb))), "late-buyer")
	await("late-buyer")
}
