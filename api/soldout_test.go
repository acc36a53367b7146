package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// The sold-out fast path never hides a winner (README, "Decisions worth
// knowing"): once an instance has flagged a sale sold out, the buyer who holds
// its unit still gets ALREADY_PURCHASED with their order, a retry of the
// winning request still gets its 202, and a sale that has ended answers
// ENDED, not SOLD_OUT.
func TestSoldOutFlagKeepsAnswersRight(t *testing.T) {
	// A long flag life, so only a restock or the fast path's own lookup can
	// change an answer.
	s := start(t, options{temporalDown: true, cfg: api.Config{SoldOutTTL: time.Hour}})
	r := s.do("POST", "/v1/sales", s.token("ops", auth.RoleAdmin), map[string]any{
		"name": "last unit", "price_cents": 100, "stock": 1,
		"starts_at": time.Now().Add(-time.Second), "ends_at": time.Now().Add(3 * time.Second),
	})
	if r.status != http.StatusCreated {
		t.Fatalf("create sale: %d %s", r.status, r.body)
	}
	var sale wire.Sale
	r.decode(t, &sale)
	buy := func(user, key string) response {
		return s.do("POST", "/v1/sales/"+sale.ID+"/orders", s.token(user, auth.RoleBuyer), nil, "Idempotency-Key", key)
	}

	won := buy("winner", "k-win")
	if won.status != http.StatusAccepted {
		t.Fatalf("winner: %d %s", won.status, won.body)
	}
	var p wire.Purchase
	won.decode(t, &p)
	if lost := buy("late", "k-late"); lost.status != http.StatusConflict || lost.problem(t).Code != wire.CodeSoldOut {
		t.Fatalf("late buyer: %d %s, want SOLD_OUT", lost.status, lost.body)
	}

	// The sale is now flagged sold out on this instance.
	if again := buy("winner", "k-retry"); again.status != http.StatusConflict {
		t.Fatalf("winner buying again: %d %s, want 409 ALREADY_PURCHASED", again.status, again.body)
	} else if pr := again.problem(t); pr.Code != wire.CodeAlreadyPurchased || pr.OrderID != p.OrderID {
		t.Fatalf("winner buying again: %s order %q, want ALREADY_PURCHASED order %s", pr.Code, pr.OrderID, p.OrderID)
	}
	if retry := buy("winner", "k-win"); retry.status != http.StatusAccepted || string(retry.body) != string(won.body) {
		t.Fatalf("retry of the winning request: %d %s, want 202 %s", retry.status, retry.body, won.body)
	}
	if lost := buy("late", "k-late"); lost.status != http.StatusConflict || lost.problem(t).Code != wire.CodeSoldOut {
		t.Fatalf("late buyer again: %d %s, want SOLD_OUT", lost.status, lost.body)
	}

	// Once the sale ends, everyone is told so.
	testenv.Eventually(t, 10*time.Second, func() error {
		r := buy("late", "k-late")
		if r.status == http.StatusConflict && r.problem(t).Code == wire.CodeEnded {
			return nil
		}
		return fmt.Errorf("after the end: %d %s, want ENDED", r.status, r.body)
	})
}
