package push_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// markerOrder is the order id of the one event the default snapshot holds.
// It reaches a socket only after the hub has confirmed the buyer's
// subscription, so a test that has read it may publish without losing events.
const markerOrder = "1"

func markerSnapshot(*events.Publisher) push.Snapshot {
	return func(_ context.Context, userID string) ([]domain.Event, error) {
		return []domain.Event{domain.NewEvent(1, 7, userID, domain.StatusPending, "", t0)}, nil
	}
}

type config struct {
	opts     push.Options
	snapshot func(*events.Publisher) push.Snapshot // default markerSnapshot
	// smallSocketBuffers shrinks the server's TCP send buffers, so a client
	// that does not read blocks the server's writes after a few frames
	// instead of megabytes of them.
	smallSocketBuffers bool
	// redisLatency delays every command the hub sends to Redis, widening
	// the window between a command being written and Redis applying it.
	redisLatency time.Duration
}

type harness struct {
	t    *testing.T
	rdb  *redis.Client // the test's own client, to publish and inspect
	pub  *events.Publisher
	hub  *push.Hub
	srv  *httptest.Server
	name string // CLIENT SETNAME of the hub's Redis connections
	logs *syncBuffer
	stop func() error // cancels Run and returns its result
}

func newHarness(t *testing.T, cfg config) *harness {
	t.Helper()
	rdb, db := testenv.Redis(t)
	name := fmt.Sprintf("push-test-%d", time.Now().UnixNano())
	addr := testenv.RedisAddr(t)
	if cfg.redisLatency > 0 {
		addr = slowProxy(t, addr, cfg.redisLatency)
	}
	hubRdb := redis.NewClient(&redis.Options{Addr: addr, DB: db, ClientName: name})
	t.Cleanup(func() { _ = hubRdb.Close() })

	h := &harness{t: t, rdb: rdb, pub: events.NewPublisher(rdb), name: name, logs: &syncBuffer{}}
	opts := cfg.opts
	opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(h.logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	mk := cfg.snapshot
	if mk == nil {
		mk = markerSnapshot
	}
	h.hub = push.NewHub(hubRdb, mk(h.pub), opts)

	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		h.hub.Serve(w, r, q.Get("user"), q.Get("proto"))
	}))
	if cfg.smallSocketBuffers {
		h.srv.Listener = smallSendBuffers{h.srv.Listener}
	}
	h.srv.Start()
	t.Cleanup(h.srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- h.hub.Run(ctx) }()
	var once sync.Once
	var err error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-runErr:
			case <-time.After(15 * time.Second):
				err = errors.New("Run did not return within 15s of its context ending")
			}
		})
		return err
	}
	// Registered after srv.Close, so it runs first: the hub closes its
	// sockets before the server goes away.
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// user returns a user id no other test, in this process or another sharing
// the Redis (pub/sub channels are not per database), uses.
func (h *harness) user(name string) string { return name + "-" + h.name }

func (h *harness) dial(user, proto string, header http.Header, d *websocket.Dialer) (*websocket.Conn, *http.Response, error) {
	h.t.Helper()
	if d == nil {
		d = &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	}
	u := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/?user=" + url.QueryEscape(user) + "&proto=" + url.QueryEscape(proto)
	c, resp, err := d.Dial(u, header)
	if c != nil {
		h.t.Cleanup(func() { _ = c.Close() })
	}
	return c, resp, err
}

// connect opens a socket of user and returns once the hub is subscribed for
// it (the snapshot has arrived).
func (h *harness) connect(user string) *websocket.Conn {
	h.t.Helper()
	return h.connectWith(user, nil)
}

func (h *harness) connectWith(user string, d *websocket.Dialer) *websocket.Conn {
	h.t.Helper()
	c, _, err := h.dial(user, "", nil, d)
	if err != nil {
		h.t.Fatalf("dial as %s: %v", user, err)
	}
	if e := readEvent(h.t, c); e.OrderID != markerOrder {
		h.t.Fatalf("first frame is order %s, want the snapshot's order %s", e.OrderID, markerOrder)
	}
	return c
}

func (h *harness) publish(e domain.Event) {
	h.t.Helper()
	if err := h.pub.Publish(context.Background(), e); err != nil {
		h.t.Fatal(err)
	}
}

// subscribers is the number of Redis connections subscribed to user's channel.
func (h *harness) subscribers(user string) int64 {
	h.t.Helper()
	ch := events.UserChannel(user)
	n, err := h.rdb.PubSubNumSub(context.Background(), ch).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return n[ch]
}

// pubsubConns returns the ids of the hub's Redis connections in pub/sub mode.
func (h *harness) pubsubConns() []string {
	h.t.Helper()
	out, err := h.rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for line := range strings.Lines(out) {
		var id, name string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				id = v
			case "name":
				name = v
			}
		}
		if name == h.name {
			ids = append(ids, id)
		}
	}
	return ids
}

func order(id int64, user string, status domain.Status) domain.Event {
	return domain.NewEvent(id, 7, user, status, "", t0)
}

func readFrame(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("frame type %d, want text", typ)
	}
	_ = c.SetReadDeadline(time.Time{})
	return b
}

func readEvent(t *testing.T, c *websocket.Conn) domain.Event {
	t.Helper()
	var e domain.Event
	if err := json.Unmarshal(readFrame(t, c), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// readUntilClosed reads until the server ends the socket and returns the
// error that ended it.
func readUntilClosed(t *testing.T, c *websocket.Conn) error {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server did not close the socket")
			}
			return err
		}
	}
}

func wantConnections(t *testing.T, h *harness, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := h.hub.Connections(); got != n {
			return fmt.Errorf("Connections() = %d, want %d", got, n)
		}
		return nil
	})
}

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
		snapshot: func(pub *events.Publisher) push.Snapshot {
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

func TestOversizedClientMessageIsRejected(t *testing.T) {
	h := newHarness(t, config{opts: push.Options{MaxMessageBytes: 64}})
	user := h.user("buyer")
	c := h.connect(user)
	if err := c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("a"), 64)); err != nil {
		t.Fatal(err)
	}
	// A message at the limit is ignored and the socket keeps working.
	h.publish(order(5, user, domain.StatusPaid))
	if e := readEvent(t, c); e.OrderID != "5" {
		t.Fatalf("got order %s, want 5", e.OrderID)
	}
	if err := c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("a"), 65)); err != nil {
		t.Fatal(err)
	}
	err := readUntilClosed(t, c)
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("socket ended with %v, want close 1009 (message too big)", err)
	}
	wantConnections(t, h, 0)
}

func TestOriginCheck(t *testing.T) {
	const shop = "http://shop.example"
	for _, tc := range []struct {
		name    string
		allowed []string
		origin  string // "self" = the server's own origin
		want    int
	}{
		{name: "no origin, not a browser", origin: "", want: http.StatusSwitchingProtocols},
		{name: "same origin by default", origin: "self", want: http.StatusSwitchingProtocols},
		{name: "other origin refused by default", origin: shop, want: http.StatusForbidden},
		{name: "allowed origin", allowed: []string{shop}, origin: shop, want: http.StatusSwitchingProtocols},
		{name: "same origin besides the allowed", allowed: []string{shop}, origin: "self", want: http.StatusSwitchingProtocols},
		{name: "origin not in the list", allowed: []string{shop}, origin: "http://evil.example", want: http.StatusForbidden},
		{name: "allowed host on another port", allowed: []string{shop}, origin: shop + ":8080", want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, config{opts: push.Options{AllowedOrigins: tc.allowed}})
			header := http.Header{}
			switch tc.origin {
			case "":
			case "self":
				header.Set("Origin", h.srv.URL)
			default:
				header.Set("Origin", tc.origin)
			}
			c, resp, err := h.dial(h.user("buyer"), "", header, nil)
			if resp == nil {
				t.Fatalf("no handshake response: %v", err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("handshake status %d, want %d (err %v)", resp.StatusCode, tc.want, err)
			}
			if c != nil {
				if e := readEvent(t, c); e.OrderID != markerOrder {
					t.Fatalf("got order %s, want the snapshot", e.OrderID)
				}
			}
		})
	}
}

func TestSubprotocolIsEchoed(t *testing.T) {
	h := newHarness(t, config{})
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{"seckill.v1", "token.abc"}}
	for _, proto := range []string{"token.abc", ""} {
		c, resp, err := h.dial(h.user("buyer"), proto, nil, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != proto || c.Subprotocol() != proto {
			t.Fatalf("selected subprotocol %q (conn %q), want %q", got, c.Subprotocol(), proto)
		}
	}
}

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

func TestFramesAreTheDomainEventJSON(t *testing.T) {
	h := newHarness(t, config{})
	user := h.user("buyer")
	c := h.connect(user)
	ctx := context.Background()
	for _, bad := range []string{`not json`, `{"type":"order","status":"PAID"}`, `{"type":"order","order_id":"1","status":"SHIPPED"}`} {
		if err := h.rdb.Publish(ctx, events.UserChannel(user), bad).Err(); err != nil {
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

// readInBackground returns the frames c receives; the channel closes when c does.
func readInBackground(c *websocket.Conn) <-chan []byte {
	out := make(chan []byte, 1024)
	go func() {
		defer close(out)
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			out <- b
		}
	}()
	return out
}

// smallReadBuffer is a dialer whose sockets take little data in before the
// sender blocks, as a client that stopped reading on a slow network would.
func smallReadBuffer() *websocket.Dialer {
	return &websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		},
	}
}

// slowProxy forwards connections to addr, holding each chunk a client sends
// for latency before passing it on, in order. It returns its own address.
func slowProxy(t *testing.T, addr string, latency time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	type chunk struct {
		b  []byte
		at time.Time
	}
	wg.Go(func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				_ = client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Go(func() {
				_, _ = io.Copy(client, server)
				_ = client.Close()
			})
			chunks := make(chan chunk, 1024)
			wg.Go(func() {
				defer close(chunks)
				for {
					b := make([]byte, 32<<10)
					n, err := client.Read(b)
					if n > 0 {
						chunks <- chunk{b[:n], time.Now()}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				defer server.Close()
				for c := range chunks {
					time.Sleep(time.Until(c.at.Add(latency))) // the injected latency, not a synchronisation
					if _, err := server.Write(c.b); err != nil {
						return
					}
				}
			})
		}
	})
	return l.Addr().String()
}

type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, nil
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
