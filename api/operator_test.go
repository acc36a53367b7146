package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	entsale "github.com/seckill/seckill/ent/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
)

func (s *system) admin() string { return s.token("ops", auth.RoleAdmin) }

// race sends one purchase for each user at once and returns the order ids
// of the winners and the count of each other answer, by code.
func (s *system) race(saleID string, users []string) (map[string]string, map[string]int) {
	s.t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = map[string]string{}
		codes   = map[string]int{}
	)
	for _, u := range users {
		wg.Go(func() {
			r := s.buy(saleID, u)
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case http.StatusAccepted:
				var p wire.Purchase
				r.decode(s.t, &p)
				winners[u] = p.OrderID
			case http.StatusConflict:
				codes[r.problem(s.t).Code]++
			default:
				codes[fmt.Sprint(r.status)]++
			}
		})
	}
	wg.Wait()
	return winners, codes
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func (s *system) stats(saleID string) wire.SaleStats {
	s.t.Helper()
	r := s.do("GET", "/v1/sales/"+saleID+"/stats", s.admin(), nil)
	if r.status != http.StatusOK {
		s.t.Fatalf("stats: %d %s", r.status, r.body)
	}
	var st wire.SaleStats
	r.decode(s.t, &st)
	return st
}

func (s *system) waitAll(winners map[string]string, status domain.Status) {
	s.t.Helper()
	for u, id := range winners {
		s.waitStatus(id, u, status)
	}
}

func TestAddUnitsWhileBuyersRace(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(20)

	// Units arrive in the middle of a race.
	var (
		added     wire.Sale
		addStatus int
		wg        sync.WaitGroup
	)
	wg.Go(func() {
		time.Sleep(20 * time.Millisecond)
		r := s.do("POST", "/v1/sales/"+sale.ID+"/units", s.admin(), map[string]any{"units": 30})
		addStatus = r.status
		if r.status == http.StatusOK {
			r.decode(t, &added)
		}
	})
	first, codes := s.race(sale.ID, users("first", 80))
	wg.Wait()
	if addStatus != http.StatusOK || added.Stock != 50 {
		t.Fatalf("add units: %d %+v", addStatus, added)
	}
	if len(first) < 20 || len(first) > 50 || len(first)+codes[wire.CodeSoldOut] != 80 {
		t.Fatalf("first race: %d winners, answers %v", len(first), codes)
	}
	// Everyone admitted after the add gets a unit while units last, though
	// this instance had flagged the sale sold out.
	left := 50 - len(first)
	second, codes := s.race(sale.ID, users("second", left+10))
	if len(second) != left || codes[wire.CodeSoldOut] != 10 {
		t.Fatalf("after the add: %d winners of %d units left, answers %v", len(second), left, codes)
	}
	if got := s.sale(sale.ID); got.Stock != 50 || got.Remaining != 0 || got.State != "sold_out" {
		t.Fatalf("sale after the races: %+v", got)
	}
	s.waitAll(first, domain.StatusAwaitingPayment)
	s.waitAll(second, domain.StatusAwaitingPayment)
	if r := s.audit(sale.ID, audit.Expect{Settled: true}); !r.OK() || r.TotalStock != 50 || r.LiveOrders != 50 {
		t.Fatal(r)
	}
}

func TestEndSaleDuringARace(t *testing.T) {
	s := start(t, options{cfg: api.Config{UserRate: 100}})
	sale := s.createSale(1000)

	var (
		ended   atomic.Bool
		mu      sync.Mutex
		winners = map[string]string{}
		late    []string // answers that began after the end was confirmed
		wg      sync.WaitGroup
	)
	for i, u := range users("racer", 200) {
		wg.Go(func() {
			time.Sleep(time.Duration(i%50) * time.Millisecond)
			after := ended.Load()
			r := s.buy(sale.ID, u)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == http.StatusAccepted:
				var p wire.Purchase
				r.decode(t, &p)
				winners[u] = p.OrderID
				if after {
					late = append(late, "202")
				}
			case after:
				late = append(late, r.problem(t).Code)
			case r.problem(t).Code != wire.CodeEnded:
				t.Errorf("%s: %d %s", u, r.status, r.body)
			}
		})
	}
	time.Sleep(15 * time.Millisecond)
	r := s.do("POST", "/v1/sales/"+sale.ID+"/end", s.admin(), nil)
	ended.Store(true)
	wg.Wait()
	if r.status != http.StatusOK {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	var got wire.Sale
	r.decode(t, &got)
	if got.State != "ended" || got.EndsAt.After(time.Now()) {
		t.Fatalf("ended sale: %+v", got)
	}
	for _, code := range late {
		if code != wire.CodeEnded {
			t.Fatalf("a purchase sent after the end answered %s", code)
		}
	}
	after, codes := s.race(sale.ID, users("after", 20))
	if len(after) != 0 || codes[wire.CodeEnded] != 20 {
		t.Fatalf("purchases after the end: %d admitted, answers %v", len(after), codes)
	}
	// Idempotent: ending again keeps the first end.
	r = s.do("POST", "/v1/sales/"+sale.ID+"/end", s.admin(), nil)
	var again wire.Sale
	r.decode(t, &again)
	if r.status != http.StatusOK || !again.EndsAt.Equal(got.EndsAt) {
		t.Fatalf("second end: %d %+v, want ends_at %s", r.status, again, got.EndsAt)
	}
	// Adding units to an ended sale is refused.
	if r := s.do("POST", "/v1/sales/"+sale.ID+"/units", s.admin(), map[string]any{"units": 5}); r.status != http.StatusConflict || r.problem(t).Code != wire.CodeEnded {
		t.Fatalf("add units to an ended sale: %d %s", r.status, r.body)
	}
	// Orders admitted before the end carry on.
	s.waitAll(winners, domain.StatusAwaitingPayment)
	if r := s.audit(sale.ID, audit.Expect{Settled: true}); !r.OK() || r.TotalStock != 1000 || r.LiveOrders != len(winners) {
		t.Fatal(r)
	}
	t.Logf("%d admitted before the end", len(winners))
}

func TestCancelSale(t *testing.T) {
	// hold keeps the relay from starting workflows, so orders stay PENDING.
	var hold atomic.Bool
	s := start(t, options{cfg: api.Config{Relay: relay.Options{BeforeStart: func(ctx context.Context, _ []int64) {
		for hold.Load() && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}}}})
	sale := s.createSale(10)
	buy := func(u string) string {
		r := s.buy(sale.ID, u)
		if r.status != http.StatusAccepted {
			t.Fatalf("buy %s: %d %s", u, r.status, r.body)
		}
		var p wire.Purchase
		r.decode(t, &p)
		return p.OrderID
	}
	awaiting := map[string]string{}
	for _, u := range []string{"payer", "a", "b", "c"} {
		awaiting[u] = buy(u)
	}
	s.waitAll(awaiting, domain.StatusAwaitingPayment)
	payer := awaiting["payer"]
	delete(awaiting, "payer")
	// A slow Temporal may answer 503 (not confirmed in time): retry until paid.
	testenv.Eventually(t, time.Minute, func() error {
		if o, _ := s.getOrder(payer, "payer"); o.Status == domain.StatusPaid {
			return nil
		}
		r := s.do("POST", "/v1/orders/"+payer+"/pay", s.token("payer", auth.RoleBuyer), nil)
		return fmt.Errorf("pay: %d %s", r.status, r.body)
	})
	hold.Store(true)
	pending := map[string]string{}
	for _, u := range []string{"p1", "p2", "p3"} {
		pending[u] = buy(u)
	}

	r := s.do("POST", "/v1/sales/"+sale.ID+"/cancel", s.admin(), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var cancelled wire.Sale
	r.decode(t, &cancelled)
	if cancelled.State != "cancelled" || cancelled.CancelledAt == nil || cancelled.EndsAt.After(time.Now()) {
		t.Fatalf("cancelled sale: %+v", cancelled)
	}
	if st := s.stats(sale.ID); !st.Cancelling || st.OpenOrders < 3 {
		t.Fatalf("stats while the pending orders are held: %+v", st)
	}
	// Purchases answer ENDED; adding units is refused.
	if p := s.buy(sale.ID, "newcomer").problem(t); p.Code != wire.CodeEnded {
		t.Fatalf("purchase on a cancelled sale: %+v", p)
	}
	if r := s.do("POST", "/v1/sales/"+sale.ID+"/units", s.admin(), map[string]any{"units": 5}); r.status != http.StatusConflict || r.problem(t).Code != wire.CodeEnded {
		t.Fatalf("add units to a cancelled sale: %d %s", r.status, r.body)
	}
	// The orders awaiting payment are cancelled through their workflows.
	for u, id := range awaiting {
		s.waitStatus(id, u, domain.StatusCancelled)
		if o, _ := s.getOrder(id, u); o.Reason != api.SaleCancelledReason {
			t.Fatalf("order %s reason %q", id, o.Reason)
		}
	}
	// The pending ones find the sale cancelled once their workflows start.
	hold.Store(false)
	for u, id := range pending {
		s.waitStatus(id, u, domain.StatusCancelled)
		if o, _ := s.getOrder(id, u); o.Reason != "sale cancelled" {
			t.Fatalf("pending order %s reason %q", id, o.Reason)
		}
	}
	s.waitStatus(payer, "payer", domain.StatusPaid)
	testenv.Eventually(t, time.Minute, func() error {
		st := s.stats(sale.ID)
		if st.Cancelling || st.OpenOrders != 0 || st.DBStock != 9 || st.RedisRemaining != 9 {
			return fmt.Errorf("stats after the cancellation: %+v", st)
		}
		return nil
	})
	// Cancelling again is harmless.
	if r := s.do("POST", "/v1/sales/"+sale.ID+"/cancel", s.admin(), nil); r.status != http.StatusAccepted {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
	if got := s.sale(sale.ID); got.State != "cancelled" || got.Remaining != 9 {
		t.Fatalf("sale after the cancellation: %+v", got)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if r := s.audit(sale.ID, audit.Expect{Quiescent: true}); !r.OK() {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
}

func TestSalePaymentTimeout(t *testing.T) {
	s := start(t, options{})
	admin := s.admin()
	create := func(body map[string]any) wire.Sale {
		body["name"], body["price_cents"], body["stock"] = "quick", 100, 5
		body["starts_at"], body["ends_at"] = time.Now().Add(-time.Second), time.Now().Add(time.Hour)
		r := s.do("POST", "/v1/sales", admin, body)
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		var sl wire.Sale
		r.decode(t, &sl)
		return sl
	}
	if sl := create(map[string]any{}); sl.PaymentTimeoutSeconds != 15*60 {
		t.Fatalf("default payment timeout %d, want the server's 900", sl.PaymentTimeoutSeconds)
	}
	sale := create(map[string]any{"payment_timeout_seconds": 10})
	if got := s.sale(sale.ID); got.PaymentTimeoutSeconds != 10 {
		t.Fatalf("GET shows payment_timeout_seconds %d, want 10", got.PaymentTimeoutSeconds)
	}
	winners, codes := s.race(sale.ID, users("slow", 3))
	if len(winners) != 3 {
		t.Fatalf("purchases: %v %v", winners, codes)
	}
	start := time.Now()
	s.waitAll(winners, domain.StatusExpired)
	if d := time.Since(start); d > 90*time.Second {
		t.Fatalf("orders expired after %s with a 10s payment timeout", d)
	}
	for u, id := range winners {
		if o, _ := s.getOrder(id, u); o.Reason != "payment timeout" {
			t.Fatalf("order %s: %+v", id, o)
		}
	}
	testenv.Eventually(t, time.Minute, func() error {
		if r := s.audit(sale.ID, audit.Expect{Quiescent: true}); !r.OK() {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	if got := s.sale(sale.ID); got.Remaining != 5 {
		t.Fatalf("remaining %d after the expiries, want 5", got.Remaining)
	}
}

func TestOperatorBadInputChangesNothing(t *testing.T) {
	s := start(t, options{})
	sale := s.sale(s.createSale(10).ID) // as the database keeps it
	admin, buyer := s.admin(), s.token("mallory", auth.RoleBuyer)
	units := "/v1/sales/" + sale.ID + "/units"
	cases := []struct {
		name, path, token string
		body              any
		want              int
	}{
		{"zero units", units, admin, map[string]any{"units": 0}, http.StatusUnprocessableEntity},
		{"negative units", units, admin, map[string]any{"units": -5}, http.StatusUnprocessableEntity},
		{"huge units", units, admin, map[string]any{"units": 1_000_001}, http.StatusUnprocessableEntity},
		{"overflowing units", units, admin, `{"units": 99999999999999999999999}`, http.StatusUnprocessableEntity},
		{"units as text", units, admin, map[string]any{"units": "ten"}, http.StatusUnprocessableEntity},
		{"no units", units, admin, map[string]any{}, http.StatusUnprocessableEntity},
		{"malformed body", units, admin, `{"units": `, http.StatusBadRequest},
		{"unknown sale units", "/v1/sales/4242424242/units", admin, map[string]any{"units": 1}, http.StatusNotFound},
		{"unknown sale end", "/v1/sales/4242424242/end", admin, nil, http.StatusNotFound},
		{"unknown sale cancel", "/v1/sales/4242424242/cancel", admin, nil, http.StatusNotFound},
		{"bad sale id", "/v1/sales/abc/end", admin, nil, http.StatusUnprocessableEntity},
		{"buyer adds units", units, buyer, map[string]any{"units": 1}, http.StatusForbidden},
		{"buyer ends", "/v1/sales/" + sale.ID + "/end", buyer, nil, http.StatusForbidden},
		{"buyer cancels", "/v1/sales/" + sale.ID + "/cancel", buyer, nil, http.StatusForbidden},
		{"no token", "/v1/sales/" + sale.ID + "/cancel", "", nil, http.StatusUnauthorized},
		{"short payment timeout", "/v1/sales", admin, map[string]any{"name": "bad-" + sale.ID, "price_cents": 1, "stock": 1,
			"starts_at": time.Now(), "ends_at": time.Now().Add(time.Hour), "payment_timeout_seconds": 9}, http.StatusUnprocessableEntity},
		{"long payment timeout", "/v1/sales", admin, map[string]any{"name": "bad-" + sale.ID, "price_cents": 1, "stock": 1,
			"starts_at": time.Now(), "ends_at": time.Now().Add(time.Hour), "payment_timeout_seconds": 86_401}, http.StatusUnprocessableEntity},
	}
	for _, tc := range cases {
		r := s.do("POST", tc.path, tc.token, tc.body)
		if r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, truncate(r.body), tc.want)
			continue
		}
		if p := r.problem(t); p.Code == "" || p.Status != tc.want {
			t.Errorf("%s: problem %+v", tc.name, p)
		}
	}
	got := s.sale(sale.ID)
	if got.Stock != 10 || got.Remaining != 10 || got.State != "active" || got.CancelledAt != nil || !got.EndsAt.Equal(sale.EndsAt) {
		t.Fatalf("bad input changed the sale: %+v (was %+v)", got, sale)
	}
	if n, _ := s.store.Client().Sale.Query().Where(entsale.Name("bad-" + sale.ID)).Count(context.Background()); n != 0 {
		t.Fatalf("bad input created %d sales", n)
	}
	if r := s.audit(sale.ID, audit.Expect{Quiescent: true}); !r.OK() {
		t.Fatal(r)
	}
}
