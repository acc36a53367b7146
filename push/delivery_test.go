package push_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

func TestEachUserGetsOnlyTheirOwnEvents(t *testing.T) {
	h := newHarness(t, config{})
	alice, bob := h.user("alice"), h.user("bob")
	a1, a2 := h.connect(alice), h.connect(alice)
	b := h.connect(bob)
	wantConnections(t, h, 3)
	if ids := h.pubsubConns(); len(ids) != 1 {
		t.Fatalf("hub holds %d pub/sub connections, want 1 shared by all sockets", len(ids))
	}
	if n := h.subscribers(alice); n != 1 {
		t.Fatalf("alice's channel has %d subscribers, want 1 for her two sockets", n)
	}

	// Bob's event goes first: an alice socket that received bob's events
	// would read it before her own.
	h.publish(order(20, bob, domain.StatusPaid))
	h.publish(order(10, alice, domain.StatusPaid))
	for i, c := range []*websocket.Conn{a1, a2} {
		if e := readEvent(t, c); e.OrderID != "10" {
			t.Fatalf("alice socket %d got order %s, want her order 10", i+1, e.OrderID)
		}
	}
	if e := readEvent(t, b); e.OrderID != "20" {
		t.Fatalf("bob got order %s, want his order 20", e.OrderID)
	}

	// The last socket of a user leaving unsubscribes; the others stay.
	_ = a1.Close()
	_ = a2.Close()
	wantConnections(t, h, 1)
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := h.subscribers(alice); n != 0 {
			return fmt.Errorf("alice's channel still has %d subscribers after her sockets closed", n)
		}
		return nil
	})
	if n := h.subscribers(bob); n != 1 {
		t.Fatalf("bob's channel has %d subscribers, want 1", n)
	}
	h.publish(order(21, bob, domain.StatusExpired))
	if e := readEvent(t, b); e.OrderID != "21" {
		t.Fatalf("bob got order %s, want 21", e.OrderID)
	}
}

func TestSnapshotFirstAndNothingLostWhileItIsRead(t *testing.T) {
	h := newHarness(t, config{
		// The hub's SUBSCRIBE reaches Redis long after it is written: a hub
		// that read the snapshot without waiting for Redis to apply it
		// would lose the event the snapshot publishes.
		redisLatency: 200 * time.Millisecond,
		snapshot: func(pub *push.Publisher) push.Snapshot {
			return func(ctx context.Context, userID string) ([]domain.Event, error) {
				// The order is paid while the snapshot is being read, too late to
				// be in it: only the live stream can deliver the payment.
				if err := pub.Publish(ctx, order(2, userID, domain.StatusPaid)); err != nil {
					return nil, err
				}
				return []domain.Event{order(2, userID, domain.StatusAwaitingPayment)}, nil
			}
		},
	})
	user := h.user("buyer")
	c, _, err := h.dial(user, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := readEvent(t, c); e.OrderID != "2" || e.Status != domain.StatusAwaitingPayment {
		t.Fatalf("first frame %+v, want the snapshot's order 2 AWAITING_PAYMENT", e)
	}
	if e := readEvent(t, c); e.OrderID != "2" || e.Status != domain.StatusPaid {
		t.Fatalf("second frame %+v, want order 2 PAID, published while the snapshot was read", e)
	}
	h.publish(order(3, user, domain.StatusFailed))
	if e := readEvent(t, c); e.OrderID != "3" || e.Status != domain.StatusFailed {
		t.Fatalf("third frame %+v, want the live order 3 FAILED", e)
	}
}

func TestFramesAreTheDomainEventJSON(t *testing.T) {
	h := newHarness(t, config{})
	user := h.user("buyer")
	c := h.connect(user)
	ctx := context.Background()
	for _, bad := range []string{`not json`, `{"type":"order","status":"PAID"}`, `{"type":"order","order_id":"1","status":"SHIPPED"}`} {
		if err := h.rdb.Publish(ctx, push.UserChannel(user), bad).Err(); err != nil {
			t.Fatal(err)
		}
	}
	h.publish(domain.NewEvent(42, 7, user, domain.StatusFailed, "sold out", t0))
	h.publish(domain.NewEvent(43, 7, user, domain.StatusPaid, "", t0))
	for _, want := range []string{
		`{"type":"order","order_id":"42","sale_id":"7","status":"FAILED","reason":"sold out","at":"2026-01-02T03:04:05Z"}`,
		`{"type":"order","order_id":"43","sale_id":"7","status":"PAID","at":"2026-01-02T03:04:05Z"}`,
	} {
		if got := string(readFrame(t, c)); got != want {
			t.Fatalf("frame\n got %s\nwant %s", got, want)
		}
	}
	// Events of one channel are handled in order, so the bad ones are
	// logged by the time the good ones arrive.
	var skipped int
	for line := range strings.Lines(h.logs.String()) {
		if strings.Contains(line, "skipping malformed order event") && strings.Contains(line, "user_id="+user) {
			skipped++
		}
	}
	if skipped != 3 {
		t.Fatalf("%d malformed payloads logged with the user id, want 3", skipped)
	}
}
