package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
)

// A pay the workflow accepted but did not record within PayWait is
// answered 202 (the decision is final), never 503: however the SDK wraps
// the expired wait, the payment is on its way. A PayWait of a millisecond
// makes every wait expire.
func TestAcceptedPayNotRecordedInTimeIs202(t *testing.T) {
	s := start(t, options{cfg: api.Config{PayWait: time.Millisecond}})
	sale := s.createSale(5)
	for _, user := range []string{"a", "b", "c"} {
		r := s.buy(sale.ID, user)
		var p wire.Purchase
		r.decode(t, &p)
		s.waitStatus(p.OrderID, user, domain.StatusAwaitingPayment)
		pay := s.do("POST", "/v1/orders/"+p.OrderID+"/pay", s.token(user, auth.RoleBuyer), nil)
		if pay.status != http.StatusAccepted && pay.status != http.StatusOK {
			t.Fatalf("pay with a 1 ms wait: %d %s, want 202 (or 200)", pay.status, pay.body)
		}
		s.waitStatus(p.OrderID, user, domain.StatusPaid)
	}
}
