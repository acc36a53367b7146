package push_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

func TestRunCancelClosesSocketsAndReturns(t *testing.T) {
	h := newHarness(t, config{})
	a, b := h.connect(h.user("alice")), h.connect(h.user("bob"))
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, c := range []*websocket.Conn{a, b} {
		if err := readUntilClosed(t, c); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Fatalf("socket ended with %v, want close 1001 (going away)", err)
		}
	}
	if n := h.hub.Connections(); n != 0 {
		t.Fatalf("Connections() = %d after Run returned", n)
	}
	_, resp, err := h.dial(h.user("carol"), "", nil, nil)
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Run returned: %v, want 503", err)
	}
	if err := h.hub.Run(context.Background()); err == nil {
		t.Fatal("a second Run succeeded")
	}
}

func TestResubscribesAfterRedisConnectionLoss(t *testing.T) {
	h := newHarness(t, config{})
	alice := h.user("alice")
	c := h.connect(alice)
	ids := h.pubsubConns()
	if len(ids) != 1 {
		t.Fatalf("hub holds %d pub/sub connections, want 1", len(ids))
	}
	if err := h.rdb.Do(context.Background(), "CLIENT", "KILL", "ID", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		now := h.pubsubConns()
		if len(now) != 1 || now[0] == ids[0] {
			return fmt.Errorf("hub's pub/sub connections %v, want one replacing %s", now, ids[0])
		}
		if n := h.subscribers(alice); n != 1 {
			return fmt.Errorf("alice's channel has %d subscribers", n)
		}
		return nil
	})
	h.publish(order(9, alice, domain.StatusPaid))
	if e := readEvent(t, c); e.OrderID != "9" {
		t.Fatalf("got order %s, want 9", e.OrderID)
	}
	bob := h.user("bob")
	b := h.connect(bob) // a new buyer is subscribed on the new connection
	h.publish(order(10, bob, domain.StatusPaid))
	if e := readEvent(t, b); e.OrderID != "10" {
		t.Fatalf("got order %s, want 10", e.OrderID)
	}
}

// Sockets closed by their client while the hub is still opening them
// (subscribing, reading the snapshot) leave nothing behind: no socket
// counted, no subscription held for the buyer.
func TestSocketsClosedWhileOpeningLeaveNothingBehind(t *testing.T) {
	h := newHarness(t, config{redisLatency: 20 * time.Millisecond})
	users := make([]string, 20)
	var wg sync.WaitGroup
	for i := range users {
		users[i] = h.user(fmt.Sprintf("flaky%d", i))
		for range 10 {
			wg.Go(func() {
				c, _, err := h.dial(users[i], "", nil, nil)
				if err == nil {
					_ = c.Close() // before the snapshot arrives
				}
			})
		}
	}
	wg.Wait()
	testenv.Eventually(t, 10*time.Second, func() error {
		subs := int64(0)
		for _, u := range users {
			subs += h.subscribers(u)
		}
		if n := h.hub.Connections(); n != 0 || subs != 0 {
			return fmt.Errorf("%d sockets counted, %d subscriptions after every client left", n, subs)
		}
		return nil
	})
	user := users[0]
	// The buyer still gets events on a new socket.
	c := h.connect(user)
	h.publish(domain.NewEvent(2, 7, user, domain.StatusAwaitingPayment, "", t0))
	if e := readEvent(t, c); e.OrderID != "2" {
		t.Fatalf("got order %s, want 2", e.OrderID)
	}
}
