package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// Redis as it is run for availability (a primary, a replica, three
// Sentinels; docs/design.md §3.13), with every process on
// --admit-ack=replica: a 202 is answered only once the replica holds the
// reservation.

// shopper is one buyer of a failover test, with the Idempotency-Key of
// their one purchase, which every retry repeats.
type shopper struct {
	user, key string
	c         *client.Client
}

func (c *cluster) shoppers(api, prefix string, n int) []shopper {
	out := make([]shopper, n)
	for i := range out {
		out[i] = shopperOf(c, api, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func (c *cluster) createSale(api string, stock int) string {
	c.t.Helper()
	signer, _ := auth.NewSigner(secret)
	admin, _ := signer.Mint("chaos-admin", auth.RoleAdmin, time.Hour)
	sale, err := client.New(api, admin, nil).CreateSale(context.Background(), wire.CreateSaleBody{Name: "failover",
		PriceCents: 1, Stock: stock, StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		c.t.Fatal(err)
	}
	return sale.ID
}

// answer is what one purchase attempt was told: the order id of a 202 or
// of an UNCONFIRMED problem, and the problem's code ("" for a 202, "-"
// when no answer came at all).
type answer struct {
	order, code string
}

func (s shopper) buy(sale string) answer {
	p, err := s.c.Purchase(context.Background(), sale, s.key)
	var refusal *client.Error
	switch {
	case err == nil:
		return answer{order: p.OrderID}
	case errors.As(err, &refusal):
		return answer{order: refusal.Problem.OrderID, code: refusal.Problem.Code}
	}
	return answer{code: "-"}
}

// purchases are the outcomes of a failover test's buyers.
type purchases struct {
	mu          sync.Mutex
	won         map[string]string // user -> order id, from a 202
	unsure      map[string]bool   // no final answer yet: retried with the same key
	unconfirmed int               // UNCONFIRMED answers seen
	retried     int               // answers that left the buyer unsure
	other       map[string]int    // those answers, by code
}

func (p *purchases) note(s shopper, a answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.unsure, s.user)
	switch a.code {
	case "":
		p.won[s.user] = a.order
	case wire.CodeSoldOut:
	default:
		if a.code == wire.CodeUnconfirmed {
			p.unconfirmed++
		}
		p.other[a.code]++
		p.retried++
		p.unsure[s.user] = true
	}
}

// buyAll has every shopper buy once, 16 at a time; after each 202, won is
// called with the number of 202s so far.
func buyAll(sale string, shoppers []shopper, won func(n int)) *purchases {
	p := &purchases{won: map[string]string{}, unsure: map[string]bool{}, other: map[string]int{}}
	next := make(chan shopper)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for s := range next {
				a := s.buy(sale)
				p.note(s, a)
				if a.code == "" && won != nil {
					p.mu.Lock()
					n := len(p.won)
					p.mu.Unlock()
					won(n)
				}
			}
		})
	}
	for _, s := range shoppers {
		next <- s
	}
	close(next)
	wg.Wait()
	return p
}

// settle retries, with the same Idempotency-Key, every shopper without a
// final answer until each has a 202 or SOLD_OUT.
func (p *purchases) settle(t *testing.T, sale string, shoppers []shopper) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		for _, s := range shoppers {
			p.mu.Lock()
			unsure := p.unsure[s.user]
			p.mu.Unlock()
			if unsure {
				p.note(s, s.buy(sale))
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.unsure) > 0 {
			return fmt.Errorf("%d buyers without a final answer", len(p.unsure))
		}
		return nil
	})
}

// payAll pays every won order and checks that each is PAID, under its own
// id: every 202 has its row, and no id was given twice.
func (p *purchases) payAll(t *testing.T, shoppers []shopper) {
	t.Helper()
	ids := map[string]string{}
	for _, s := range shoppers {
		id, ok := p.won[s.user]
		if !ok {
			continue
		}
		if other, dup := ids[id]; dup {
			t.Fatalf("order %s was given to %s and to %s", id, other, s.user)
		}
		ids[id] = s.user
		if err := payAtProvider(context.Background(), s.c, id); err != nil {
			t.Fatalf("pay %s's order %s: %v", s.user, id, err)
		}
	}
	for _, s := range shoppers {
		if id, ok := p.won[s.user]; ok {
			testenv.Eventually(t, time.Minute, func() error {
				o, err := s.c.Order(context.Background(), id)
				if err != nil || o.Status != domain.StatusPaid {
					return fmt.Errorf("%s's order %s: %+v %v", s.user, id, o, err)
				}
				return nil
			})
		}
	}
}

// (f) The Redis primary is SIGKILLed in the middle of the wave, once a
// third of the units are sold; Sentinel promotes the replica, every
// process follows it, buyers without an answer retry with their key, and
// the old primary comes back as a replica. Every 202 has its order.
func TestRedisPrimaryKilledDuringTheWave(t *testing.T) {
	t.Parallel()
	h := testenv.StartRedisHA(t)
	c := start(t, setup{redisAddr: h.URL(0), env: []string{"SECKILL_ADMIT_ACK=replica", "SECKILL_ADMIT_ACK_TIMEOUT=500ms"}})
	c.startWorker("worker")
	api := c.apis[0]
	sale := c.createSale(api, units)
	shoppers := c.shoppers(api, "wave", buyers)
	first := h.Primary()
	var once sync.Once
	began := time.Now()
	p := buyAll(sale, shoppers, func(n int) {
		if n >= units/3 {
			once.Do(func() { h.Server(first).Kill() })
		}
	})
	if len(p.won) < units/3 {
		t.Fatalf("only %d purchases before the kill; answers %v", len(p.won), p.other)
	}
	now := h.AwaitFailover(first, time.Minute)
	// With one replica, the promoted primary has none until the old one
	// rejoins as its replica: until then every purchase is unconfirmed or
	// unavailable (docs/design.md §3.13; run two replicas to go on).
	h.Server(first).Start()
	h.AwaitReplica(first, time.Minute)
	p.settle(t, sale, shoppers)
	t.Logf("primary %s killed at %d × 202; %s promoted; answers before the retries %v", first, units/3, now, p.other)
	if len(p.won) != units {
		t.Fatalf("%d purchases won, want every one of the %d units sold once", len(p.won), units)
	}
	c.waitFor(api, "every order written", func(st bench.Stats) bool { return st.Orders["AWAITING_PAYMENT"] == units })
	written := time.Since(began)
	p.payAll(t, shoppers)
	out := c.auditQuiescent(sale)
	record("Redis primary SIGKILLed in the wave (a third sold), Sentinel failover, --admit-ack=replica",
		fmt.Sprintf("the replica was promoted and every process followed it; answers without a final outcome (%d, of which %d UNCONFIRMED) "+
			"retried with their Idempotency-Key; the old primary rejoined as a replica", p.retried, p.unconfirmed),
		bench.Result{Accepted: len(p.won), Paid: len(p.won), CreatedSeconds: written.Seconds(),
			Lost: paidByID(len(p.won))}, out)
}

// (g) An UNCONFIRMED purchase on both sides of a failover. The replica's
// link to the primary is cut: purchases answer 503 UNCONFIRMED with the
// order they would have, a retry with the same key says the same, and the
// relay starts no workflow for them. The link comes back: the retry
// answers 202 with that order (the reservation survived). The link is
// cut again, another buyer is UNCONFIRMED, and the primary dies before
// the replica has that reservation: after the failover (and the old
// primary's return as the new one's replica) the retry admits the buyer
// anew, and the order they were first told of never exists.
func TestUnconfirmedPurchaseAcrossAFailover(t *testing.T) {
	t.Parallel()
	h := testenv.StartRedisHA(t)
	c := start(t, setup{redisAddr: h.URL(0), env: []string{"SECKILL_ADMIT_ACK=replica", "SECKILL_ADMIT_ACK_TIMEOUT=300ms"}})
	c.startWorker("worker")
	api := c.apis[0]
	sale := c.createSale(api, 10)
	s := c.shoppers(api, "unsure", 3)
	up := s[0].buy(sale)
	if up.code != "" {
		t.Fatalf("purchase with the replica up: %+v", up)
	}
	primary := h.Servers[0]

	h.CutReplication()
	first := s[1].buy(sale)
	if first.code != wire.CodeUnconfirmed || first.order == "" {
		h.RestoreReplication()
		t.Fatalf("purchase with the replica stopped: %+v, want UNCONFIRMED with an order id", first)
	}
	if again := s[1].buy(sale); again != first {
		h.RestoreReplication()
		t.Fatalf("retry with the replica stopped: %+v, want %+v again", again, first)
	}
	h.RestoreReplication()
	testenv.Eventually(t, time.Minute, func() error {
		if a := s[1].buy(sale); a.code != "" || a.order != first.order {
			return fmt.Errorf("retry with the replica back: %+v, want 202 with order %s", a, first.order)
		}
		return nil
	})

	h.CutReplication()
	lost := s[2].buy(sale)
	if lost.code != wire.CodeUnconfirmed || lost.order == "" {
		h.RestoreReplication()
		t.Fatalf("purchase with the replica stopped: %+v, want UNCONFIRMED", lost)
	}
	old := primary.Addr()
	primary.Kill()
	h.RestoreReplication()
	h.AwaitFailover(old, time.Minute)
	primary.Start() // the promoted replica's replica, so writes can be confirmed again
	h.AwaitReplica(old, time.Minute)
	var again answer
	testenv.Eventually(t, time.Minute, func() error {
		if again = s[2].buy(sale); again.code != "" {
			return fmt.Errorf("retry after the failover: %+v", again)
		}
		return nil
	})
	if again.order == lost.order {
		t.Fatalf("the retry answered the lost reservation's order %s", lost.order)
	}
	p := &purchases{won: map[string]string{s[0].user: up.order, s[1].user: first.order, s[2].user: again.order}}
	c.waitFor(api, "every order written", func(st bench.Stats) bool { return st.Orders["AWAITING_PAYMENT"] == 3 })
	p.payAll(t, s)
	if _, err := s[2].c.Order(context.Background(), lost.order); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("the lost reservation's order %s: %v, want 404", lost.order, err)
	}
	c.auditQuiescent(sale)
}

func isStatus(err error, status int) bool {
	var refusal *client.Error
	return errors.As(err, &refusal) && refusal.StatusCode == status
}

// (h) The replica is SIGKILLed in the middle of the wave: the primary goes
// on, but no write can be confirmed, so buyers are answered 503
// UNCONFIRMED (or UNAVAILABLE once the order-id lease can no longer be
// confirmed) and no new order starts. The replica comes back, catches up,
// the buyers retry with their keys, and every 202 has its order.
func TestRedisReplicaDownDuringTheWave(t *testing.T) {
	t.Parallel()
	h := testenv.StartRedisHA(t)
	c := start(t, setup{redisAddr: h.URL(0), env: []string{"SECKILL_ADMIT_ACK=replica", "SECKILL_ADMIT_ACK_TIMEOUT=300ms"}})
	c.startWorker("worker")
	api := c.apis[0]
	sale := c.createSale(api, units)
	shoppers := c.shoppers(api, "lonely", buyers/2)
	replica := h.Servers[1]
	var once sync.Once
	began := time.Now()
	p := buyAll(sale, shoppers, func(n int) {
		if n >= units/3 {
			once.Do(replica.Kill)
		}
	})
	if p.unconfirmed == 0 {
		t.Fatalf("no purchase was answered UNCONFIRMED with the replica down; answers %v", p.other)
	}
	replica.Start()
	h.AwaitReplica(replica.Addr(), time.Minute)
	p.settle(t, sale, shoppers)
	t.Logf("replica killed at %d × 202; answers before the retries %v", units/3, p.other)
	if len(p.won) != units {
		t.Fatalf("%d purchases won, want every one of the %d units sold once", len(p.won), units)
	}
	c.waitFor(api, "every order written", func(st bench.Stats) bool { return st.Orders["AWAITING_PAYMENT"] == units })
	written := time.Since(began)
	p.payAll(t, shoppers)
	out := c.auditQuiescent(sale)
	record("Redis replica SIGKILLed in the wave (a third sold), --admit-ack=replica",
		fmt.Sprintf("the primary went on; %d answers were UNCONFIRMED or UNAVAILABLE and no order started until the replica was back; "+
			"the buyers retried with their Idempotency-Key", p.retried),
		bench.Result{Accepted: len(p.won), Paid: len(p.won), CreatedSeconds: written.Seconds(),
			Lost: paidByID(len(p.won))}, out)
}
