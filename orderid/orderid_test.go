package orderid

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

func TestIDsAreUniqueAndOrdered(t *testing.T) {
	g := New(5)
	var prev int64
	for range 100_000 {
		id := g.Next()
		if id <= prev {
			t.Fatalf("id %d after %d: not increasing", id, prev)
		}
		prev = id
	}
	if Node(prev) != 5 {
		t.Fatalf("node = %d, want 5", Node(prev))
	}
	if d := time.Since(Time(prev)); d < -time.Second || d > time.Minute {
		t.Fatalf("id time %s is not now", Time(prev))
	}
}

func TestIDsSurviveAClockStepBack(t *testing.T) {
	g := New(1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return now }
	a := g.Next()
	now = now.Add(-time.Second)
	if b := g.Next(); b <= a {
		t.Fatalf("after the clock stepped back: %d <= %d", b, a)
	}
}

func TestIDsUniqueAcrossGoroutinesAndNodes(t *testing.T) {
	gens := []*Generator{New(0), New(1)}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			local := make([]int64, 0, 10_000)
			for range 10_000 {
				local = append(local, gens[i%2].Next())
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %d", id)
					return
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

func TestLeaseGivesDistinctNodes(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	a, err := LeaseNode(ctx, rdb, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LeaseNode(ctx, rdb, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a.Node() == b.Node() {
		t.Fatalf("two leases share node %d", a.Node())
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, nodeKey(a.Node())).Result(); n != 0 {
		t.Fatal("closing a lease did not free its node")
	}
	// b's lease is renewed: its remaining time goes back up.
	low := rdb.PTTL(ctx, nodeKey(b.Node())).Val()
	testenv.Eventually(t, 5*time.Second, func() error {
		ttl := rdb.PTTL(ctx, nodeKey(b.Node())).Val()
		if ttl <= 0 {
			t.Fatalf("lease of node %d lapsed", b.Node())
		}
		if ttl <= low {
			low = ttl
			return fmt.Errorf("not renewed yet (%s left)", ttl)
		}
		return nil
	})
	_ = b.Close(ctx)
}
