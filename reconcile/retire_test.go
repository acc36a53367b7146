package reconcile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/stock"
)

// end moves a sale's end into the past, in the database and in Redis, as
// if it had ended an hour ago.
func end(t *testing.T, rc *reconcile.Reconciler, id int64) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().Add(-time.Hour)
	if _, err := rc.Store.DB().ExecContext(ctx, "UPDATE sales SET ends_at = $1, starts_at = $2 WHERE id = $3", at, at.Add(-time.Hour), id); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().HSet(ctx, stock.KeysFor(id).Meta, "ends_ms", at.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
}

func loaded(t *testing.T, rc *reconcile.Reconciler, id int64) bool {
	t.Helper()
	sales, err := rc.Stock.Sales(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(sales, id)
}

// A sale retires from Redis once it has ended, its intents are started and
// every order of it is final; until then it stays.
func TestEndedSalesRetireOnceTheirWorkIsDone(t *testing.T) {
	ctx := context.Background()
	rc, id := sale(t, 5, 2) // two orders awaiting payment
	rc.RetireAfter = time.Minute
	var retiredSeen []int64
	rc.OnRetire = func(id int64) { retiredSeen = append(retiredSeen, id) }

	retire := func() []int64 {
		t.Helper()
		got, err := rc.Retire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := retire(); len(got) != 0 {
		t.Fatalf("a live sale was retired: %v", got)
	}
	end(t, rc, id)
	if got := retire(); len(got) != 0 {
		t.Fatalf("a sale with orders awaiting payment was retired: %v", got)
	}
	// Both orders end: one paid, one expired (its unit given back).
	if err := rc.Store.MarkPaid(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	expired := domain.OrderRef{OrderID: 1001, SaleID: id, UserID: "u1", AmountCents: 5}
	if _, err := rc.Store.FinishOrder(ctx, expired, domain.StatusExpired, "payment timeout"); err != nil {
		t.Fatal(err)
	}
	// An intent still waits for its workflow: the sale keeps its keys.
	keys := stock.KeysFor(id)
	rdb := rc.Stock.Client()
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Intents, Values: []string{"order_id", "77"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if got := retire(); len(got) != 0 || !loaded(t, rc, id) {
		t.Fatalf("a sale with an intent not yet started was retired: %v", got)
	}
	if err := rdb.Del(ctx, keys.Intents).Err(); err != nil {
		t.Fatal(err)
	}
	if got := retire(); len(got) != 1 || got[0] != id {
		t.Fatalf("retired %v, want sale %d", got, id)
	}
	if n := rdb.Exists(ctx, keys.All()...).Val(); n != 0 || loaded(t, rc, id) {
		t.Fatalf("%d keys of the retired sale remain in Redis (listed: %v)", n, loaded(t, rc, id))
	}
	if !slices.Equal(retiredSeen, []int64{id}) {
		t.Fatalf("OnRetire saw %v", retiredSeen)
	}
	// The database keeps the record.
	if o, err := rc.Store.Order(ctx, 1000); err != nil || o.Status != "PAID" {
		t.Fatalf("paid order after retirement: %+v, %v", o, err)
	}
	// A late release of the retired sale changes nothing in Redis.
	if released, err := rc.Stock.Release(ctx, id, "u1", 1001); err != nil || released {
		t.Fatalf("release after retirement = %v, %v", released, err)
	}
	if n := rdb.Exists(ctx, keys.All()...).Val(); n != 0 {
		t.Fatalf("a late release recreated %d keys", n)
	}
}

// A sale that ended less than RetireAfter ago keeps its keys.
func TestRecentlyEndedSalesKeepTheirKeys(t *testing.T) {
	ctx := context.Background()
	rc, id := sale(t, 5, 0)
	rc.RetireAfter = 2 * time.Hour
	end(t, rc, id)
	if got, err := rc.Retire(ctx); err != nil || len(got) != 0 || !loaded(t, rc, id) {
		t.Fatalf("retired %v, %v; want nothing within the grace period", got, err)
	}
}
