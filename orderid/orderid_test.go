package orderid

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

func mustNext(t *testing.T, g *Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIDsAreUniqueAndOrdered(t *testing.T) {
	g := New(5)
	var prev int64
	for range 100_000 {
		id := mustNext(t, g)
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
	a := mustNext(t, g)
	now = now.Add(-time.Second)
	if b := mustNext(t, g); b <= a {
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
				id, err := gens[i%2].Next()
				if err != nil {
					t.Error(err)
					return
				}
				local = append(local, id)
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

// A leased generator mints only for milliseconds its lease is confirmed to
// cover: after a pause longer than the lease it refuses instead of risking
// an id the node's next holder also mints.
func TestLeasedGeneratorRefusesPastItsLease(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	l, err := LeaseNode(ctx, rdb, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	g := Leased(l)
	id := mustNext(t, g)
	if Node(id) != l.Node() {
		t.Fatalf("id's node = %d, want the leased %d", Node(id), l.Node())
	}
	// The process wakes up after the lease's term (a long pause): the
	// renewal has not confirmed the node again yet.
	g.now = func() time.Time { return time.Now().Add(3 * time.Second) }
	if _, err := g.Next(); !errors.Is(err, ErrUnfenced) {
		t.Fatalf("minting past the lease: %v, want ErrUnfenced", err)
	}
	g.now = time.Now
	if next := mustNext(t, g); next <= id {
		t.Fatalf("after a refusal: %d <= %d", next, id)
	}
}

// A lease whose node another process took (it lapsed during a pause) moves
// to a free node, so minting resumes under a node nobody else holds.
func TestLostLeaseMovesToAFreeNode(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	l, err := LeaseNode(ctx, rdb, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	lost := l.Node()
	if err := rdb.Set(ctx, nodeKey(lost), "another-process", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if l.Node() == lost {
			return fmt.Errorf("still on node %d", lost)
		}
		return nil
	})
	if got := rdb.Get(ctx, nodeKey(lost)).Val(); got != "another-process" {
		t.Fatalf("the other process's node was taken back: %q", got)
	}
	if id := mustNext(t, Leased(l)); Node(id) == lost {
		t.Fatalf("minted under the lost node %d", lost)
	}
}
