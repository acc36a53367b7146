package orders_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/stock"
)

// With acknowledged admission, an answer that names an order or says
// "sold out" is given only for state a replica holds (docs/design.md
// §3.13). The replica's link is cut: a buyer admitted meanwhile is told
// UNCONFIRMED, and so is their retry without a key (not 409 naming an
// order a failover would lose); a second buyer is told nothing was
// changed (not "sold out", while a failover would put the unit back).
// Once the replica has it all again, the true 409 and SOLD_OUT follow.
func TestAcknowledgedAnswersNameOnlyReplicatedState(t *testing.T) {
	primary := testenv.StartRedisServer(t, false)
	link := testenv.NewProxy(t, primary.Addr())
	_, linkPort, _ := net.SplitHostPort(link.Addr())
	testenv.StartRedisServer(t, false, "--replicaof", "127.0.0.1", linkPort)
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	st.Acknowledge(redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond})
	testenv.Eventually(t, 30*time.Second, func() error { return st.AwaitReplicas(ctx) }) // the replica is in sync
	const sale = 41
	now := time.Now()
	if _, err := st.Warm(ctx, stock.Sale{ID: sale, PriceCents: 100, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		Remaining: 1, Total: 1}); err != nil {
		t.Fatal(err)
	}
	svc := orders.New(orders.Config{}, orders.Deps{Stock: st, IDs: orderid.New(1)})
	buy := func(user string) (int64, error) {
		adm, err := svc.Purchase(ctx, orders.PurchaseRequest{SaleID: sale, UserID: user, ClientIP: "127.0.0.1"})
		return adm.OrderID, err
	}

	link.Cut()
	_, err := buy("alice")
	var unconfirmed *orders.UnconfirmedError
	if !errors.As(err, &unconfirmed) || unconfirmed.OrderID == 0 || unconfirmed.Held {
		t.Fatalf("alice with the replica cut off: %v, want UNCONFIRMED with her new order", err)
	}
	order := unconfirmed.OrderID
	_, err = buy("bob")
	if !errors.Is(err, domain.ErrUnavailable) || errors.Is(err, orders.ErrUnconfirmed) || errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("bob, sold out on the primary only: %v, want UNAVAILABLE (nothing taken), not SOLD_OUT", err)
	}
	_, err = buy("alice") // again, without an Idempotency-Key
	unconfirmed = nil
	if !errors.As(err, &unconfirmed) || unconfirmed.OrderID != order || !unconfirmed.Held {
		t.Fatalf("alice's retry: %v, want UNCONFIRMED naming her order %d as held, not 409", err, order)
	}

	link.Restore()
	testenv.Eventually(t, 30*time.Second, func() error {
		_, err := buy("bob")
		if !errors.Is(err, domain.ErrSoldOut) {
			return fmt.Errorf("bob: %v, want SOLD_OUT once the replica holds alice's unit", err)
		}
		return nil
	})
	// The sold-out flag is set now; alice's 409 still waits for the replica.
	_, err = buy("alice")
	var already *domain.AlreadyPurchasedError
	if !errors.As(err, &already) || already.OrderID != order || redisack.IsNotAcknowledged(err) {
		t.Fatalf("alice once confirmed: %v, want 409 naming order %d", err, order)
	}
	link.Cut()
	_, err = buy("alice")
	unconfirmed = nil
	if !errors.As(err, &unconfirmed) || !unconfirmed.Held {
		t.Fatalf("alice through the sold-out flag, replica cut: %v, want UNCONFIRMED (the flag's lookup does not wait)", err)
	}
}
