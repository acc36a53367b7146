package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
)

// sockets is an api instance over real Postgres and Redis with no Temporal
// behind it: the websocket needs none, and the tests publish the buyers'
// events themselves, as a worker would.
type sockets struct {
	t      *testing.T
	url    string
	signer *auth.Signer
	pub    *push.Publisher
	tag    string // makes user ids unique: pub/sub channels are shared by every test on the Redis
	nextID int64
}

func startSockets(t *testing.T, cfg api.Config) *sockets {
	t.Helper()
	cfg.NoRelay = true // nothing to start workflows on
	srv, _, signer := admissionOnly(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	rdb, _ := testenv.Redis(t)
	return &sockets{t: t, url: hs.URL, signer: signer, pub: push.NewPublisher(rdb), tag: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

func (s *sockets) user(name string) string { return name + "-" + s.tag }

func (s *sockets) mint(user string, ttl time.Duration) string {
	s.t.Helper()
	tok, err := s.signer.Mint(user, auth.RoleBuyer, ttl)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// open dials a socket with a token valid for an hour.
func (s *sockets) open(user string) *liveSocket { return s.openWith(s.mint(user, time.Hour)) }

func (s *sockets) openWith(token string) *liveSocket {
	s.t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/v1/ws?access_token="+token, nil)
	if err != nil {
		s.t.Fatalf("dial: %v (%v)", err, resp)
	}
	s.t.Cleanup(func() { _ = conn.Close() })
	ls := &liveSocket{conn: conn, events: make(chan domain.Event, 1024)}
	go func() {
		defer close(ls.events)
		for {
			var e domain.Event
			if err := conn.ReadJSON(&e); err != nil {
				ls.err, ls.closedAt = err, time.Now()
				return
			}
			ls.events <- e
		}
	}()
	return ls
}

// publish sends user an order event and returns its order id.
func (s *sockets) publish(user string) string {
	s.t.Helper()
	s.nextID++
	if err := s.pub.Publish(context.Background(), domain.NewEvent(s.nextID, 7, user, domain.StatusPaid, "", time.Now())); err != nil {
		s.t.Fatal(err)
	}
	return strconv.FormatInt(s.nextID, 10)
}

// live publishes events for user until ls receives one, and returns nil
// then, or the error that ended ls first. It is how a test knows the hub
// has subscribed the buyer (events published before are lost).
func (s *sockets) live(ls *liveSocket, user string) error {
	s.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(10 * time.Second)
	for {
		s.publish(user)
		select {
		case _, ok := <-ls.events:
			if !ok {
				return fmt.Errorf("socket ended: %w", ls.err)
			}
			return nil
		case <-timeout:
			s.t.Fatal("no event reached the socket within 10s")
		case <-tick.C:
		}
	}
}

func (s *sockets) mustBeLive(ls *liveSocket, user string) {
	s.t.Helper()
	if err := s.live(ls, user); err != nil {
		s.t.Fatal(err)
	}
}

// liveSocket is a websocket whose events a goroutine collects; err and
// closedAt are set when the server ends it, before events is closed.
type liveSocket struct {
	conn     *websocket.Conn
	events   chan domain.Event
	err      error
	closedAt time.Time
}

// await skips events until order's arrives.
func (ls *liveSocket) await(t *testing.T, order string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-ls.events:
			if !ok {
				t.Fatalf("socket ended before order %s arrived: %v", order, ls.err)
			}
			if e.OrderID == order {
				return
			}
		case <-timeout:
			t.Fatalf("order %s did not arrive within 10s", order)
		}
	}
}

// closed waits for the server to end ls and returns the close error.
func (ls *liveSocket) closed(t *testing.T) *websocket.CloseError {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ls.events:
			if !ok {
				var ce *websocket.CloseError
				if !errors.As(ls.err, &ce) {
					t.Fatalf("socket ended with %v, want a close frame", ls.err)
				}
				return ce
			}
		case <-timeout:
			t.Fatal("the server did not close the socket within 10s")
		}
	}
}

func wantClose(t *testing.T, ce *websocket.CloseError, code int, reason string) {
	t.Helper()
	if ce.Code != code || ce.Text != reason {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, code, reason)
	}
}

// A buyer's sockets beyond --ws-per-user are closed at once with 4008;
// the ones within the cap, and other buyers, are not disturbed, and a
// slot a socket gives back can be taken again.
func TestWebsocketsPerBuyerAreCapped(t *testing.T) {
	s := startSockets(t, api.Config{WSPerUser: 2, WSConnectRate: -1})
	alice, bob := s.user("alice"), s.user("bob")
	a1, a2 := s.open(alice), s.open(alice)
	s.mustBeLive(a1, alice)
	s.mustBeLive(a2, alice)

	wantClose(t, s.open(alice).closed(t), push.CloseTooManySockets, "too many sockets for this user")
	s.mustBeLive(s.open(bob), bob) // the cap is per buyer

	order := s.publish(alice)
	a1.await(t, order)
	a2.await(t, order)

	_ = a1.conn.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		return s.live(s.open(alice), alice) // refused until the server has seen a1 go
	})
	a2.await(t, s.publish(alice))
}

// Past --ws-max sockets on an instance, a new one is closed at once with
// 4008, whoever it belongs to; the open ones keep their events.
func TestWebsocketsPerInstanceAreCapped(t *testing.T) {
	s := startSockets(t, api.Config{WSMax: 2, WSConnectRate: -1})
	alice, bob, carol := s.user("alice"), s.user("bob"), s.user("carol")
	a, b := s.open(alice), s.open(bob)
	s.mustBeLive(a, alice)
	s.mustBeLive(b, bob)

	wantClose(t, s.open(carol).closed(t), push.CloseTooManySockets, "too many sockets on this server")
	wantClose(t, s.open(alice).closed(t), push.CloseTooManySockets, "too many sockets on this server")

	a.await(t, s.publish(alice))
	b.await(t, s.publish(bob))

	_ = b.conn.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		return s.live(s.open(carol), carol)
	})
	a.await(t, s.publish(alice))
}

// A socket lives no longer than its token: it is closed with 4001 at the
// token's expiry and gets nothing published after it, while a socket of
// the same buyer with a fresh token carries on.
func TestWebsocketClosesWhenItsTokenExpires(t *testing.T) {
	s := startSockets(t, api.Config{WSConnectRate: -1})
	user := s.user("brief")
	tok := s.mint(user, 2*time.Second)
	u, err := s.signer.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	expires := u.Expires
	keeper := s.open(user)
	brief := s.openWith(tok)
	s.mustBeLive(keeper, user)
	s.mustBeLive(brief, user)

	// Events go out every 50ms, each noted with when it was published,
	// until the keeper has one published after the expiry.
	var mu sync.Mutex
	publishedAt := map[string]time.Time{}
	stop, stopped := make(chan struct{}), make(chan struct{})
	stopPublishing := sync.OnceFunc(func() { close(stop); <-stopped })
	t.Cleanup(stopPublishing) // before the Redis client closes, if the test fails early
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := int64(1_000_000); ; i++ {
			id := strconv.FormatInt(i, 10)
			mu.Lock()
			publishedAt[id] = time.Now()
			mu.Unlock()
			if err := s.pub.Publish(context.Background(), domain.NewEvent(i, 7, user, domain.StatusPaid, "", time.Now())); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	after := func(e domain.Event) bool {
		mu.Lock()
		defer mu.Unlock()
		at, ok := publishedAt[e.OrderID]
		return ok && !at.Before(expires)
	}

	var got []domain.Event
	deadline := time.After(time.Until(expires) + 5*time.Second)
	for open := true; open; {
		select {
		case e, ok := <-brief.events:
			if ok {
				got = append(got, e)
			}
			open = ok
		case <-deadline:
			t.Fatalf("the socket was still open 5s after its token expired (%d events received)", len(got))
		}
	}
	var ce *websocket.CloseError
	if !errors.As(brief.err, &ce) {
		t.Fatalf("socket ended with %v, want a close frame", brief.err)
	}
	wantClose(t, ce, push.CloseTokenExpired, "token expired")
	if brief.closedAt.Before(expires) || brief.closedAt.After(expires.Add(1500*time.Millisecond)) {
		t.Errorf("closed at %v, want at the token's expiry %v", brief.closedAt, expires)
	}
	timeout := time.After(10 * time.Second)
	for waiting := true; waiting; {
		select {
		case e, ok := <-keeper.events:
			if !ok {
				t.Fatalf("the keeper's socket ended: %v", keeper.err)
			}
			waiting = !after(e)
		case <-timeout:
			t.Fatal("no event published after the expiry reached the keeper")
		}
	}
	stopPublishing()

	before := 0
	for _, e := range got {
		if after(e) {
			t.Errorf("order %s, published after the token expired, reached its socket", e.OrderID)
		} else if _, ours := publishedAt[e.OrderID]; ours {
			before++
		}
	}
	if before == 0 {
		t.Error("the socket got none of the events published before its token expired")
	}

	// A token past its expiry but within Verify's leeway for clock skew
	// opens a socket that is closed at once, with the same code.
	late := s.openWith(s.mint(user, -2*time.Second))
	wantClose(t, late.closed(t), push.CloseTokenExpired, "token expired")
}
