package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// sale sets up a sale of units where `sold` buyers hold live orders, as
// the saga leaves it: stock deducted, order rows written, Redis reserved.
func sale(t *testing.T, units, sold int) (*reconcile.Reconciler, int64) {
	t.Helper()
	ctx := context.Background()
	db := testenv.Store(t)
	rdb, _ := testenv.Redis(t)
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	sl, err := db.CreateSale(ctx, store.NewSale{Name: "r", PriceCents: 5, Stock: units,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Warm(ctx, stock.Sale{ID: sl.ID, PriceCents: 5, Remaining: units, StartsAt: sl.StartsAt, EndsAt: sl.EndsAt}); err != nil {
		t.Fatal(err)
	}
	for i := range sold {
		ref := domain.OrderRef{OrderID: int64(1000 + i), SaleID: sl.ID, UserID: fmt.Sprintf("u%d", i), AmountCents: 5}
		if _, err := st.Reserve(ctx, sl.ID, ref.UserID, ref.OrderID, ""); err != nil {
			t.Fatal(err)
		}
		if err := db.DeductStock(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateOrder(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	// The relay would have consumed the intents, taking their orders off
	// the line.
	if err := rdb.Del(ctx, stock.KeysFor(sl.ID).Intents, stock.KeysFor(sl.ID).Line).Err(); err != nil {
		t.Fatal(err)
	}
	return &reconcile.Reconciler{Store: db, Stock: st, Grace: time.Nanosecond}, sl.ID
}

func settled(t *testing.T, rc *reconcile.Reconciler, id int64) {
	t.Helper()
	r, err := audit.Sale(context.Background(), audit.Sources{Store: rc.Store, Stock: rc.Stock}, id, audit.Expect{Settled: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatal(r)
	}
}

func TestRedisDataLossIsRebuiltFromTheDatabase(t *testing.T) {
	rc, id := sale(t, 10, 4)
	ctx := context.Background()
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil { // Redis restarted without persistence
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || !rep.Rebuilt {
		t.Fatalf("report %+v, %v; want rebuilt", rep, err)
	}
	settled(t, rc, id)
	// No unit is sold twice afterwards: the earlier buyers still hold theirs.
	var already *domain.AlreadyPurchasedError
	if _, err := rc.Stock.Reserve(ctx, id, "u0", 99, ""); !errors.As(err, &already) || already.OrderID != 1000 {
		t.Fatalf("earlier buyer buying again after the rebuild: %v", err)
	}
	won := 0
	for i := range 20 {
		if _, err := rc.Stock.Reserve(ctx, id, fmt.Sprintf("new%d", i), int64(2000+i), ""); err == nil {
			won++
		}
	}
	if won != 6 {
		t.Fatalf("%d new buyers admitted after the rebuild, want the 6 units left", won)
	}
	// A second pass changes nothing.
	if rep, err := rc.Sale(ctx, id); err != nil || rep.Rebuilt {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
}

func TestDriftIsRepaired(t *testing.T) {
	rc, id := sale(t, 10, 3)
	ctx := context.Background()
	keys := stock.KeysFor(id)
	rdb := rc.Stock.Client()
	// Drift of three kinds: a wrong count, a forgotten buyer, and the
	// reservation of an order that ended without its release.
	rdb.Set(ctx, keys.Stock, 9, 0)
	rdb.HDel(ctx, keys.Buyers, "u1")
	if _, err := rc.Store.FinishOrder(ctx, domain.OrderRef{OrderID: 1002, SaleID: id, UserID: "u2", AmountCents: 5}, domain.StatusCancelled, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Store.RestoreStock(ctx, domain.OrderRef{OrderID: 1002, SaleID: id}); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BuyersRestored != 1 || rep.StaleReleased != 1 || !rep.RemainingFixed || rep.RemainingNow != 8 {
		t.Fatalf("report %+v", rep)
	}
	settled(t, rc, id)
}

func TestOrdersInFlightAreLeftAlone(t *testing.T) {
	rc, id := sale(t, 10, 2)
	ctx := context.Background()
	// Admitted, its workflow has not written it yet: Redis is ahead of the
	// database, rightly.
	if _, err := rc.Stock.Reserve(ctx, id, "fresh", 5000, ""); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || rep.Repaired() || rep.SkippedInFlight != 1 {
		t.Fatalf("report %+v, %v; want nothing repaired and one order in flight", rep, err)
	}
	if left, _ := rc.Stock.Remaining(ctx, id); left != 7 {
		t.Fatalf("remaining = %d, want 7", left)
	}
}
