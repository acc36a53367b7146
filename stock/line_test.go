package stock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/stock"
)

// waiting reads the sale's intent stream: the orders whose workflow has not
// started, in admission order, with their entry ids.
func waiting(t testing.TB, rdb *redis.Client, sale int64) ([]int64, []stock.StartedIntent) {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), stock.KeysFor(sale).Intents, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	orders := make([]int64, len(msgs))
	entries := make([]stock.StartedIntent, len(msgs))
	for i, m := range msgs {
		id, err := strconv.ParseInt(m.Values[stock.IntentOrderID].(string), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		orders[i] = id
		entries[i] = stock.StartedIntent{Entry: m.ID, OrderID: id}
	}
	return orders, entries
}

func refs(sale int64, orders []int64) []domain.OrderRef {
	out := make([]domain.OrderRef, len(orders))
	for i, id := range orders {
		out[i] = domain.OrderRef{OrderID: id, SaleID: sale}
	}
	return out
}

// checkPlaces checks that the orders, in this order, are at places 1..n and
// that none of gone has a place.
func checkPlaces(t *testing.T, line *stock.Line, sale int64, orders, gone []int64) map[int64]domain.Place {
	t.Helper()
	places, err := line.Places(context.Background(), refs(sale, append(append([]int64{}, orders...), gone...)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int64{}
	for i, id := range orders {
		p, ok := places[id]
		if !ok || p.Position != int64(i+1) {
			t.Fatalf("order %d, admitted %d-th of those waiting: place %+v (found %v), want position %d", id, i+1, p, ok, i+1)
		}
		if other, dup := seen[p.Position]; dup {
			t.Fatalf("orders %d and %d share position %d", other, id, p.Position)
		}
		seen[p.Position] = id
	}
	for _, id := range gone {
		if p, ok := places[id]; ok {
			t.Fatalf("order %d has left the line but has place %+v", id, p)
		}
	}
	return places
}

// Concurrent buyers' orders stand in line in the order Redis admitted
// them, each at its own place, and move up as the relay takes intents off
// the front (and, out of order, off the middle).
func TestLinePlacesFollowAdmissionOrder(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 1, 500)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if _, err := st.Reserve(ctx, 1, fmt.Sprintf("buyer-%d", i), int64(1000+i), ""); err != nil {
				t.Errorf("reserve: %v", err)
			}
		})
	}
	wg.Wait()
	orders, entries := waiting(t, rdb, 1)
	if len(orders) != 200 {
		t.Fatalf("%d intents, want 200", len(orders))
	}
	line := st.NewLine(stock.LineOptions{})
	checkPlaces(t, line, 1, orders, nil)

	// The relay starts the first 30 and one from the middle.
	started := append(append([]stock.StartedIntent{}, entries[:30]...), entries[100])
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{1: started}); err != nil {
		t.Fatal(err)
	}
	rest := append(append([]int64{}, orders[30:100]...), orders[101:]...)
	checkPlaces(t, line, 1, rest, append(append([]int64{}, orders[:30]...), orders[100]))
	if n, _ := rdb.Get(ctx, stock.KeysFor(1).Started).Int(); n != 31 {
		t.Fatalf("departures counted %d, want 31", n)
	}
	// A repeated call (its first answer lost) changes nothing.
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{1: started}); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Get(ctx, stock.KeysFor(1).Started).Int(); n != 31 {
		t.Fatalf("departures counted %d after a repeat, want 31", n)
	}
	// The line and the stream hold the same orders.
	if l, x := rdb.ZCard(ctx, stock.KeysFor(1).Line).Val(), rdb.XLen(ctx, stock.KeysFor(1).Intents).Val(); l != 169 || x != 169 {
		t.Fatalf("line %d, stream %d; want 169 each", l, x)
	}
}

// An order the line does not hold (started by a relay of an earlier
// version, which did not take it off) counts ahead of later buyers only
// until the stream drains: then the line is dropped whole. And a sale's
// retirement drops the line and its counter with the rest.
func TestLineIsDroppedWhenTheStreamDrains(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 2, 10)
	for i := range 3 {
		if _, err := st.Reserve(ctx, 2, fmt.Sprintf("b%d", i), int64(10+i), ""); err != nil {
			t.Fatal(err)
		}
	}
	k := stock.KeysFor(2)
	// An earlier relay acknowledged and deleted order 10's intent only.
	orders, entries := waiting(t, rdb, 2)
	rdb.XDel(ctx, k.Intents, entries[0].Entry)
	line := st.NewLine(stock.LineOptions{})
	places := checkPlaces(t, line, 2, orders, nil)
	if places[12].Position != 3 {
		t.Fatalf("order 12 at %+v; the stale member counts ahead of it", places[12])
	}
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{2: entries[1:]}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, k.Line).Val(); n != 0 {
		t.Fatalf("the line of a drained stream holds %v", rdb.ZRange(ctx, k.Line, 0, -1).Val())
	}
	// The next buyer is first in line.
	if _, err := st.Reserve(ctx, 2, "next", 20, ""); err != nil {
		t.Fatal(err)
	}
	checkPlaces(t, line, 2, []int64{20}, orders)

	_, ents := waiting(t, rdb, 2)
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{2: ents}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.End(ctx, 2, time.Now().Add(-time.Hour), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.Retire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, k.Line, k.Started).Val(); n != 0 {
		t.Fatalf("%d line keys left after retirement", n)
	}
}

// The estimate is the place divided by the departures per second measured
// over the samples, rounded up; without two samples, or with nothing
// leaving, there is none.
func TestLineEstimatesTheWaitFromTheDepartureRate(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 3, 100)
	for i := range 50 {
		if _, err := st.Reserve(ctx, 3, fmt.Sprintf("b%d", i), int64(100+i), ""); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1_700_000_000, 0)
	line := st.NewLine(stock.LineOptions{Now: func() time.Time { return now }})
	orders, entries := waiting(t, rdb, 3)
	places := checkPlaces(t, line, 3, orders, nil)
	if places[orders[0]].ETASeconds != 0 {
		t.Fatalf("an estimate from one sample: %+v", places[orders[0]])
	}
	// Nothing left the line in 2s: no estimate.
	now = now.Add(2 * time.Second)
	places = checkPlaces(t, line, 3, orders, nil)
	if places[orders[0]].ETASeconds != 0 {
		t.Fatalf("an estimate with nothing leaving: %+v", places[orders[0]])
	}
	// 10 leave in the next 2s: 10 in 4s is 2.5 a second.
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{3: entries[:10]}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	places = checkPlaces(t, line, 3, orders[10:], orders[:10])
	for _, c := range []struct{ position, eta int64 }{{1, 1}, {2, 1}, {3, 2}, {5, 2}, {6, 3}, {40, 16}} {
		if p := places[orders[9+c.position]]; p.Position != c.position || p.ETASeconds != c.eta {
			t.Fatalf("place %+v, want position %d and %ds", p, c.position, c.eta)
		}
	}
	// Within SampleEvery the counter is not read again.
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{3: entries[10:20]}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(500 * time.Millisecond)
	places = checkPlaces(t, line, 3, orders[20:], orders[:20])
	if p := places[orders[20]]; p.ETASeconds != 1 {
		t.Fatalf("place %+v, want the rate of the last sample (2.5/s: 1s)", p)
	}
	// The samples older than the window no longer count: from the one
	// 29.5s ago (10 had left) to now (20), 10 in 29.5s.
	now = now.Add(29 * time.Second)
	places = checkPlaces(t, line, 3, orders[20:], orders[:20])
	if p := places[orders[49]]; p.Position != 30 || p.ETASeconds != 89 {
		t.Fatalf("place %+v, want position 30 and ceil(30 / (10 / 29.5s)) = 89s", p)
	}
}

// The relay's step survives an emptied script cache, like the others.
func TestStartedSurvivesScriptCacheFlush(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	openSale(t, st, 4, 3)
	if _, err := st.Reserve(ctx, 4, "x", 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, entries := waiting(t, rdb, 4)
	if err := st.Started(ctx, "relay", map[int64][]stock.StartedIntent{4: entries}); err != nil {
		t.Fatalf("started after SCRIPT FLUSH: %v", err)
	}
	if n := rdb.XLen(ctx, stock.KeysFor(4).Intents).Val(); n != 0 {
		t.Fatalf("%d intents left", n)
	}
}
