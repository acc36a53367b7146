package bench

import (
	"strings"
	"testing"
)

// The moment a cancellation has written its row and restored the Postgres
// unit but not yet released the Redis one is not settled; the bench must
// keep waiting there instead of reporting drift.
func TestDriftMidCompensation(t *testing.T) {
	settled := Stats{Stock: 4, DBStock: 2, RedisRemaining: 2, RedisBuyers: 2,
		Orders: map[string]int{"PAID": 2, "CANCELLED": 2}}
	if d := settled.drift(); len(d) != 0 {
		t.Fatalf("settled sale reported drift: %v", d)
	}
	for name, tc := range map[string]struct {
		st   Stats
		want string
	}{
		"row cancelled, unit not yet restored": {
			Stats{Stock: 4, DBStock: 1, RedisRemaining: 1, RedisBuyers: 3, Orders: map[string]int{"PAID": 2, "CANCELLED": 2}},
			"conservation",
		},
		"unit restored in Postgres, not yet in Redis": {
			Stats{Stock: 4, DBStock: 2, RedisRemaining: 1, RedisBuyers: 3, Pending: 1, Orders: map[string]int{"PAID": 2, "CANCELLED": 2}},
			"redis remaining 1 != db stock 2",
		},
		"intent not yet relayed": {
			Stats{Stock: 4, DBStock: 2, RedisRemaining: 2, RedisBuyers: 2, RelayBacklog: 1, Orders: map[string]int{"PAID": 2, "CANCELLED": 2}},
			"relay backlog 1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := strings.Join(tc.st.drift(), "; ")
			if !strings.Contains(d, tc.want) {
				t.Fatalf("drift %q does not mention %q", d, tc.want)
			}
		})
	}
}
