package redisack_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/redisack"
)

var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// A write waits for the replica, and without one it still happens on the
// primary but comes back unacknowledged after the timeout.
func TestRunWaitsForTheReplica(t *testing.T) {
	primary := testenv.StartRedisServer(t, false)
	replica := testenv.StartRedisServer(t, false, "--replicaof", "127.0.0.1", portOf(t, primary.Addr()))
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	var waits, refused int
	p := redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond, Observe: func(_ time.Duration, ok bool) {
		waits++
		if !ok {
			refused++
		}
	}}
	// The replica takes a moment to connect: until then WAIT answers 0.
	testenv.Eventually(t, 30*time.Second, func() error {
		_, err := p.Run(ctx, rdb, incr, []string{"n"})
		return err
	})
	n := waits
	cmd, err := p.Run(ctx, rdb, incr, []string{"n"})
	if err != nil || waits != n+1 {
		t.Fatalf("run with the replica up: %v (observed %d waits, want %d)", err, waits, n+1)
	}
	got, _ := cmd.Int()
	r := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer r.Close()
	if v, err := r.Get(ctx, "n").Int(); err != nil || v != got {
		t.Fatalf("the replica has n=%d (%v) once acknowledged, want %d", v, err, got)
	}

	// A script flushed from the primary (a restart, a failover) is loaded
	// again.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, rdb, incr, []string{"n"}); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}

	replica.Stop()
	before := refused
	began := time.Now()
	cmd, err = p.Run(ctx, rdb, incr, []string{"n"})
	if !redisack.IsNotAcknowledged(err) || refused != before+1 {
		t.Fatalf("without a replica: %v, refused %d, want a NotAcknowledgedError", err, refused-before)
	}
	if waited := time.Since(began); waited < p.Timeout {
		t.Fatalf("answered after %v, before the timeout %v", waited, p.Timeout)
	}
	if v, _ := cmd.Int(); v != got+2 {
		t.Fatalf("the unacknowledged write returned %d, want %d: it ran on the primary", v, got+2)
	}
	if err := p.Exec(ctx, rdb, func(pipe redis.Pipeliner) { pipe.Set(ctx, "k", "v", 0) }); !redisack.IsNotAcknowledged(err) {
		t.Fatalf("Exec without a replica: %v", err)
	}
	// A script that fails is not waited for, and its error comes back.
	if _, err := p.Run(ctx, rdb, redis.NewScript(`return redis.error_reply('boom')`), nil); err == nil || redisack.IsNotAcknowledged(err) {
		t.Fatalf("failing script: %v", err)
	}
	// The zero policy waits for nothing.
	if _, err := (redisack.Policy{}).Run(ctx, rdb, incr, []string{"n"}); err != nil {
		t.Fatal(err)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// A pipeline whose reply was lost is never sent again: go-redis would run
// the script a second time, and send the WAIT to whichever server answers
// by then. The caller gets an error that does not claim the write never
// left (a dial error is how the api tells "nothing changed").
func TestALostReplyIsNotResent(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(*testenv.Proxy)
	}{
		{"connection dropped, server still there", (*testenv.Proxy).Drop},
		{"server gone", (*testenv.Proxy).Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := testenv.StartRedisServer(t, false) // no replica: WAIT blocks until its timeout
			direct := redis.NewClient(&redis.Options{Addr: primary.Addr()})
			defer direct.Close()
			ctx := context.Background()
			p := redisack.Policy{Replicas: 1, Timeout: 2 * time.Second}
			for name, write := range map[string]func(rdb *redis.Client) error{
				"Run": func(rdb *redis.Client) error { _, err := p.Run(ctx, rdb, incr, []string{"run"}); return err },
				"Exec": func(rdb *redis.Client) error {
					return p.Exec(ctx, rdb, func(pipe redis.Pipeliner) { pipe.Incr(ctx, "exec") })
				},
			} {
				proxy := testenv.NewProxy(t, primary.Addr())
				rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()}) // go-redis's default retries
				defer rdb.Close()
				key := strings.ToLower(name)
				done := make(chan error, 1)
				go func() { done <- write(rdb) }()
				// The write ran on the primary; its WAIT is blocked. Lose the reply.
				testenv.Eventually(t, 10*time.Second, func() error {
					if n, _ := direct.Get(ctx, key).Int(); n != 1 {
						return fmt.Errorf("%s=%d, want 1", key, n)
					}
					return nil
				})
				tc.lose(proxy)
				err := <-done
				if err == nil || redisack.IsNotAcknowledged(err) {
					t.Fatalf("%s: %v, want the lost reply's error", name, err)
				}
				var op *net.OpError
				if errors.As(err, &op) && op.Op == "dial" {
					t.Fatalf("%s: %v: a dial error says the write never left, and it ran", name, err)
				}
				if n, _ := direct.Get(ctx, key).Int(); n != 1 {
					t.Fatalf("%s: %s=%d after a lost reply: the write was sent again", name, key, n)
				}
			}
		})
	}
}

func TestTheWaitFitsTheReadTimeout(t *testing.T) {
	for _, tc := range []struct {
		wait, read time.Duration
		ok         bool
	}{
		{time.Second, 0, true},      // go-redis's default 5 s
		{5 * time.Second, 0, false}, // the reply read would time out first
		{2600 * time.Millisecond, 3 * time.Second, false},
		{4 * time.Second, 5 * time.Second, true},
		{time.Minute, -1, true}, // no read deadline
	} {
		err := redisack.Policy{Replicas: 1, Timeout: tc.wait}.Fits(tc.read)
		if (err == nil) != tc.ok {
			t.Errorf("wait %v, read timeout %v: %v, want ok=%v", tc.wait, tc.read, err, tc.ok)
		}
	}
	if err := (redisack.Policy{}).Fits(time.Millisecond); err != nil {
		t.Errorf("no acknowledgement: %v", err)
	}
}

// Bound warns when the primary, cut off with all but one of its replicas,
// would go on acknowledging, and is quiet when the policy or
// min-replicas-to-write asks for every replica.
func TestBoundSaysWhenAPartitionCanLoseAcknowledgedWrites(t *testing.T) {
	primary := testenv.StartRedisServer(t, false)
	port := portOf(t, primary.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	one := redisack.Policy{Replicas: 1}
	if msg := one.Bound(ctx, rdb); msg != "" {
		t.Errorf("no replica: %q, want nothing (no acknowledgement can be lost)", msg)
	}
	for range 2 {
		testenv.StartRedisServer(t, false, "--replicaof", "127.0.0.1", port)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if info := rdb.Info(ctx, "replication").Val(); !strings.Contains(info, "connected_slaves:2") {
			return fmt.Errorf("replicas not connected yet")
		}
		return nil
	})
	if msg := one.Bound(ctx, rdb); !strings.Contains(msg, "min-replicas-to-write 2") {
		t.Errorf("two replicas, WAIT 1, no min-replicas-to-write: %q, want the advice to set it to 2", msg)
	}
	if msg := (redisack.Policy{Replicas: 2}).Bound(ctx, rdb); msg != "" {
		t.Errorf("waiting for both replicas: %q, want nothing", msg)
	}
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "2").Err(); err != nil {
		t.Fatal(err)
	}
	if msg := one.Bound(ctx, rdb); msg != "" {
		t.Errorf("min-replicas-to-write 2: %q, want nothing", msg)
	}
	if msg := (redisack.Policy{}).Bound(ctx, rdb); msg != "" {
		t.Errorf("no acknowledgement: %q", msg)
	}
	// Managed Redis refuses CONFIG: said, not guessed.
	managed := testenv.StartRedisServer(t, false, "--rename-command", "CONFIG", "")
	mc := redis.NewClient(&redis.Options{Addr: managed.Addr()})
	defer mc.Close()
	if msg := one.Bound(ctx, mc); !strings.Contains(msg, "cannot read") {
		t.Errorf("CONFIG refused: %q, want it said", msg)
	}
}
