package push_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

// line stands in for the places in line the api reads from Redis: the hub
// only sees the func, and these tests are about what the hub does with its
// answers.
type line struct {
	mu     sync.Mutex
	places map[int64]domain.Place
	calls  int
	asked  map[int64]int // order id -> calls that asked about it
	// moving: every order asked about is in line, at a place that
	// changes with every call.
	moving bool
}

func newLine() *line { return &line{places: map[int64]domain.Place{}, asked: map[int64]int{}} }

func (l *line) lookup(_ context.Context, orders []domain.OrderRef) (map[int64]domain.Place, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	out := map[int64]domain.Place{}
	for _, o := range orders {
		l.asked[o.OrderID]++
		if l.moving {
			out[o.OrderID] = domain.Place{Position: int64(l.calls)}
		} else if p, ok := l.places[o.OrderID]; ok {
			out[o.OrderID] = p
		}
	}
	return out, nil
}

func (l *line) set(order int64, p domain.Place) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.places[order] = p
}

func (l *line) leave(order int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.places, order)
}

func (l *line) counts() (calls int, asked map[int64]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, maps.Clone(l.asked)
}

// nextOf reads c's frames until one about order, and returns it.
func nextOf(t *testing.T, c *websocket.Conn, order string) domain.Event {
	t.Helper()
	for {
		if e := readEvent(t, c); e.OrderID == order {
			return e
		}
	}
}

// A PENDING order the buyer was told about, by the snapshot or by the
// instance that admitted it, is sent its place whenever it changes, once
// more without a place when it leaves the line, and then no more.
func TestWaitingOrderIsToldItsPlaceUntilItLeavesTheLine(t *testing.T) {
	l := newLine()
	h := newHarness(t, config{opts: push.Options{Line: l.lookup, LineRefresh: 20 * time.Millisecond}})
	user := h.user("buyer")
	l.set(1, domain.Place{Position: 3, ETASeconds: 10})
	c := h.connect(user) // the snapshot's PENDING order 1
	if e := nextOf(t, c, "1"); e.Status != domain.StatusPending || e.QueuePosition != 3 || e.ETASeconds != 10 {
		t.Fatalf("first refresh %+v, want PENDING at 3, 10s", e)
	}
	l.set(1, domain.Place{Position: 1})
	if e := nextOf(t, c, "1"); e.QueuePosition != 1 || e.ETASeconds != 0 {
		t.Fatalf("second refresh %+v, want at 1 without an estimate", e)
	}

	// The api admitted order 2 here.
	l.set(2, domain.Place{Position: 2, ETASeconds: 1})
	h.hub.Waiting(domain.NewEvent(2, 8, user, domain.StatusPending, "", t0))
	if e := nextOf(t, c, "2"); e.Status != domain.StatusPending || e.SaleID != "8" || e.QueuePosition != 2 || !e.At.Equal(t0) {
		t.Fatalf("order 2's refresh %+v, want PENDING in sale 8 at 2", e)
	}

	l.leave(1)
	if e := nextOf(t, c, "1"); e.Status != domain.StatusPending || e.QueuePosition != 0 || e.ETASeconds != 0 {
		t.Fatalf("order 1 left the line: %+v, want PENDING without a place", e)
	}
	// Order 1 is not asked about again, while order 2 still is.
	_, before := l.counts()
	l.set(2, domain.Place{Position: 1})
	if e := nextOf(t, c, "2"); e.QueuePosition != 1 {
		t.Fatalf("order 2's refresh %+v, want at 1", e)
	}
	calls, after := l.counts()
	if after[1] > before[1]+1 { // one ask may have been under way
		t.Fatalf("order 1 asked about %d more times after it left the line", after[1]-before[1])
	}
	if calls == 0 || after[2] <= before[2] {
		t.Fatal("order 2 was not asked about")
	}
}

// Any other status of an order ends its refreshes, and an unchanged place
// is not sent again.
func TestOrderThatMovedOnIsNoLongerRefreshed(t *testing.T) {
	l := newLine()
	h := newHarness(t, config{opts: push.Options{Line: l.lookup, LineRefresh: 20 * time.Millisecond}})
	user := h.user("buyer")
	l.set(1, domain.Place{Position: 5})
	c := h.connect(user)
	if e := nextOf(t, c, "1"); e.QueuePosition != 5 {
		t.Fatalf("refresh %+v, want at 5", e)
	}
	h.publish(order(1, user, domain.StatusAwaitingPayment))
	if e := readEvent(t, c); e.OrderID != "1" || e.Status != domain.StatusAwaitingPayment {
		t.Fatalf("got %+v, want order 1 AWAITING_PAYMENT", e)
	}
	// Order 1 still has a place in the stand-in (a stale line); order 3,
	// noted after, is refreshed, and order 1 is not.
	l.set(1, domain.Place{Position: 4})
	l.set(3, domain.Place{Position: 9})
	h.hub.Waiting(domain.NewEvent(3, 7, user, domain.StatusPending, "", t0))
	if e := readEvent(t, c); e.OrderID != "3" || e.QueuePosition != 9 {
		t.Fatalf("got %+v, want order 3 at 9 (and nothing more about order 1)", e)
	}
	l.set(3, domain.Place{Position: 8})
	if e := readEvent(t, c); e.OrderID != "3" || e.QueuePosition != 8 {
		t.Fatalf("got %+v, want order 3 at 8 (an unchanged place is not sent again)", e)
	}
}

// Refreshes never make a client slow: a socket that is not reading has
// them skipped rather than queued, so it is not dropped for them.
func TestRefreshesSkipABusySocket(t *testing.T) {
	l := newLine()
	h := newHarness(t, config{
		opts:               push.Options{Line: l.lookup, LineRefresh: 5 * time.Millisecond, SendBuffer: 4, WriteTimeout: time.Minute},
		smallSocketBuffers: true,
	})
	user := h.user("buyer")
	l.mu.Lock()
	l.moving = true
	l.mu.Unlock()
	h.connectWith(user, smallReadBuffer()) // reads the snapshot, then never again
	for i := range int64(20) {
		h.hub.Waiting(domain.NewEvent(100+i, 7+i, user, domain.StatusPending, strings.Repeat("x", 1024), t0))
	}
	testenv.Eventually(t, time.Minute, func() error {
		if n := h.hub.Connections(); n != 1 || strings.Contains(h.logs.String(), "dropping slow websocket client") {
			t.Fatalf("a socket that did not read its refreshes was dropped (%d connections)", n)
		}
		if calls, _ := l.counts(); calls < 300 {
			return fmt.Errorf("%d refreshes so far", calls)
		}
		return nil
	})
}
