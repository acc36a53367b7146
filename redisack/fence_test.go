package redisack_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisconf"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/redisack"
)

// fencedPrimary starts a split brain and returns it with a client of its
// primary's own address and a fence on that client, asked of its
// Sentinels; the fence has not checked yet.
func fencedPrimary(t *testing.T) (*testenv.SplitBrain, *redis.Client, *redisack.Fence) {
	t.Helper()
	sb := testenv.StartSplitBrain(t)
	rdb := redis.NewClient(&redis.Options{Addr: sb.Primary.Addr()})
	t.Cleanup(func() { rdb.Close() })
	sn, ok, err := redisconf.SentinelsOf(sb.URL(0))
	if !ok || err != nil {
		t.Fatalf("sentinels of %s: %v %v", sb.URL(0), ok, err)
	}
	f := redisack.NewFence(rdb, sn.Master, sn.Addrs, sn.Options)
	t.Cleanup(f.Close)
	return sb, rdb, f
}

// The hole the fence closes, and the fence closing it: the primary and one
// replica are cut off from the Sentinels and from the other replica, and
// a client still reaches the primary. WAIT alone goes on acknowledging
// writes that the failover on the other side discards; with the fence, no
// write sent later than Lease+Silence after the cut is acknowledged, and
// none is sent at all once it is closed. After the promotion the
// Sentinels name another server, and after the heal the old primary is a
// replica: the fence stays closed throughout.
func TestTheFenceStopsAPrimaryTheSentinelsLeft(t *testing.T) {
	t.Parallel()
	sb, rdb, f := fencedPrimary(t)
	ctx := context.Background()
	if f.Holds() {
		t.Fatal("the fence holds before any check")
	}
	if err := f.Check(ctx); err != nil {
		t.Fatalf("check with every Sentinel reaching the primary: %v", err)
	}
	fenced := redisack.Policy{Replicas: 1, Timeout: time.Second, Fence: f}
	bare := redisack.Policy{Replicas: 1, Timeout: time.Second}
	if _, err := fenced.Run(ctx, rdb, incr, []string{"n"}); err != nil {
		t.Fatalf("a write with the fence holding: %v", err)
	}

	sb.Partition()
	cut := time.Now()
	checked := 0
	testenv.Eventually(t, 10*time.Second, func() error {
		checked++
		if err := f.Check(ctx); err == nil {
			return errors.New("the Sentinels still confirm the primary")
		}
		return nil
	})
	if closed := time.Since(cut); closed > f.Bound()+time.Second {
		t.Fatalf("the fence closed %v after the cut, want within Lease+Silence (%v) and a check", closed, f.Bound())
	}
	t.Logf("the fence closed %v after the cut (%d checks; bound %v)", time.Since(cut), checked, f.Bound())
	testenv.Eventually(t, 5*time.Second, func() error {
		if f.Holds() {
			return errors.New("the last lease has not run out")
		}
		return nil
	})
	before, _ := rdb.Get(ctx, "n").Int()
	if _, err := bare.Run(ctx, rdb, incr, []string{"n"}); err != nil {
		t.Fatalf("WAIT alone, cut off with a replica: %v, want it acknowledged (the hole)", err)
	}
	if _, err := fenced.Run(ctx, rdb, incr, []string{"n"}); !errors.Is(err, redisack.ErrFenced) {
		t.Fatalf("a write with the fence closed: %v, want ErrFenced", err)
	}
	if err := fenced.Exec(ctx, rdb, func(p redis.Pipeliner) { p.Incr(ctx, "n") }); !errors.Is(err, redisack.ErrFenced) {
		t.Fatalf("Exec with the fence closed: %v, want ErrFenced", err)
	}
	if n, _ := rdb.Get(ctx, "n").Int(); n != before+1 {
		t.Fatalf("n is %d, want %d: a fenced write was sent", n, before+1)
	}

	sb.AwaitPromotion(time.Minute)
	if err := f.Check(ctx); err == nil || !strings.Contains(err.Error(), "names") {
		t.Fatalf("check after the promotion: %v, want the Sentinels naming another primary", err)
	}
	sb.Heal()
	sb.AwaitDemotion(time.Minute)
	if err := f.Check(ctx); err == nil {
		t.Fatal("check after the old primary was demoted: the fence holds")
	}
	if _, err := fenced.Run(ctx, rdb, incr, []string{"n"}); !errors.Is(err, redisack.ErrFenced) {
		t.Fatalf("a write to the demoted primary: %v, want ErrFenced", err)
	}
}

// A write whose replicas confirm it only after the fence's lease ran out
// is not acknowledged: the fence is read after the WAIT.
func TestAWriteConfirmedAfterTheLeaseDoesNotCount(t *testing.T) {
	t.Parallel()
	sb, rdb, f := fencedPrimary(t)
	ctx := context.Background()
	f.Lease = 300 * time.Millisecond
	if err := f.Check(ctx); err != nil {
		t.Fatal(err)
	}
	p := redisack.Policy{Replicas: 2, Timeout: 4 * time.Second, Fence: f}
	sb.Beside.Pause()
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, rdb, incr, []string{"late"})
		done <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() error {
		if f.Holds() {
			return errors.New("the lease has not run out")
		}
		return nil
	})
	sb.Beside.Resume()
	err := <-done
	var na *redisack.NotAcknowledgedError
	if !errors.As(err, &na) || !na.Fenced {
		t.Fatalf("a write confirmed after the lease: %v, want a fenced NotAcknowledgedError", err)
	}
}

// After a failover the fence holds again as soon as the Sentinels name
// the promoted server and the client reaches it: the fence does not widen
// the window of 503s a primary's crash costs.
func TestTheFenceFollowsAFailover(t *testing.T) {
	t.Parallel()
	h := testenv.StartRedisHAWith(t, testenv.RedisHAOptions{Replicas: 2, MinReplicasToWrite: 1, MinReplicasMaxLag: 2})
	sn, _, err := redisconf.SentinelsOf(h.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := redisconf.Open(h.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	f := redisack.NewFence(rdb, sn.Master, sn.Addrs, sn.Options)
	defer f.Close()
	ctx := context.Background()
	if err := f.Check(ctx); err != nil {
		t.Fatal(err)
	}
	old := h.Primary()
	h.Server(old).Kill()
	h.AwaitFailover(old, time.Minute)
	promoted := time.Now()
	testenv.Eventually(t, 30*time.Second, func() error { return f.Check(ctx) })
	t.Logf("the fence held again %v after every Sentinel named the new primary", time.Since(promoted))
	if d := time.Since(promoted); d > 500*time.Millisecond {
		t.Errorf("the fence held again only %v after the promotion", d)
	}
}

// decide, the rule by which the Sentinels' answers hold the fence.
func TestDecide(t *testing.T) {
	yes := func(epoch int64) redisack.Verdict { return redisack.Verdict{Epoch: epoch} }
	no := func(epoch int64) redisack.Verdict { return redisack.Verdict{Epoch: epoch, Err: errors.New("no")} }
	silent := redisack.Verdict{Epoch: -1, Err: errors.New("no answer")}
	for _, c := range []struct {
		name string
		all  []redisack.Verdict
		hold bool
	}{
		{"a majority vouches", []redisack.Verdict{yes(3), yes(3), no(3)}, true},
		{"one of the same configuration", []redisack.Verdict{yes(3), no(3), no(3)}, false},
		{"the new primary, the others not told yet", []redisack.Verdict{yes(4), no(3), no(3)}, true},
		{"the old primary, named by the older configuration", []redisack.Verdict{yes(3), no(4), no(4)}, false},
		{"the old primary beside one lagging Sentinel", []redisack.Verdict{yes(3), no(4), no(3)}, false},
		{"one vouches, the others silent", []redisack.Verdict{yes(4), silent, silent}, false},
		{"one vouches, one behind, one silent", []redisack.Verdict{yes(4), no(3), silent}, true},
		{"none", []redisack.Verdict{no(3), no(3), no(3)}, false},
	} {
		if err := redisack.Decide(c.all, 2); (err == nil) != c.hold {
			t.Errorf("%s: %v, want holding %v", c.name, err, c.hold)
		}
	}
}
