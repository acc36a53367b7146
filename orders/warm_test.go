package orders

import (
	"testing"
	"time"

	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/store"
)

func TestRedisSale(t *testing.T) {
	start := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	ninety := 90
	tests := []struct {
		name        string
		timeout     *int
		buyers      []store.Buyer
		wantTimeout time.Duration
		wantBuyers  map[string]int64
	}{
		{name: "server's payment timeout, no buyers", wantBuyers: map[string]int64{}},
		{name: "the sale's own payment timeout", timeout: &ninety, wantTimeout: 90 * time.Second, wantBuyers: map[string]int64{}},
		{
			name:       "buyers by user",
			buyers:     []store.Buyer{{UserID: "alice", OrderID: 7}, {UserID: "bob", OrderID: 9}},
			wantBuyers: map[string]int64{"alice": 7, "bob": 9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sl := &ent.Sale{ID: 3, PriceCents: 499, Stock: 8, TotalStock: 10,
				StartsAt: start, EndsAt: start.Add(time.Hour), PaymentTimeoutSeconds: tt.timeout}
			rs := RedisSale(sl, tt.buyers)
			if rs.ID != 3 || rs.PriceCents != 499 || rs.Remaining != 8 || !rs.StartsAt.Equal(start) || !rs.EndsAt.Equal(start.Add(time.Hour)) {
				t.Errorf("sale fields: %+v", rs)
			}
			if rs.PaymentTimeout != tt.wantTimeout {
				t.Errorf("payment timeout %v, want %v", rs.PaymentTimeout, tt.wantTimeout)
			}
			if len(rs.Buyers) != len(tt.wantBuyers) {
				t.Fatalf("buyers %v, want %v", rs.Buyers, tt.wantBuyers)
			}
			for u, id := range tt.wantBuyers {
				if rs.Buyers[u] != id {
					t.Errorf("buyers %v, want %v", rs.Buyers, tt.wantBuyers)
				}
			}
		})
	}
}
