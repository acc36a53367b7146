package reconcile_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/stock"
)

// afterFirstRead runs then once, right after the first Redis command (or
// pipeline) that touches one of sale's keys succeeds: between the
// reconciler's read of Redis and anything it does next. It stages an
// interleaving by hand, so a race is a test that fails every time rather
// than now and then.
type afterFirstRead struct {
	tag   string // the sale's hash tag, "{sale:ID}"
	fired atomic.Bool
	then  func()
}

// interleave installs an afterFirstRead on the reconciler's Redis client.
func interleave(t *testing.T, rc *reconcile.Reconciler, saleID int64, then func()) {
	t.Helper()
	h := &afterFirstRead{tag: "{sale:" + itoa(saleID) + "}", then: then}
	rc.Stock.Client().AddHook(h)
	t.Cleanup(func() {
		if !h.fired.Load() {
			t.Error("the staged interleaving never ran")
		}
	})
}

func (h *afterFirstRead) touches(cmds ...redis.Cmder) bool {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && strings.Contains(s, h.tag) {
				return true
			}
		}
	}
	return false
}

// fire runs then once. then's own Redis calls pass through the hook again;
// the flag, set first, keeps them from firing it twice.
func (h *afterFirstRead) fire(err error, cmds ...redis.Cmder) {
	// A failed call (say NOSCRIPT before go-redis resends the script) has
	// read nothing yet.
	if (err == nil || errors.Is(err, redis.Nil)) && h.touches(cmds...) && h.fired.CompareAndSwap(false, true) {
		h.then()
	}
}

func (h *afterFirstRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterFirstRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.fire(err, cmd)
		return err
	}
}

func (h *afterFirstRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.fire(err, cmds...)
		return err
	}
}

// endOrder runs the saga's ending of an order, in the saga's order:
// FinishOrder, RestoreStock, ReleaseReservation.
func endOrder(t *testing.T, rc *reconcile.Reconciler, ref domain.OrderRef) {
	t.Helper()
	ctx := context.Background()
	if _, err := rc.Store.FinishOrder(ctx, ref, domain.StatusCancelled, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Store.RestoreStock(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if ok, err := rc.Stock.Release(ctx, ref.SaleID, ref.UserID, ref.OrderID); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
}

// A saga ends an order while the reconciler is between its reads: the
// reconciler must not give the buyer back a unit of the cancelled order.
func TestSagaEndingDuringAPassIsNotUndone(t *testing.T) {
	rc, id := sale(t, 5, 3)
	ref := domain.OrderRef{OrderID: 1001, SaleID: id, UserID: "u1", AmountCents: 5}
	interleave(t, rc, id, func() { endOrder(t, rc, ref) })
	rep, err := rc.Sale(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if holder, ok, _ := rc.Stock.Holder(context.Background(), id, "u1"); ok {
		t.Fatalf("u1 holds order %d again after it was cancelled and released", holder)
	}
	settled(t, rc, id)
	// The pass saw u1's reservation and, in the database, its ended order
	// (Grace is tiny here): it planned the release the saga has just done,
	// and the version told it not to.
	if !rep.Raced || rep.Repaired() {
		t.Fatalf("report %+v; want raced and nothing repaired", rep)
	}
}

// A purchase lands while the reconciler is between its reads: the count
// the reconciler computed before it must not overwrite the purchase's.
func TestPurchaseDuringAPassIsNotOverwritten(t *testing.T) {
	rc, id := sale(t, 10, 3)
	ctx := context.Background()
	keys := stock.KeysFor(id)
	rdb := rc.Stock.Client()
	if err := rdb.Set(ctx, keys.Stock, 9, 0).Err(); err != nil { // drift: the database says 7
		t.Fatal(err)
	}
	interleave(t, rc, id, func() {
		ref := domain.OrderRef{OrderID: 2000, SaleID: id, UserID: "late", AmountCents: 5}
		if _, err := rc.Stock.Reserve(ctx, id, ref.UserID, ref.OrderID, ""); err != nil {
			t.Fatal(err)
		}
		if err := rc.Store.DeductStock(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := rc.Store.CreateOrder(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, keys.Intents, keys.Line).Err(); err != nil { // the relay's work
			t.Fatal(err)
		}
	})
	rep, err := rc.Sale(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Raced || rep.Repaired() {
		t.Fatalf("report %+v; want raced and nothing repaired", rep)
	}
	if left, _ := rc.Stock.Remaining(ctx, id); left != 8 {
		t.Fatalf("remaining = %d, want the purchase's 8, untouched", left)
	}
	// The next pass sees the purchase and repairs the drift.
	if rep, err := rc.Sale(ctx, id); err != nil || !rep.RemainingFixed || rep.RemainingNow != 6 {
		t.Fatalf("second pass: %+v, %v; want remaining fixed to 6", rep, err)
	}
	settled(t, rc, id)
}

// An order ended but its unit is not back in the database yet (its saga
// is between FinishOrder and RestoreStock): Redis must keep the unit.
func TestEndedOrderIsNotReleasedBeforeTheDatabaseRestoredIt(t *testing.T) {
	rc, id := sale(t, 1, 1)
	ctx := context.Background()
	ref := domain.OrderRef{OrderID: 1000, SaleID: id, UserID: "u0", AmountCents: 5}
	if _, err := rc.Store.FinishOrder(ctx, ref, domain.StatusCancelled, "test"); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || rep.AwaitingRestore != 1 || rep.Repaired() {
		t.Fatalf("report %+v, %v; want one order awaiting its restore, nothing repaired", rep, err)
	}
	if left, _ := rc.Stock.Remaining(ctx, id); left != 0 {
		t.Fatalf("redis remaining = %d while the database still holds the unit (stock 0)", left)
	}
	if holder, ok, _ := rc.Stock.Holder(ctx, id, "u0"); !ok || holder != 1000 {
		t.Fatalf("u0's reservation was released before the database restored it (holder %d, %v)", holder, ok)
	}

	// Once the database has the unit back, the lost release is made up
	// for, and api instances hear that the sale has a unit again.
	if _, err := rc.Store.RestoreStock(ctx, ref); err != nil {
		t.Fatal(err)
	}
	announced := restocks(t, rc, id)
	rep, err = rc.Sale(ctx, id)
	if err != nil || rep.StaleReleased != 1 || rep.RemainingNow != 1 {
		t.Fatalf("report %+v, %v; want u0's unit released", rep, err)
	}
	if !announced() {
		t.Fatal("the released unit was not announced")
	}
	settled(t, rc, id)
}

// An order that ended without deducting (its saga failed before
// DeductStock) holds no unit in the database: its reservation is released
// with or without the RESTORE tombstone row.
func TestEndedOrderThatNeverDeductedIsReleased(t *testing.T) {
	rc, id := sale(t, 2, 0)
	ctx := context.Background()
	ref := domain.OrderRef{OrderID: 3000, SaleID: id, UserID: "x", AmountCents: 5}
	if _, err := rc.Stock.Reserve(ctx, id, ref.UserID, ref.OrderID, ""); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().Del(ctx, stock.KeysFor(id).Intents, stock.KeysFor(id).Line).Err(); err != nil { // the relay's work
		t.Fatal(err)
	}
	if _, err := rc.Store.FinishOrder(ctx, ref, domain.StatusFailed, "test"); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || rep.StaleReleased != 1 || !rep.Repaired() {
		t.Fatalf("report %+v, %v; want the reservation released", rep, err)
	}
	settled(t, rc, id)
}

// restocks subscribes to RestockChannel and returns a function that
// reports whether sale was announced within a second. Pub/Sub ignores the
// database number, so other tests' announcements arrive too: only sale's
// count.
func restocks(t *testing.T, rc *reconcile.Reconciler, sale int64) func() bool {
	t.Helper()
	ctx := context.Background()
	sub := rc.Stock.Client().Subscribe(ctx, stock.RestockChannel)
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription is live
		t.Fatal(err)
	}
	ch := sub.Channel()
	return func() bool {
		timeout := time.After(time.Second)
		for {
			select {
			case m := <-ch:
				if m.Payload == itoa(sale) {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
