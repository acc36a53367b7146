package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/stock"
)

func TestEndClosesTheWindowAndNeverReopensIt(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 31, 10)
	if _, err := st.Reserve(ctx, 31, "early", 1, ""); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if ok, err := st.End(ctx, 31, now.Add(-time.Minute), now); err != nil || !ok {
		t.Fatalf("end: %v %v", ok, err)
	}
	if _, err := st.Reserve(ctx, 31, "late", 2, ""); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("reserve after the end: %v, want ErrEnded", err)
	}
	// A later end time (a stale or repeated call) does not reopen it.
	if _, err := st.End(ctx, 31, now.Add(-time.Minute), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, 31, "later", 3, ""); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("reserve after a stale end: %v, want ErrEnded", err)
	}
	// The admitted order keeps its unit.
	if id, ok, err := st.Holder(ctx, 31, "early"); err != nil || !ok || id != 1 {
		t.Fatalf("early buyer: %d %v %v", id, ok, err)
	}
	// An upcoming sale ended before it opened answers ENDED, not NOT_STARTED.
	if _, err := st.Warm(ctx, stock.Sale{ID: 32, Remaining: 5, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.End(ctx, 32, now.Add(-time.Millisecond), now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, 32, "u", 4, ""); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("reserve on an upcoming sale ended early: %v, want ErrEnded", err)
	}
	// A caller whose clock runs ahead still ends the sale at once: Redis
	// ends it at its own now.
	openSale(t, st, 34, 5)
	if _, err := st.End(ctx, 34, now.Add(-time.Minute), now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, 34, "u", 5, ""); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("reserve after an end from a clock running ahead: %v, want ErrEnded", err)
	}
	ends, _ := rdb.HGet(ctx, stock.KeysFor(34).Meta, "ends_ms").Int64()
	if d := time.Since(time.UnixMilli(ends)); d < 0 || d > 10*time.Second {
		t.Fatalf("ends_ms %d is %s from now", ends, d)
	}
	// A sale Redis does not hold is left to its next load.
	if ok, err := st.End(ctx, 33, now, now); err != nil || ok {
		t.Fatalf("end of an unloaded sale: %v %v", ok, err)
	}
	if n, _ := rdb.Exists(ctx, stock.KeysFor(33).Meta).Result(); n != 0 {
		t.Fatal("end created the meta of an unloaded sale")
	}
}

func TestAddUnitsWhileBuyersRace(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 41, 50)
	sub := rdb.Subscribe(ctx, stock.RestockChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	ver := func() int64 { v, _ := rdb.Get(ctx, stock.KeysFor(41).Version).Int64(); return v }

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for i := range 300 {
		wg.Go(func() {
			_, err := st.Reserve(ctx, 41, fmt.Sprintf("buyer-%d", i), int64(i+1), "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, domain.ErrSoldOut):
			default:
				t.Errorf("reserve: %v", err)
			}
		})
		if i == 100 {
			before := ver()
			if ok, err := st.AddUnits(ctx, 41, 25, 75); err != nil || !ok {
				t.Fatalf("add units: %v %v", ok, err)
			}
			if ver() <= before {
				t.Error("adding units did not move the version")
			}
		}
	}
	wg.Wait()
	if won != 75 {
		t.Fatalf("%d buyers won, want 75 (50 + 25 added)", won)
	}
	if left, _ := st.Remaining(ctx, 41); left != 0 {
		t.Fatalf("remaining %d, want 0", left)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "41" {
		t.Fatalf("restock announcement: %v %v", msg, err)
	}
	if ok, err := st.AddUnits(ctx, 42, 5, 5); err != nil || ok {
		t.Fatalf("add units to an unloaded sale: %v %v", ok, err)
	}
	if _, err := st.AddUnits(ctx, 41, 0, 75); err == nil {
		t.Fatal("adding 0 units succeeded")
	}
}

func TestIntentCarriesTheSalesPaymentTimeout(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	now := time.Now()
	for id, timeout := range map[int64]time.Duration{51: 90 * time.Second, 52: 0} {
		if _, err := st.Warm(ctx, stock.Sale{ID: id, Remaining: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PaymentTimeout: timeout}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reserve(ctx, id, "u", id*10, ""); err != nil {
			t.Fatal(err)
		}
		msgs, err := rdb.XRange(ctx, stock.KeysFor(id).Intents, "-", "+").Result()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("intents: %v %v", msgs, err)
		}
		got, has := msgs[0].Values["payment_timeout_ms"]
		switch {
		case timeout > 0 && got != "90000":
			t.Fatalf("sale %d: payment_timeout_ms = %v, want 90000", id, got)
		case timeout == 0 && has:
			t.Fatalf("sale %d without its own timeout: intent carries %v", id, got)
		}
		if msgs[0].Values["order_id"] != strconv.FormatInt(id*10, 10) || msgs[0].Values["user_id"] != "u" {
			t.Fatalf("intent fields: %v", msgs[0].Values)
		}
	}
}
