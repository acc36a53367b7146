package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
)

func TestAuthentication(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(5)
	other, _ := auth.NewSigner(strings.Repeat("z", 40))
	forged, _ := other.Mint("mallory", auth.RoleAdmin, time.Hour)
	expired := func() string {
		tok, _ := s.signer.Mint("eve", auth.RoleBuyer, -time.Minute)
		return tok
	}()
	for name, tok := range map[string]string{"no token": "", "expired": expired, "forged": forged, "garbage": "abc"} {
		r := s.do("POST", "/v1/sales/"+sale.ID+"/orders", tok, nil)
		if r.status != http.StatusUnauthorized || r.problem(t).Code != wire.CodeUnauthorized {
			t.Errorf("%s: %d %s, want 401 UNAUTHORIZED", name, r.status, r.body)
		}
	}
	// A buyer may not create sales.
	r := s.do("POST", "/v1/sales", s.token("bob", auth.RoleBuyer), map[string]any{
		"name": "x", "price_cents": 1, "stock": 1, "starts_at": time.Now(), "ends_at": time.Now().Add(time.Hour)})
	if r.status != http.StatusForbidden || r.problem(t).Code != wire.CodeForbidden {
		t.Fatalf("buyer creating a sale: %d %s", r.status, r.body)
	}
	if r := s.do("GET", "/v1/sales/"+sale.ID+"/stats", s.token("bob", auth.RoleBuyer), nil); r.status != http.StatusForbidden {
		t.Fatalf("buyer reading stats: %d", r.status)
	}
	if r := s.do("GET", "/v1/sales", "", nil); r.status != http.StatusOK {
		t.Fatalf("listing sales is public: %d", r.status)
	}
}

// The api's handler, which a proxy publishes, serves no /metrics: a scrape
// reads Redis once per live sale (the relay backlog), and the series
// describe the system. The registry still holds them, for the binary's
// internal listener.
func TestMetricsAreNotOnThePublicHandler(t *testing.T) {
	srv, _, _ := admissionOnly(t, api.Config{})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET /metrics on the api handler: %d %.200s, want 404", rec.Code, rec.Body)
	}
	families, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		found = found || f.GetName() == "seckill_relay_backlog"
	}
	if !found {
		t.Fatal("the registry lacks the api's series (seckill_relay_backlog)")
	}
}

// Dev mode's token operation mints within the lifetimes seckill token
// keeps to: a day for a buyer, 12 hours for an admin.
func TestDevTokensAreBounded(t *testing.T) {
	srv, _, signer := admissionOnly(t, api.Config{DevTokens: true})
	for role, want := range map[string]time.Duration{auth.RoleBuyer: 24 * time.Hour, auth.RoleAdmin: 12 * time.Hour} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/dev/token", strings.NewReader(`{"user_id":"dev-1","role":"`+role+`"}`))
		req.Header.Set("Content-Type", "application/json")
		srv.Handler().ServeHTTP(rec, req)
		var body struct{ Token string }
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			t.Fatalf("%s: %d %s", role, rec.Code, rec.Body)
		}
		if _, err := signer.Verify(body.Token); err != nil {
			t.Fatalf("%s: the dev token does not verify: %v", role, err)
		}
		var c auth.Claims
		if _, _, err := jwt.NewParser().ParseUnverified(body.Token, &c); err != nil || c.ExpiresAt.Sub(c.IssuedAt.Time) != want {
			t.Errorf("%s: a dev token lives %v (%v), want %v", role, c.ExpiresAt.Sub(c.IssuedAt.Time), err, want)
		}
	}
}

func TestOrdersAndEventsArePrivate(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(5)
	aliceSocket, bobSocket := s.connect("alice"), s.connect("bob")
	var alices, bobs wire.Purchase
	s.buy(sale.ID, "alice").decode(t, &alices)
	s.buy(sale.ID, "bob").decode(t, &bobs)
	aliceSocket.await(t, alices.OrderID, domain.StatusAwaitingPayment)
	bobSocket.await(t, bobs.OrderID, domain.StatusAwaitingPayment)

	// Bob's token on Alice's order: as if it did not exist.
	for _, op := range []struct{ method, path string }{
		{"GET", "/v1/orders/" + alices.OrderID},
		{"POST", "/v1/orders/" + alices.OrderID + "/pay"},
		{"POST", "/v1/orders/" + alices.OrderID + "/cancel"},
	} {
		r := s.do(op.method, op.path, s.token("bob", auth.RoleBuyer), nil)
		if r.status != http.StatusNotFound || r.problem(t).Code != wire.CodeNotFound {
			t.Fatalf("%s %s with another buyer's token: %d %s", op.method, op.path, r.status, r.body)
		}
	}
	if o, _ := s.getOrder(alices.OrderID, "alice"); o.Status != domain.StatusAwaitingPayment {
		t.Fatalf("bob's requests changed alice's order: %+v", o)
	}
	var list []wire.Order
	s.do("GET", "/v1/orders", s.token("bob", auth.RoleBuyer), nil).decode(t, &list)
	if len(list) != 1 || list[0].ID != bobs.OrderID {
		t.Fatalf("bob's order list = %+v", list)
	}

	// Alice pays; only her socket hears of it. Bob's socket gets his own
	// cancel and nothing of Alice's.
	s.do("POST", "/v1/orders/"+alices.OrderID+"/pay", s.token("alice", auth.RoleBuyer), nil)
	s.do("POST", "/v1/orders/"+bobs.OrderID+"/cancel", s.token("bob", auth.RoleBuyer), nil)
	aliceSocket.await(t, alices.OrderID, domain.StatusPaid)
	bobSocket.await(t, bobs.OrderID, domain.StatusCancelled)
	for _, sk := range []struct {
		s    *socket
		mine string
	}{{aliceSocket, alices.OrderID}, {bobSocket, bobs.OrderID}} {
	drain:
		for {
			select {
			case e := <-sk.s.events:
				if e.OrderID != sk.mine {
					t.Fatalf("a socket received another user's event %+v", e)
				}
			default:
				break drain
			}
		}
	}
}

func TestWebsocketNeedsAValidToken(t *testing.T) {
	s := start(t, options{})
	base := "ws" + strings.TrimPrefix(s.url, "http") + "/v1/ws"
	for name, url := range map[string]string{
		"none":    base,
		"garbage": base + "?access_token=nope",
	} {
		_, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: err=%v resp=%v, want 401", name, err, resp)
		}
	}
	// Browsers send the token as a subprotocol.
	d := websocket.Dialer{Subprotocols: []string{"seckill.v1", "bearer." + s.token("carol", auth.RoleBuyer)}}
	conn, resp, err := d.Dial(base, nil)
	if err != nil {
		t.Fatalf("subprotocol token: %v %v", err, resp)
	}
	defer conn.Close()
	if conn.Subprotocol() != "seckill.v1" {
		t.Fatalf("selected subprotocol %q, want seckill.v1 (never the token)", conn.Subprotocol())
	}
}

func TestPurchaseRateLimitPerBuyer(t *testing.T) {
	s := start(t, options{cfg: api.Config{UserRate: 1}})
	sale := s.createSale(5)
	codes := map[int]int{}
	var limited response
	for range 5 {
		r := s.buy(sale.ID, "hasty")
		codes[r.status]++
		if r.status == http.StatusTooManyRequests {
			limited = r
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("5 purchases in a burst at 1/s: %v, want some 429", codes)
	}
	if p := limited.problem(t); p.Code != wire.CodeRateLimited || limited.header.Get("Retry-After") == "" {
		t.Fatalf("429 without RATE_LIMITED code or Retry-After: %+v %v", p, limited.header)
	}
	if got := s.sale(sale.ID); got.Remaining != 4 {
		t.Fatalf("remaining = %d, want 4: a limited request must reserve nothing", got.Remaining)
	}
}

func TestWebsocketConnectsAreRateLimitedPerUser(t *testing.T) {
	s := start(t, options{cfg: api.Config{WSConnectRate: 2}})
	url := "ws" + strings.TrimPrefix(s.url, "http") + "/v1/ws?access_token=" + s.token("looper", auth.RoleBuyer)
	limited := 0
	for range 6 {
		conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err == nil {
			conn.Close()
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("dial: %v %v", err, resp)
		}
		limited++
	}
	if limited == 0 {
		t.Fatal("6 connects in a burst at 2/s were all accepted")
	}
	// Another user is not affected.
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/v1/ws?access_token="+s.token("calm", auth.RoleBuyer), nil)
	if err != nil {
		t.Fatalf("another user's connect: %v", err)
	}
	conn.Close()
}

func TestOverloadIsShedAtOnce(t *testing.T) {
	s := start(t, options{cfg: api.Config{MaxInFlight: 1, UserRate: -1}})
	sale := s.createSale(1000)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		shed     int
	)
	for i := range 64 {
		wg.Go(func() {
			r := s.buy(sale.ID, fmt.Sprintf("crowd-%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case http.StatusAccepted:
				accepted++
			case http.StatusServiceUnavailable:
				if r.problem(t).Code != wire.CodeUnavailable || r.header.Get("Retry-After") == "" {
					t.Errorf("503 without UNAVAILABLE or Retry-After: %s %v", r.body, r.header)
				}
				shed++
			default:
				t.Errorf("answer %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if shed == 0 {
		t.Fatal("64 concurrent purchases with room for 1 in flight: nothing was shed")
	}
	if got := s.sale(sale.ID); got.Remaining != 1000-accepted {
		t.Fatalf("remaining %d after %d accepted: a shed request reserved a unit", got.Remaining, accepted)
	}
}

func TestPerAddressLimitBehindATrustedProxy(t *testing.T) {
	s := start(t, options{cfg: api.Config{IPRate: 2, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	sale := s.createSale(100)
	buyFrom := func(user, forwardedFor string) int {
		return s.do("POST", "/v1/sales/"+sale.ID+"/orders", s.token(user, auth.RoleBuyer), nil, "X-Forwarded-For", forwardedFor).status
	}
	limited := 0
	for i := range 5 {
		// The first hop is whatever the client wrote; the proxy appended the
		// real address last, and that is the one counted.
		if buyFrom(fmt.Sprintf("nat-%d", i), "198.51.100.9, 203.0.113.7") == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("5 purchases in a burst from one address at 2/s: none limited")
	}
	if st := buyFrom("elsewhere", "198.51.100.9"); st != http.StatusAccepted {
		t.Fatalf("a buyer from another address: %d, want 202", st)
	}
}
