package orderid_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/redisack"
)

func mustNext(t *testing.T, g *orderid.Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIDsAreUniqueAndOrdered(t *testing.T) {
	g := orderid.New(5)
	var prev int64
	for range 100_000 {
		id := mustNext(t, g)
		if id <= prev {
			t.Fatalf("id %d after %d: not increasing", id, prev)
		}
		prev = id
	}
	if orderid.Node(prev) != 5 {
		t.Fatalf("node = %d, want 5", orderid.Node(prev))
	}
	if d := time.Since(orderid.Time(prev)); d < -time.Second || d > time.Minute {
		t.Fatalf("id time %s is not now", orderid.Time(prev))
	}
}

func TestIDsSurviveAClockStepBack(t *testing.T) {
	g := orderid.New(1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	orderid.SetClock(g, func() time.Time { return now })
	a := mustNext(t, g)
	now = now.Add(-time.Second)
	if b := mustNext(t, g); b <= a {
		t.Fatalf("after the clock stepped back: %d <= %d", b, a)
	}
}

func TestIDsUniqueAcrossGoroutinesAndNodes(t *testing.T) {
	gens := []*orderid.Generator{orderid.New(0), orderid.New(1)}
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
	a, err := orderid.LeaseNode(ctx, rdb, time.Second, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := orderid.LeaseNode(ctx, rdb, time.Second, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Node() == b.Node() {
		t.Fatalf("two leases share node %d", a.Node())
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, orderid.NodeKey(a.Node())).Result(); n != 0 {
		t.Fatal("closing a lease did not free its node")
	}
	// b's lease is renewed: its remaining time goes back up.
	low := rdb.PTTL(ctx, orderid.NodeKey(b.Node())).Val()
	testenv.Eventually(t, 5*time.Second, func() error {
		ttl := rdb.PTTL(ctx, orderid.NodeKey(b.Node())).Val()
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
	l, err := orderid.LeaseNode(ctx, rdb, 3*time.Second, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	g := orderid.Leased(l)
	id := mustNext(t, g)
	if orderid.Node(id) != l.Node() {
		t.Fatalf("id's node = %d, want the leased %d", orderid.Node(id), l.Node())
	}
	// The process wakes up after the lease's term (a long pause): the
	// renewal has not confirmed the node again yet.
	orderid.SetClock(g, func() time.Time { return time.Now().Add(3 * time.Second) })
	if _, err := g.Next(); !errors.Is(err, orderid.ErrUnfenced) {
		t.Fatalf("minting past the lease: %v, want orderid.ErrUnfenced", err)
	}
	orderid.SetClock(g, time.Now)
	if next := mustNext(t, g); next <= id {
		t.Fatalf("after a refusal: %d <= %d", next, id)
	}
}

// A lease whose node another process took (it lapsed during a pause) moves
// to a free node, so minting resumes under a node nobody else holds.
func TestLostLeaseMovesToAFreeNode(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	l, err := orderid.LeaseNode(ctx, rdb, 600*time.Millisecond, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	lost := l.Node()
	if err := rdb.Set(ctx, orderid.NodeKey(lost), "another-process", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if l.Node() == lost {
			return fmt.Errorf("still on node %d", lost)
		}
		return nil
	})
	if got := rdb.Get(ctx, orderid.NodeKey(lost)).Val(); got != "another-process" {
		t.Fatalf("the other process's node was taken back: %q", got)
	}
	if id := mustNext(t, orderid.Leased(l)); orderid.Node(id) == lost {
		t.Fatalf("minted under the lost node %d", lost)
	}
}

// An instance shutting down gives its node back while handlers a timed-out
// shutdown left running still mint under it, and the next holder's clock
// may read the same time (or lag behind): the next holder's ids start
// above everything the previous one could mint, so no id repeats.
func TestNextHolderNeverRepeatsAnID(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	a, err := orderid.LeaseNode(ctx, rdb, 3*time.Second, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ga := orderid.Leased(a)
	frozen := time.Now()
	orderid.SetClock(ga, func() time.Time { return frozen })
	seen := map[int64]bool{}
	for range 50 {
		seen[mustNext(t, ga)] = true
	}
	node := a.Node()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Every other node is held, so the next lease takes a's.
	for n := range orderid.MaxNodes {
		if n != node {
			if err := rdb.Set(ctx, orderid.NodeKey(n), "busy", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := orderid.LeaseNode(ctx, rdb, 3*time.Second, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if b.Node() != node {
		t.Fatalf("the next lease took node %d, want %d", b.Node(), node)
	}
	gb := orderid.Leased(b)
	for _, skew := range []time.Duration{0, -2 * time.Second} {
		orderid.SetClock(gb, func() time.Time { return frozen.Add(skew) })
		for range 50 {
			// The closed instance's in-flight handlers mint on, too.
			if id, err := ga.Next(); err == nil {
				if seen[id] {
					t.Fatalf("id %d repeated by the closed instance", id)
				}
				seen[id] = true
			}
			id, err := gb.Next()
			if errors.Is(err, orderid.ErrUnfenced) {
				continue // refusing is safe; repeating is not
			}
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d (node %d, minted at %s) repeated by the next holder (clock skew %s)", id, orderid.Node(id), orderid.Time(id), skew)
			}
			seen[id] = true
		}
	}
}

func TestFirstAtBoundsTheIDsOfAMillisecond(t *testing.T) {
	g := orderid.New(5)
	id := mustNext(t, g)
	at := orderid.Time(id)
	if first := orderid.FirstAt(at); first > id || orderid.Time(first) != at {
		t.Fatalf("FirstAt(%v) = %d, want <= %d and minted in the same millisecond", at, first, id)
	}
	if next := orderid.FirstAt(at.Add(time.Millisecond)); next <= id {
		t.Fatalf("FirstAt(a millisecond later) = %d, want > %d", next, id)
	}
	if orderid.FirstAt(time.Unix(0, 0)) != 0 {
		t.Fatal("an instant before the epoch should give 0")
	}
	if orderid.FirstAt(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MaxInt64 {
		t.Fatal("an instant past the id space should give MaxInt64")
	}
}

// A holder's own renewals raise the node's floor for its next holder only:
// ids keep the minting clock's time while the lease is renewed, instead of
// jumping to the previous confirmation's term (ids minted seconds in the
// future, and many at one millisecond, an admission time no clock read).
func TestRenewalsKeepIDsAtTheClock(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	l, err := orderid.LeaseNode(ctx, rdb, ttl, redisack.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	g := orderid.Leased(l)
	floor := func() int64 {
		v, _ := rdb.Get(ctx, orderid.FloorKey(l.Node())).Int64()
		return v
	}
	first := floor()
	testenv.Eventually(t, 5*time.Second, func() error {
		if f := floor(); f == first {
			return fmt.Errorf("not renewed yet (floor %d)", f)
		}
		return nil
	})
	before := time.Now().Truncate(time.Millisecond)
	id := mustNext(t, g)
	after := time.Now()
	if at := orderid.Time(id); at.Before(before) || at.After(after) {
		t.Fatalf("id minted at %s, outside the minting's window [%s, %s] (%s ahead)", at.Format(time.RFC3339Nano),
			before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano), at.Sub(after))
	}
}
