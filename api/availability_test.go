package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

func TestPurchasesQueueWhileTemporalIsDown(t *testing.T) {
	s := start(t, options{temporalDown: true})
	sale := s.createSale(10)
	orders := map[string]string{}
	for i := range 6 {
		user := fmt.Sprintf("patient-%d", i)
		r := s.buy(sale.ID, user)
		if r.status != http.StatusAccepted {
			t.Fatalf("purchase with Temporal down: %d %s, want 202", r.status, r.body)
		}
		var p wire.Purchase
		r.decode(t, &p)
		orders[user] = p.OrderID
		if o, _ := s.getOrder(p.OrderID, user); o.Status != domain.StatusPending {
			t.Fatalf("order while Temporal is down: %+v, want PENDING", o)
		}
	}
	var ready api.Readiness
	r := s.do("GET", "/readyz", "", nil)
	r.decode(t, &ready)
	if r.status != http.StatusServiceUnavailable || ready.Temporal != "down" || ready.Redis != "ok" || ready.Postgres != "ok" {
		t.Fatalf("readyz with Temporal down: %d %+v", r.status, ready)
	}

	s.temporal.Start()
	s.startWorker()
	for user, id := range orders {
		s.waitStatus(id, user, domain.StatusAwaitingPayment)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if r := s.do("GET", "/readyz", "", nil); r.status != http.StatusOK {
			return fmt.Errorf("readyz %d %s", r.status, r.body)
		}
		return nil
	})
}

func TestRedisDownAnswers503AndReservesNothing(t *testing.T) {
	s := start(t, options{redisAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))})
	sale := s.createSale(3) // the database takes it; Redis warm-up fails quietly
	r := s.buy(sale.ID, "unlucky")
	if r.status != http.StatusServiceUnavailable || r.problem(t).Code != wire.CodeUnavailable {
		t.Fatalf("purchase with Redis down: %d %s", r.status, r.body)
	}
	var id int64
	fmt.Sscan(sale.ID, &id)
	if n := s.redis.Exists(t.Context(), stock.KeysFor(id).Buyers, stock.KeysFor(id).Intents).Val(); n != 0 {
		t.Fatal("something was reserved")
	}
	if n, _ := s.store.Client().Order.Query().Count(t.Context()); n != 0 {
		t.Fatalf("%d orders written", n)
	}
	var ready api.Readiness
	s.do("GET", "/readyz", "", nil).decode(t, &ready)
	if ready.Redis != "down" || ready.Ready {
		t.Fatalf("readyz with Redis down: %+v", ready)
	}
}

// /readyz names the database the orders live in: its "postgres" field
// answers for SQLite on seckill dev, and said nothing of it before.
func TestReadinessNamesTheDatabase(t *testing.T) {
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			db := testenv.Store(t)
			if kind == "sqlite" {
				var err error
				if db, err = store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "seckill.db")); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				if err := db.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			srv, _, _ := admissionOnlyOn(t, api.Config{}, db)
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			resp, err := http.Get(hs.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ready api.Readiness
			if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
				t.Fatal(err)
			}
			// Temporal is not there: 503, and the body still says what the
			// database is and that it answers.
			if ready.Database != kind || ready.Postgres != "ok" {
				t.Fatalf("readyz %+v, want database %s answering", ready, kind)
			}
		})
	}
}
