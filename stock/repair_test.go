package stock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/stock"
)

// restocks subscribes to RestockChannel and returns a function that
// reports whether sale was announced within a second. Pub/Sub ignores the
// database number, so other tests' announcements arrive too: only sale's
// count.
func restocks(t *testing.T, rdb *redis.Client, sale int64) func() bool {
	t.Helper()
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, stock.RestockChannel)
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription is live
		t.Fatal(err)
	}
	ch := sub.Channel()
	want := strconv.FormatInt(sale, 10)
	return func() bool {
		timeout := time.After(time.Second)
		for {
			select {
			case m := <-ch:
				if m.Payload == want {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
}

func snapshot(t *testing.T, st *stock.Stock, sale int64) stock.Snapshot {
	t.Helper()
	snap, err := st.Snapshot(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestSnapshotReadsTheSale(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	if snap := snapshot(t, st, 101); snap.Warm || len(snap.Buyers) != 0 {
		t.Fatalf("snapshot of an unloaded sale: %+v", snap)
	}
	openSale(t, st, 101, 5)
	if _, err := st.Reserve(ctx, 101, "ann", 1<<60+1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, 101, "ben", 2, ""); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, st, 101)
	if !snap.Warm || snap.Remaining != 3 || snap.Backlog != 2 || len(snap.Buyers) != 2 ||
		snap.Buyers["ann"] != 1<<60+1 || snap.Buyers["ben"] != 2 {
		t.Fatalf("snapshot = %+v", snap)
	}
	// Every change moves the version: the load, each admission, a release.
	if _, err := st.Release(ctx, 101, "ben", 2); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, st, 101); after.Version <= snap.Version {
		t.Fatalf("version %d after a release, %d before", after.Version, snap.Version)
	}
	// A refused purchase or a release of nothing changes nothing.
	v := snapshot(t, st, 101).Version
	if _, err := st.Reserve(ctx, 101, "ann", 3, ""); err == nil {
		t.Fatal("second purchase admitted")
	}
	if ok, _ := st.Release(ctx, 101, "ben", 2); ok {
		t.Fatal("second release released")
	}
	if after := snapshot(t, st, 101).Version; after != v {
		t.Fatalf("version moved from %d to %d with nothing changed", v, after)
	}
}

func TestRepairAppliesOnlyToTheSaleItRead(t *testing.T) {
	plan := stock.RepairPlan{SetRemaining: true, Remaining: 9}
	for _, tc := range []struct {
		name    string
		between func(ctx context.Context, st *stock.Stock) error
	}{
		{"a purchase", func(ctx context.Context, st *stock.Stock) error {
			_, err := st.Reserve(ctx, 102, "new", 50, "")
			return err
		}},
		{"a release", func(ctx context.Context, st *stock.Stock) error {
			_, err := st.Release(ctx, 102, "old", 40)
			return err
		}},
		{"a release of an order Redis had lost", func(ctx context.Context, st *stock.Stock) error {
			_, err := st.Release(ctx, 102, "gone", 41)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := newStock(t)
			ctx := context.Background()
			openSale(t, st, 102, 5)
			if _, err := st.Reserve(ctx, 102, "old", 40, ""); err != nil {
				t.Fatal(err)
			}
			snap := snapshot(t, st, 102)
			if err := tc.between(ctx, st); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, st, 102)
			res, err := st.Repair(ctx, 102, snap.Version, plan)
			if err != nil || res.Applied {
				t.Fatalf("repair after %s: %+v, %v; want not applied", tc.name, res, err)
			}
			if after := snapshot(t, st, 102); after.Remaining != before.Remaining || after.Version != before.Version {
				t.Fatalf("a refused repair changed the sale: %+v, was %+v", after, before)
			}
		})
	}
}

func TestRepairNeverRestoresAReleasedOrder(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 103, 5)
	if _, err := st.Reserve(ctx, 103, "cat", 60, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, 103, "cat", 60); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	// A reconciler whose database view still shows order 60 live, and a
	// snapshot taken after the release: only the tombstone stands between
	// cat and a unit of a cancelled order.
	snap := snapshot(t, st, 103)
	res, err := st.Repair(ctx, 103, snap.Version, stock.RepairPlan{
		RestoreBuyers: map[string]int64{"cat": 60, "dan": 61},
	})
	if err != nil || !res.Applied || res.BuyersRestored != 1 || res.BuyersRefused != 1 {
		t.Fatalf("repair = %+v, %v; want dan restored and cat refused", res, err)
	}
	if _, ok, _ := st.Holder(ctx, 103, "cat"); ok {
		t.Fatal("cat holds a unit of a released order")
	}
	if id, ok, _ := st.Holder(ctx, 103, "dan"); !ok || id != 61 {
		t.Fatalf("dan holds %d, %v; want 61", id, ok)
	}
	// cat may buy again, under a new order.
	if id, err := st.Reserve(ctx, 103, "cat", 62, ""); err != nil || id != 62 {
		t.Fatalf("cat buying again: %d, %v", id, err)
	}
}

func TestRepairReleasesAndAnnouncesRestock(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 104, 2)
	for i, user := range []string{"eve", "fay"} {
		if _, err := st.Reserve(ctx, 104, user, int64(70+i), "key-"+user); err != nil {
			t.Fatal(err)
		}
	}
	announced := restocks(t, rdb, 104)
	snap := snapshot(t, st, 104)
	res, err := st.Repair(ctx, 104, snap.Version, stock.RepairPlan{
		// fay's entry holds another order: left alone.
		Release: map[string]int64{"eve": 70, "fay": 99},
	})
	if err != nil || !res.Applied || res.Released != 1 || res.RemainingWas != 0 || res.RemainingNow != 1 {
		t.Fatalf("repair = %+v, %v; want eve's unit released", res, err)
	}
	if !announced() {
		t.Fatal("the released unit was not announced")
	}
	if id, ok, _ := st.Holder(ctx, 104, "fay"); !ok || id != 71 {
		t.Fatalf("fay holds %d, %v; want 71", id, ok)
	}
	// Released as release.lua does: tombstoned, Idempotency-Key forgotten.
	res, err = st.Repair(ctx, 104, snapshot(t, st, 104).Version, stock.RepairPlan{RestoreBuyers: map[string]int64{"eve": 70}})
	if err != nil || res.BuyersRefused != 1 {
		t.Fatalf("restoring eve after the release: %+v, %v; want refused", res, err)
	}
	if id, err := st.Reserve(ctx, 104, "eve", 72, "key-eve"); err != nil || id != 72 {
		t.Fatalf("eve buying again with her old key = %d, %v; want the new order 72", id, err)
	}
}

func TestRepairSetsTheCountAfterTheReleases(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 105, 1)
	if _, err := st.Reserve(ctx, 105, "gil", 80, ""); err != nil {
		t.Fatal(err)
	}
	announced := restocks(t, rdb, 105)
	snap := snapshot(t, st, 105)
	// The release takes the count to 1, then it is set to 3.
	res, err := st.Repair(ctx, 105, snap.Version, stock.RepairPlan{
		Release: map[string]int64{"gil": 80}, SetRemaining: true, Remaining: 3,
	})
	if err != nil || !res.Applied || res.Released != 1 || res.RemainingNow != 3 {
		t.Fatalf("repair = %+v, %v", res, err)
	}
	if !announced() {
		t.Fatal("a higher count was not announced")
	}
	if left, _ := st.Remaining(ctx, 105); left != 3 {
		t.Fatalf("remaining = %d, want 3", left)
	}
	// A lower count is set too, and the version moves: a second repair
	// from the same snapshot is stale.
	snap = snapshot(t, st, 105)
	if res, err := st.Repair(ctx, 105, snap.Version, stock.RepairPlan{SetRemaining: true, Remaining: 2}); err != nil || !res.Applied || res.RemainingNow != 2 {
		t.Fatalf("lowering the count: %+v, %v", res, err)
	}
	if res, err := st.Repair(ctx, 105, snap.Version, stock.RepairPlan{SetRemaining: true, Remaining: 5}); err != nil || res.Applied {
		t.Fatalf("repair from a used snapshot: %+v, %v; want not applied", res, err)
	}
}

func TestRepairOfAnUnloadedSaleDoesNothing(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 106, 1)
	snap := snapshot(t, st, 106)
	// Redis lost the sale but not its version (say, a retirement dropped
	// the hot keys): a repair must not recreate a half sale.
	if err := rdb.Del(ctx, stock.KeysFor(106).Meta, stock.KeysFor(106).Stock).Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Repair(ctx, 106, snap.Version, stock.RepairPlan{SetRemaining: true, Remaining: 1}); err != nil || res.Applied {
		t.Fatalf("repair = %+v, %v; want not applied", res, err)
	}
	if n := rdb.Exists(ctx, stock.KeysFor(106).Stock).Val(); n != 0 {
		t.Fatal("the repair wrote the count of an unloaded sale")
	}
}

func TestWarmSkipsReleasedOrdersAndKeepsTheVersionMoving(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 107, 2)
	if _, err := st.Reserve(ctx, 107, "hal", 90, ""); err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.Release(ctx, 107, "hal", 90); !ok {
		t.Fatal("release failed")
	}
	before := snapshot(t, st, 107)
	// The sale's meta is lost, and a warm-up reads the database while
	// hal's saga is still ending order 90: the database shows it live.
	if err := rdb.Del(ctx, stock.KeysFor(107).Meta).Err(); err != nil {
		t.Fatal(err)
	}
	if loaded, err := st.Warm(ctx, stock.Sale{ID: 107, Remaining: 1, StartsAt: time.Now().Add(-time.Minute),
		EndsAt: time.Now().Add(time.Hour), Buyers: map[string]int64{"hal": 90, "ivy": 91}}); err != nil || !loaded {
		t.Fatalf("warm: %v, %v", loaded, err)
	}
	after := snapshot(t, st, 107)
	if _, ok := after.Buyers["hal"]; ok || after.Buyers["ivy"] != 91 {
		t.Fatalf("buyers after the warm-up = %v; want ivy only", after.Buyers)
	}
	if after.Version <= before.Version {
		t.Fatalf("version %d after the load, %d before", after.Version, before.Version)
	}
}

func TestLookupAnswersWhatReserveWould(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	now := time.Now()
	for _, s := range []stock.Sale{
		{ID: 108, Remaining: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)},
		{ID: 109, Remaining: 5, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)},
		{ID: 110, Remaining: 5, StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)},
	} {
		if _, err := st.Warm(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func(sale int64, user, key string) (int64, bool, error) {
		t.Helper()
		before := snapshot(t, st, sale)
		id, open, err := st.Lookup(ctx, sale, user, key)
		if after := snapshot(t, st, sale); after.Version != before.Version || after.Remaining != before.Remaining {
			t.Fatalf("lookup changed sale %d", sale)
		}
		return id, open, err
	}
	if _, open, err := lookup(108, "jo", "k1"); err != nil || !open {
		t.Fatalf("lookup with a unit left: open=%v err=%v; want open", open, err)
	}
	if _, err := st.Reserve(ctx, 108, "jo", 95, "k1"); err != nil {
		t.Fatal(err)
	}
	var already *domain.AlreadyPurchasedError
	for _, tc := range []struct {
		sale      int64
		user, key string
		want      error
		wantID    int64
	}{
		{108, "jo", "k1", nil, 95}, // a retry of the winning request
		{108, "jo", "k2", &domain.AlreadyPurchasedError{OrderID: 95}, 0},
		{108, "jo", "", &domain.AlreadyPurchasedError{OrderID: 95}, 0},
		{108, "kim", "", domain.ErrSoldOut, 0},
		{109, "kim", "", domain.ErrNotStarted, 0},
		{110, "kim", "", domain.ErrEnded, 0},
		{111, "kim", "", domain.ErrUnknownSale, 0},
	} {
		id, open, err := lookup(tc.sale, tc.user, tc.key)
		rid, rerr := st.Reserve(ctx, tc.sale, tc.user, 96, tc.key)
		switch want := tc.want.(type) {
		case *domain.AlreadyPurchasedError:
			if !errors.As(err, &already) || already.OrderID != want.OrderID || open {
				t.Errorf("lookup(%d, %s, %q) = %v, want %v", tc.sale, tc.user, tc.key, err, want)
			}
		default:
			if !errors.Is(err, tc.want) || id != tc.wantID || open {
				t.Errorf("lookup(%d, %s, %q) = %d, %v, %v; want %d, %v", tc.sale, tc.user, tc.key, id, open, err, tc.wantID, tc.want)
			}
		}
		// Reserve agrees, and took nothing either.
		if rid != id || (rerr == nil) != (err == nil) || (err != nil && rerr.Error() != err.Error()) {
			t.Errorf("reserve(%d, %s, %q) = %d, %v; lookup said %d, %v", tc.sale, tc.user, tc.key, rid, rerr, id, err)
		}
	}
}
