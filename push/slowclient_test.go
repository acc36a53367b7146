package push_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

func TestSlowClientIsDroppedWithoutHoldingUpOthers(t *testing.T) {
	h := newHarness(t, config{
		// A write deadline far beyond the test: the slow client must be
		// dropped for its full buffer, not for a write timing out.
		opts:               push.Options{SendBuffer: 8, WriteTimeout: time.Minute},
		smallSocketBuffers: true,
	})
	user := h.user("buyer")
	slow := h.connectWith(user, smallReadBuffer()) // reads the snapshot, then never again
	good := h.connect(user)
	frames := readInBackground(good)

	// Big frames fill the slow client's socket buffers after a few dozen.
	reason := strings.Repeat("x", 2048)
	var published, got int64
	publishBatch := func() {
		// A batch is half the buffer and the good client drains it before
		// the next: it never has a reason to be dropped.
		for range 4 {
			published++
			h.publish(domain.NewEvent(published+100, 7, user, domain.StatusFailed, reason, t0))
		}
		for got < published {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("good client's socket closed after %d of %d events", got, published)
				}
				var e domain.Event
				if err := json.Unmarshal(f, &e); err != nil {
					t.Fatal(err)
				}
				got++
				if want := fmt.Sprint(got + 100); e.OrderID != want {
					t.Fatalf("good client got order %s, want %s", e.OrderID, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("good client stalled at %d of %d events", got, published)
			}
		}
	}
	for h.hub.Connections() == 2 {
		if published > 4000 {
			t.Fatal("the slow client was never dropped")
		}
		publishBatch()
	}
	t.Logf("slow client dropped after %d events", published)
	wantConnections(t, h, 1)
	readUntilClosed(t, slow)
	if !strings.Contains(h.logs.String(), "dropping slow websocket client") {
		t.Fatal("the drop was not for a full buffer")
	}
	publishBatch() // the good client is still served
}

func TestStalledWriteIsCutAtTheWriteDeadline(t *testing.T) {
	h := newHarness(t, config{
		// A buffer that cannot fill: only the write deadline can end the socket.
		opts:               push.Options{SendBuffer: 100_000, WriteTimeout: 300 * time.Millisecond},
		smallSocketBuffers: true,
	})
	user := h.user("buyer")
	stalled := h.connectWith(user, smallReadBuffer())
	reason := strings.Repeat("x", 2048)
	for i := range int64(3000) {
		h.publish(domain.NewEvent(i+100, 7, user, domain.StatusFailed, reason, t0))
		if i%100 == 0 && h.hub.Connections() == 0 {
			break
		}
	}
	wantConnections(t, h, 0)
	readUntilClosed(t, stalled)
	if strings.Contains(h.logs.String(), "dropping slow websocket client") {
		t.Fatal("dropped for a full buffer, want the write deadline")
	}
}

func TestKeepalive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ping    time.Duration
		answer  bool // the client answers pings with pongs
		dropped bool
	}{
		{name: "answering client stays", ping: 200 * time.Millisecond, answer: true, dropped: false},
		{name: "silent client is dropped", ping: 50 * time.Millisecond, answer: false, dropped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, config{opts: push.Options{PingInterval: tc.ping}})
			c := h.connect(h.user("buyer"))
			var pings atomic.Int32
			c.SetPingHandler(func(data string) error {
				pings.Add(1)
				if !tc.answer {
					return nil
				}
				return c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
			})
			readErr := make(chan error, 1)
			go func() {
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						readErr <- err
						return
					}
				}
			}()
			if tc.dropped {
				select {
				case <-readErr:
				case <-time.After(10 * time.Second):
					t.Fatal("a client that never answers pings is still connected")
				}
				wantConnections(t, h, 0)
				return
			}
			// Eight pings span four pong waits (2*PingInterval): each pong
			// has to have pushed the read deadline on.
			testenv.Eventually(t, 10*time.Second, func() error {
				if n := pings.Load(); n < 8 {
					return fmt.Errorf("%d pings so far", n)
				}
				return nil
			})
			select {
			case err := <-readErr:
				t.Fatalf("socket of a client answering pings closed: %v", err)
			default:
			}
			if n := h.hub.Connections(); n != 1 {
				t.Fatalf("Connections() = %d, want 1", n)
			}
		})
	}
}
