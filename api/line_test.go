package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
)

// intentOrder is the order ids of the sale's intent stream, in admission
// order: the admitted orders whose workflow has not started.
func (s *system) intentOrder(saleID string) []string {
	s.t.Helper()
	id, _ := strconv.ParseInt(saleID, 10, 64)
	msgs, err := s.redis.XRange(context.Background(), stock.KeysFor(id).Intents, "-", "+").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i], _ = m.Values[stock.IntentOrderID].(string)
	}
	return out
}

// With the relay held back (Temporal down), 200 PENDING orders stand in
// line at places 1..200 in admission order; once workflows start, each
// order's place only falls, and then it has none.
func TestPendingOrdersShowTheirPlaceInLine(t *testing.T) {
	// Small batches, and the relay starts a batch only when the test lets
	// it: the line drains in steps the test sees, however fast the machine.
	gate := make(chan struct{})
	rel := relayInSteps()
	rel.BeforeStart = func(ctx context.Context, _ []int64) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	s := start(t, options{temporalDown: true, cfg: api.Config{Relay: rel}})
	sale := s.createSale(300)
	const buyers = 200
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	user := func(i int) string { return fmt.Sprintf("waiting-%s-%03d", tag, i) }
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		owner = map[string]string{} // order id -> user
	)
	for i := range buyers {
		wg.Go(func() {
			r := s.buy(sale.ID, user(i))
			if r.status != http.StatusAccepted {
				t.Errorf("purchase: %d %s", r.status, r.body)
				return
			}
			var p wire.Purchase
			r.decode(t, &p)
			mu.Lock()
			owner[p.OrderID] = user(i)
			mu.Unlock()
		})
	}
	wg.Wait()
	line := s.intentOrder(sale.ID)
	if len(line) != buyers || len(owner) != buyers {
		t.Fatalf("%d intents, %d orders; want %d", len(line), len(owner), buyers)
	}

	// Each order's place is its rank in admission order: 1..200, no two
	// alike. Nothing has left the line, so there is no estimate.
	read := func(ids []string) map[string]wire.Order {
		out := make(map[string]wire.Order, len(ids))
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, id := range ids {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				o, r := s.getOrder(id, owner[id])
				if r.status != http.StatusOK {
					t.Errorf("get order %s: %d %s", id, r.status, r.body)
					return
				}
				mu.Lock()
				out[id] = o
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	first := read(line)
	for i, id := range line {
		o := first[id]
		if o.Status != domain.StatusPending || o.QueuePosition == nil || *o.QueuePosition != int64(i+1) || o.ETASeconds != nil {
			t.Fatalf("order %s, admitted %d-th: %+v (position %v, eta %v), want PENDING at %d without an estimate",
				id, i+1, o, deref(o.QueuePosition), deref(o.ETASeconds), i+1)
		}
	}
	// The list carries the place too.
	var list []wire.Order
	s.do("GET", "/v1/orders", s.token(owner[line[42]], "buyer"), nil).decode(t, &list)
	if len(list) != 1 || list[0].QueuePosition == nil || *list[0].QueuePosition != 43 {
		t.Fatalf("list of the 43rd buyer: %+v", list)
	}

	// Let one batch go, then the rest: places only fall, and an order that
	// has left the line never gets a place again.
	s.temporal.Start()
	s.startWorker()
	last := map[string]int64{}
	for id, o := range first {
		last[id] = *o.QueuePosition
	}
	gate <- struct{}{} // the relay takes it when it is about to start a batch
	testenv.Eventually(t, time.Minute, func() error {
		if n := len(s.intentOrder(sale.ID)); n == buyers {
			return fmt.Errorf("all %d orders still in line", n)
		}
		return nil
	})
	fell, estimates := 0, 0
	lastInLine := []string{fmt.Sprint(buyers)} // what the last buyer was told, read by read
	opened := false
	testenv.Eventually(t, 3*time.Minute, func() error {
		defer func() {
			if !opened {
				close(gate)
				opened = true
			}
		}()
		waiting := 0
		for id, o := range read(line) {
			if id == line[buyers-1] && o.QueuePosition != nil {
				lastInLine = append(lastInLine, fmt.Sprintf("%d (%vs)", *o.QueuePosition, deref(o.ETASeconds)))
			}
			prev := last[id]
			switch {
			case o.QueuePosition == nil:
				last[id] = 0
			case prev == 0:
				t.Fatalf("order %s is back in line at %d after leaving it", id, *o.QueuePosition)
			case *o.QueuePosition > prev:
				t.Fatalf("order %s moved back from %d to %d", id, prev, *o.QueuePosition)
			case *o.QueuePosition < prev:
				fell++
				last[id] = *o.QueuePosition
			}
			if o.ETASeconds != nil {
				estimates++
			}
			if o.Status != domain.StatusAwaitingPayment {
				waiting++
			}
		}
		if waiting > 0 {
			return fmt.Errorf("%d orders not yet awaiting payment", waiting)
		}
		return nil
	})
	if fell == 0 {
		t.Fatal("no order was seen moving up the line")
	}
	t.Logf("places seen falling %d times; %d answers carried an estimate; the last buyer was told %v", fell, estimates, lastInLine)
	if r := s.audit(sale.ID, audit.Expect{Settled: true}); !r.OK() {
		t.Fatal(r)
	}
}

// A connected buyer whose order waits in line is sent its place over the
// websocket, then an event without one once its workflow has started, and
// then the order's next status.
func TestWebsocketRefreshesThePlaceInLine(t *testing.T) {
	s := start(t, options{temporalDown: true, cfg: api.Config{LineRefresh: 50 * time.Millisecond}})
	sale := s.createSale(10)
	// Pub/sub channels are shared by every database of the Redis: names no
	// other test uses.
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	users := []string{"first-" + tag, "second-" + tag, "third-" + tag}
	buy := func(u string) string {
		var p wire.Purchase
		s.buy(sale.ID, u).decode(t, &p)
		return p.OrderID
	}
	// Two buyers connected before buying: the api that admitted them notes
	// their orders for their sockets.
	sockets := []*socket{s.connect(users[0]), s.connect(users[1])}
	ids := []string{buy(users[0]), buy(users[1])}
	for i, sk := range sockets {
		if e := awaitPlace(t, sk, ids[i]); e.Status != domain.StatusPending || e.QueuePosition != int64(i+1) {
			t.Fatalf("buyer %d told %+v, want PENDING at %d", i+1, e, i+1)
		}
	}
	// A third buyer connects after buying: the snapshot has the place.
	ids = append(ids, buy(users[2]))
	sockets = append(sockets, s.connect(users[2]))
	if e := sockets[2].await(t, ids[2], domain.StatusPending); e.QueuePosition != 3 {
		t.Fatalf("snapshot %+v, want PENDING at 3", e)
	}

	// Temporal comes up without a worker: the workflows start (the orders
	// leave the line) and nothing moves them on, so they stay PENDING.
	s.temporal.Start()
	for i, sk := range sockets {
		if e := awaitLeft(t, sk, ids[i]); e.Status != domain.StatusPending || e.ETASeconds != 0 {
			t.Fatalf("order %s left the line: %+v, want PENDING without a place", ids[i], e)
		}
	}
	s.startWorker()
	for i, sk := range sockets {
		if e := sk.await(t, ids[i], domain.StatusAwaitingPayment); e.QueuePosition != 0 {
			t.Fatalf("%+v carries a place", e)
		}
	}
}

// awaitPlace returns the first event of order that carries a place.
func awaitPlace(t *testing.T, sk *socket, order string) domain.Event {
	t.Helper()
	return awaitEvent(t, sk, order, "a place", func(e domain.Event) bool { return e.QueuePosition > 0 })
}

// awaitLeft returns the first event of order without a place, failing if
// the order is told anything but PENDING first.
func awaitLeft(t *testing.T, sk *socket, order string) domain.Event {
	t.Helper()
	return awaitEvent(t, sk, order, "no place", func(e domain.Event) bool {
		if e.Status != domain.StatusPending {
			t.Fatalf("order %s reached %s before it was told it left the line", order, e.Status)
		}
		return e.QueuePosition == 0
	})
}

func awaitEvent(t *testing.T, sk *socket, order, what string, match func(domain.Event) bool) domain.Event {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case e, ok := <-sk.events:
			if !ok {
				t.Fatalf("socket closed before order %s was told %s", order, what)
			}
			if e.OrderID == order && match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("order %s was never told %s", order, what)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// relayInSteps makes the relay start a few workflows at a time, so a test
// sees the line drain in steps rather than at once.
func relayInSteps() relay.Options { return relay.Options{Batch: 8, Parallel: 2} }
