package push_test

import (
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
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// markerOrder is the order id of the one event the default snapshot holds.
// It reaches a socket only after the hub has confirmed the buyer's
// subscription, so a test that has read it may publish without losing events.
const markerOrder = "1"

func markerSnapshot(*push.Publisher) push.Snapshot {
	return func(_ context.Context, userID string) ([]domain.Event, error) {
		return []domain.Event{domain.NewEvent(1, 7, userID, domain.StatusPending, "", t0)}, nil
	}
}

type config struct {
	opts     push.Options
	snapshot func(*push.Publisher) push.Snapshot // default markerSnapshot
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
	pub  *push.Publisher
	hub  *push.Hub
	srv  *httptest.Server
	name string // CLIENT SETNAME of the hub's Redis connections
	logs *testenv.SyncBuffer
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

	h := &harness{t: t, rdb: rdb, pub: push.NewPublisher(rdb), name: name, logs: &testenv.SyncBuffer{}}
	opts := cfg.opts
	opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(h.logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	mk := cfg.snapshot
	if mk == nil {
		mk = markerSnapshot
	}
	h.hub = push.NewHub(hubRdb, mk(h.pub), opts)

	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		h.hub.Serve(w, r, q.Get("user"), time.Time{}, q.Get("proto"))
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
	ch := push.UserChannel(user)
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
