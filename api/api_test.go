package api_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

func (s *system) audit(saleID string, exp audit.Expect) audit.Report {
	s.t.Helper()
	var id int64
	fmt.Sscan(saleID, &id)
	r, err := audit.Sale(context.Background(), audit.Sources{Store: s.store, Stock: s.stock, Temporal: s.tc}, id, exp)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

func TestFlashSaleOverHTTP(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(100)
	const buyers = 500
	user := func(i int) string { return fmt.Sprintf("buyer-%03d", i) }

	// Half the buyers watch their socket from the start; the other half
	// connect only once their order exists.
	early := map[string]*socket{}
	for i := 0; i < buyers; i += 2 {
		early[user(i)] = s.connect(user(i))
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = map[string]string{} // user -> order id
		codes   = map[string]int{}
	)
	for i := range buyers {
		wg.Go(func() {
			r := s.buy(sale.ID, user(i))
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case http.StatusAccepted:
				var p wire.Purchase
				r.decode(t, &p)
				if p.Status != domain.StatusPending || p.WorkflowID != "order-"+p.OrderID {
					t.Errorf("purchase answer %+v", p)
				}
				winners[user(i)] = p.OrderID
				codes["202"]++
			case http.StatusConflict:
				codes[r.problem(t).Code]++
			default:
				codes[fmt.Sprint(r.status)]++
			}
		})
	}
	wg.Wait()
	if codes["202"] != 100 || codes[wire.CodeSoldOut] != 400 || len(codes) != 2 {
		t.Fatalf("answers = %v, want 100 × 202 and 400 × SOLD_OUT", codes)
	}

	for u, id := range winners {
		if sk, ok := early[u]; ok {
			sk.await(t, id, domain.StatusAwaitingPayment)
		}
	}
	for u, id := range winners {
		if _, ok := early[u]; !ok {
			s.waitStatus(id, u, domain.StatusAwaitingPayment)
			// Connecting late still delivers the result.
			s.connect(u).await(t, id, domain.StatusAwaitingPayment)
		}
	}
	if got := s.sale(sale.ID); got.Remaining != 0 || got.State != "sold_out" {
		t.Fatalf("sale after the rush: %+v", got)
	}
	if r := s.audit(sale.ID, audit.Expect{Settled: true}); !r.OK() {
		t.Fatal(r)
	}
}

func TestSameBuyerConcurrentRequestsGetOneOrder(t *testing.T) {
	s := start(t, options{cfg: api.Config{UserRate: 100}})
	sale := s.createSale(10)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []string
		already  []string
	)
	for range 20 {
		wg.Go(func() {
			r := s.buy(sale.ID, "greedy")
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case http.StatusAccepted:
				var p wire.Purchase
				r.decode(t, &p)
				accepted = append(accepted, p.OrderID)
			case http.StatusConflict:
				p := r.problem(t)
				if p.Code != wire.CodeAlreadyPurchased {
					t.Errorf("code %s", p.Code)
				}
				already = append(already, p.OrderID)
			default:
				t.Errorf("answer %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if len(accepted) != 1 || len(already) != 19 {
		t.Fatalf("%d accepted, %d already purchased; want 1 and 19", len(accepted), len(already))
	}
	for _, id := range already {
		if id != accepted[0] {
			t.Fatalf("ALREADY_PURCHASED carried order %q, want %q", id, accepted[0])
		}
	}
	// A retry with the Idempotency-Key of a winning request is the same success.
	r1 := s.do("POST", "/v1/sales/"+sale.ID+"/orders", s.token("keyed", auth.RoleBuyer), nil, "Idempotency-Key", "k1")
	r2 := s.do("POST", "/v1/sales/"+sale.ID+"/orders", s.token("keyed", auth.RoleBuyer), nil, "Idempotency-Key", "k1")
	if r1.status != http.StatusAccepted || r2.status != http.StatusAccepted || string(r1.body) != string(r2.body) {
		t.Fatalf("idempotent retry: %d %s / %d %s", r1.status, r1.body, r2.status, r2.body)
	}
	if got := s.sale(sale.ID); got.Remaining != 8 {
		t.Fatalf("remaining = %d, want 8", got.Remaining)
	}
}

func TestPayAndCancel(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(2)
	buy := func(user string) string {
		r := s.buy(sale.ID, user)
		if r.status != http.StatusAccepted {
			t.Fatalf("buy: %d %s", r.status, r.body)
		}
		var p wire.Purchase
		r.decode(t, &p)
		return p.OrderID
	}
	payer, canceller := buy("payer"), buy("canceller")
	ps, cs := s.connect("payer"), s.connect("canceller")
	ps.await(t, payer, domain.StatusAwaitingPayment)
	cs.await(t, canceller, domain.StatusAwaitingPayment)

	r := s.do("POST", "/v1/orders/"+payer+"/pay", s.token("payer", auth.RoleBuyer), nil)
	if r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("pay: %d %s", r.status, r.body)
	}
	ps.await(t, payer, domain.StatusPaid)
	s.waitStatus(payer, "payer", domain.StatusPaid)
	if r.status == http.StatusOK {
		// The pay's answer, which comes from the update's answer and not
		// from a second read of the row, is the order as a read shows it.
		var paid, read map[string]any
		r.decode(t, &paid)
		s.do("GET", "/v1/orders/"+payer, s.token("payer", auth.RoleBuyer), nil).decode(t, &read)
		if !reflect.DeepEqual(paid, read) {
			t.Errorf("pay answered %v; a read of the order shows %v", paid, read)
		}
	}

	if s.buy(sale.ID, "newcomer").problem(t).Code != wire.CodeSoldOut {
		t.Fatal("a third buyer got a unit of a 2-unit sale")
	}
	r = s.do("POST", "/v1/orders/"+canceller+"/cancel", s.token("canceller", auth.RoleBuyer), nil)
	if r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	cs.await(t, canceller, domain.StatusCancelled)
	s.waitStatus(canceller, "canceller", domain.StatusCancelled)
	testenv.Eventually(t, time.Minute, func() error {
		if got := s.sale(sale.ID); got.Remaining != 1 {
			return fmt.Errorf("remaining = %d, want 1 after the cancel", got.Remaining)
		}
		return nil
	})
	// The returned unit is sold again; the sold-out flag was cleared by the
	// restock event.
	testenv.Eventually(t, 10*time.Second, func() error {
		r := s.buy(sale.ID, "newcomer")
		if r.status != http.StatusAccepted {
			return fmt.Errorf("newcomer: %d %s", r.status, r.body)
		}
		return nil
	})
	// Paying a cancelled order is refused with a reason.
	r = s.do("POST", "/v1/orders/"+canceller+"/pay", s.token("canceller", auth.RoleBuyer), nil)
	if p := r.problem(t); r.status != http.StatusConflict || p.Code != wire.CodeInvalidState || !strings.Contains(p.Detail, "CANCELLED") {
		t.Fatalf("paying a cancelled order: %d %+v", r.status, p)
	}
}
