package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
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

// One sale the reconciler cannot repair (its keys damaged, its lock held
// elsewhere) does not stop the pass: every other sale is still repaired,
// and the failure is reported.
func TestOneFailingSaleDoesNotStopThePass(t *testing.T) {
	rc, broken := sale(t, 5, 1)
	ctx := context.Background()
	sl, err := rc.Store.CreateSale(ctx, store.NewSale{Name: "r2", PriceCents: 5, Stock: 3,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The first sale's stock key holds the wrong type: its snapshot fails.
	// The second sale's Redis state is lost: it needs a rebuild.
	k := stock.KeysFor(broken)
	if err := rc.Stock.Client().Del(ctx, k.Stock).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().HSet(ctx, k.Stock, "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	reps, err := rc.All(ctx)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("sale %d", broken)) {
		t.Fatalf("pass error = %v, want the broken sale %d's", err, broken)
	}
	if len(reps) != 1 || reps[0].SaleID != sl.ID || !reps[0].Rebuilt {
		t.Fatalf("reports = %+v, want sale %d rebuilt", reps, sl.ID)
	}
	settled(t, rc, sl.ID)
}

// A warm-up that stopped between loading a sale and listing it (the order
// of older versions) left a loaded sale no relay reads: the reconciler
// lists every loaded sale again.
func TestLoadedSaleIsListed(t *testing.T) {
	rc, id := sale(t, 5, 1)
	ctx := context.Background()
	if err := rc.Stock.Client().SRem(ctx, stock.SalesKey, id).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Sale(ctx, id); err != nil {
		t.Fatal(err)
	}
	listed, err := rc.Stock.Sales(ctx)
	if err != nil || len(listed) != 1 || listed[0] != id {
		t.Fatalf("listed sales = %v, %v; want [%d]", listed, err, id)
	}
}

// An operator's end committed in the database whose Redis step failed:
// the reconciler mirrors it, and Redis answers ENDED from then on.
func TestOperatorEndIsMirrored(t *testing.T) {
	rc, id := sale(t, 5, 1)
	ctx := context.Background()
	sl, _, err := rc.Store.EndSale(ctx, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Stock.Reserve(ctx, id, "late", 99, ""); err != nil {
		t.Fatalf("Redis still admits before the mirror: %v", err) // the fault this repairs
	}
	if _, err := rc.Stock.Release(ctx, id, "late", 99); err != nil {
		t.Fatal(err)
	}
	if err := rc.Mirror(ctx); err != nil {
		t.Fatal(err)
	}
	ends, err := rc.Stock.Ends(ctx, []int64{id})
	if err != nil || ends[id] > sl.EndsAt.UnixMilli() {
		t.Fatalf("Redis ends at %d (%v), want at most %d", ends[id], err, sl.EndsAt.UnixMilli())
	}
	if _, err := rc.Stock.Reserve(ctx, id, "later", 100, ""); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("purchase after the mirror: %v, want ErrEnded", err)
	}
}

// An operator adds units: the database first, then Redis, under the sale's
// lock. If the operator pauses past the lock's expiry after the database
// step, a reconciler pass sets Redis's count from a database that has the
// units; the operator's Redis step afterwards must not add them again.
func TestAddedUnitsAreNotCountedTwice(t *testing.T) {
	rc, id := sale(t, 5, 1)
	ctx := context.Background()
	sl, err := rc.Store.AddUnits(ctx, id, 3, time.Now()) // the operator's database step
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id) // the operator paused; the lock expired
	if err != nil || !rep.RemainingFixed || rep.RemainingNow != sl.Stock {
		t.Fatalf("report %+v, %v; want the count set to the database's %d", rep, err, sl.Stock)
	}
	if ok, err := rc.Stock.AddUnits(ctx, id, 3, sl.TotalStock); err != nil || !ok { // the operator resumes
		t.Fatalf("add units: %v %v", ok, err)
	}
	if left, _ := rc.Stock.Remaining(ctx, id); left != sl.Stock {
		t.Fatalf("Redis has %d units, the database %d: the units were counted twice", left, sl.Stock)
	}
	// A later add is counted once.
	sl, err = rc.Store.AddUnits(ctx, id, 2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Stock.AddUnits(ctx, id, 2, sl.TotalStock); err != nil {
		t.Fatal(err)
	}
	if left, _ := rc.Stock.Remaining(ctx, id); left != sl.Stock {
		t.Fatalf("Redis has %d units after a second add, the database %d", left, sl.Stock)
	}
	settled(t, rc, id)
}

// A retry with the Idempotency-Key of the purchase that won gets that
// order back as a success (202), also after Redis lost the sale and the
// reconciler rebuilt it from the database: the key travels with the intent
// into the order's row.
func TestWinningKeySurvivesARebuild(t *testing.T) {
	rc, id := sale(t, 5, 0)
	ctx := context.Background()
	const key = "k-winner"
	order, err := rc.Stock.Reserve(ctx, id, "wanda", 4242, key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := rc.Stock.Client().XRange(ctx, stock.KeysFor(id).Intents, "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("intents: %v %v", msgs, err)
	}
	in, err := stock.ParseIntent(msgs[0].Values)
	if err != nil || in.Order.IdempotencyKey != key {
		t.Fatalf("intent %+v, %v; want it to carry the key", in, err)
	}
	if err := rc.Store.PlaceOrder(ctx, in.Order); err != nil { // the saga, from the intent
		t.Fatal(err)
	}
	if err := rc.Stock.Client().Del(ctx, stock.KeysFor(id).Intents, stock.KeysFor(id).Line).Err(); err != nil {
		t.Fatal(err) // started by the relay
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil { // Redis restarted empty
		t.Fatal(err)
	}
	if rep, err := rc.Sale(ctx, id); err != nil || !rep.Rebuilt {
		t.Fatalf("report %+v, %v; want rebuilt", rep, err)
	}
	if got, err := rc.Stock.Reserve(ctx, id, "wanda", 4343, key); err != nil || got != order {
		t.Fatalf("retry with the winning key after the rebuild: %d, %v; want order %d as a success", got, err, order)
	}
	var already *domain.AlreadyPurchasedError
	if _, err := rc.Stock.Reserve(ctx, id, "wanda", 4444, "another-key"); !errors.As(err, &already) || already.OrderID != order {
		t.Fatalf("a new request of the buyer: %v, want ALREADY_PURCHASED %d", err, order)
	}
	settled(t, rc, id)
}

// Admitted orders Redis loses before their rows are written are counted
// and named: their buyers were told 202, and the rebuild cannot know them.
func TestLostAdmissionsAreCounted(t *testing.T) {
	rc, id := sale(t, 10, 2) // two orders with rows
	ctx := context.Background()
	for i := range 3 { // three admitted, no row yet
		if _, err := rc.Stock.Reserve(ctx, id, fmt.Sprintf("late-%d", i), int64(2000+i), ""); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || rep.LostAdmissions != 0 {
		t.Fatalf("first pass: %+v %v; want nothing lost", rep, err)
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil { // Redis restarted empty
		t.Fatal(err)
	}
	rep, err = rc.Sale(ctx, id)
	if err != nil || !rep.Rebuilt || rep.LostAdmissions != 3 || !slices.Equal(rep.LostOrders, []int64{2000, 2001, 2002}) {
		t.Fatalf("after the loss: %+v %v; want rebuilt, 3 lost: 2000, 2001, 2002", rep, err)
	}
	// The next pass measures against the rebuilt state: nothing more lost.
	if rep, err = rc.Sale(ctx, id); err != nil || rep.LostAdmissions != 0 {
		t.Fatalf("pass after the rebuild: %+v %v", rep, err)
	}
	if rep, err = rc.Sale(ctx, id); err != nil || rep.LostAdmissions != 0 {
		t.Fatalf("second pass after the rebuild: %+v %v", rep, err)
	}
}

// A buyer whose Redis entry was lost is restored with the Idempotency-Key
// of the purchase that won, so a retry of it still answers its order.
func TestRestoredBuyerKeepsTheWinningKey(t *testing.T) {
	rc, id := sale(t, 10, 0)
	ctx := context.Background()
	ref := domain.OrderRef{OrderID: 3000, SaleID: id, UserID: "kim", AmountCents: 5, IdempotencyKey: "kim-key"}
	if _, err := rc.Stock.Reserve(ctx, id, ref.UserID, ref.OrderID, ref.IdempotencyKey); err != nil {
		t.Fatal(err)
	}
	if err := rc.Store.DeductStock(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := rc.Store.CreateOrder(ctx, ref); err != nil {
		t.Fatal(err)
	}
	keys := stock.KeysFor(id)
	if err := rc.Stock.Client().HDel(ctx, keys.Buyers, "kim").Err(); err != nil { // Redis forgot the buyer
		t.Fatal(err)
	}
	if err := rc.Stock.Client().HDel(ctx, keys.Idem, "kim").Err(); err != nil {
		t.Fatal(err)
	}
	if rep, err := rc.Sale(ctx, id); err != nil || rep.BuyersRestored != 1 {
		t.Fatalf("report %+v, %v; want the buyer restored", rep, err)
	}
	got, err := rc.Stock.Reserve(ctx, id, "kim", 9999, "kim-key")
	if err != nil || got != 3000 {
		t.Fatalf("retry of the winning request after the repair: %d, %v; want order 3000", got, err)
	}
}

// A Redis that did not hold the sale, loaded again from the database with
// nothing lost, is routine (seckill dev at every start): INFO, not WARN.
// Drift beyond it stays a WARN.
func TestARebuildThatLostNothingIsInfo(t *testing.T) {
	rc, id := sale(t, 10, 4)
	ctx := context.Background()
	var logs levels
	rc.Logger = slog.New(&logs)
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rep, err := rc.Sale(ctx, id); err != nil || !rep.Rebuilt {
		t.Fatalf("report %+v, %v; want rebuilt", rep, err)
	}
	if got := logs.of("reconciler repaired a sale"); !slices.Equal(got, []slog.Level{slog.LevelInfo}) {
		t.Errorf("a rebuild that lost nothing logged at %v, want one INFO", got)
	}
	// A remaining count that drifted is a repair worth a look.
	if err := rc.Stock.Client().Set(ctx, stock.KeysFor(id).Stock, 9, 0).Err(); err != nil {
		t.Fatal(err)
	}
	logs = levels{}
	if rep, err := rc.Sale(ctx, id); err != nil || !rep.RemainingFixed {
		t.Fatalf("report %+v, %v; want remaining fixed", rep, err)
	}
	if got := logs.of("reconciler repaired a sale"); !slices.Equal(got, []slog.Level{slog.LevelWarn}) {
		t.Errorf("drift repaired logged at %v, want one WARN", got)
	}
}

// levels records the level of each log line by message.
type levels struct {
	mu    sync.Mutex
	lines map[string][]slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string][]slog.Level{}
	}
	l.lines[r.Message] = append(l.lines[r.Message], r.Level)
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }
func (l *levels) of(msg string) []slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[msg]
}
