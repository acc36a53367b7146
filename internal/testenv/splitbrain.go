package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SplitBrain is Redis in the shipped shape (docker-compose.yml: a
// primary, two replicas, min-replicas-to-write 1 with min-replicas-max-lag
// 2, three Sentinels), wired so that a test can partition it the way that
// loses acknowledged writes (docs/design.md §3.13): the primary and one
// replica (Beside) cut off from the Sentinels and from the other replica
// (Across), while clients that address the primary directly still reach
// it.
//
// Every server is known to the Sentinels, and to the other servers, by a
// proxy of its own (the primary by the address the Sentinels monitor, the
// replicas by the address they announce), and Across replicates through
// the primary's proxy; Beside replicates from the primary directly.
// Partition cuts the primary's and Beside's proxies; the primary's own
// port, which PrimaryURL names, stays open.
type SplitBrain struct {
	t              testing.TB
	Primary        *RedisServer
	Beside, Across *RedisServer
	links          map[*RedisServer]*Proxy // the address everyone but the test's direct clients use
	sentinels      []*sentinel
}

// SplitBrainDownAfter is the Sentinels' down-after-milliseconds.
const SplitBrainDownAfter = 1500 * time.Millisecond

// StartSplitBrain starts the servers and the Sentinels and returns once
// both replicas are in sync and every Sentinel knows them.
func StartSplitBrain(t testing.TB) *SplitBrain {
	t.Helper()
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		t.Fatal("redis-sentinel is required: apt-get install redis-sentinel (.ci/run does)")
	}
	s := &SplitBrain{t: t, links: map[*RedisServer]*Proxy{}}
	bounds := []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"}
	s.Primary = StartRedisServer(t, true, bounds...)
	s.links[s.Primary] = NewProxy(t, s.Primary.Addr())
	replica := func(master string) *RedisServer {
		link := NewProxy(t, "127.0.0.1:1") // retargeted once the server has a port
		host, port, _ := net.SplitHostPort(master)
		_, announce, _ := net.SplitHostPort(link.Addr())
		r := StartRedisServer(t, true, append([]string{"--replicaof", host, port,
			"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", announce}, bounds...)...)
		link.Retarget(r.Addr())
		s.links[r] = link
		return r
	}
	s.Beside = replica(s.Primary.Addr())
	s.Across = replica(s.links[s.Primary].Addr())
	awaitReplicas(t, s.Primary.Addr(), 60*time.Second, true, atLeast(2, s.Primary.Addr()))
	_, monitored, _ := net.SplitHostPort(s.links[s.Primary].Addr())
	for range 3 {
		s.sentinels = append(s.sentinels, startSentinel(t, monitored, SplitBrainDownAfter))
	}
	t.Cleanup(func() {
		for _, sn := range s.sentinels {
			stopOrKill(sn.cmd, sn.done, os.Interrupt)
		}
	})
	Eventually(t, 30*time.Second, func() error {
		for _, sn := range s.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr()})
			replicas, err := c.Replicas(context.Background(), MasterName).Result()
			others, serr := c.Sentinels(context.Background(), MasterName).Result()
			c.Close()
			if err != nil || serr != nil || len(replicas) != 2 || len(others) != 2 {
				return fmt.Errorf("sentinel %s: %d replicas, %d other sentinels (%v %v)", sn.addr(), len(replicas), len(others), err, serr)
			}
		}
		return nil
	})
	return s
}

// startSentinel starts one Sentinel monitoring the primary at
// 127.0.0.1:port as MasterName with a quorum of two, with a config file of
// its own (Sentinel rewrites it as it learns the topology).
func startSentinel(t testing.TB, port string, downAfter time.Duration) *sentinel {
	t.Helper()
	s := &sentinel{port: FreePort(t), done: make(chan struct{})}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %s 2
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, s.port, dir, MasterName, port, MasterName, downAfter.Milliseconds(), MasterName, MasterName)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("redis-sentinel", conf)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-sentinel: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	Eventually(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", s.addr())
		if err == nil {
			c.Close()
		}
		return err
	})
	return s
}

// Partition cuts the primary and Beside off from the Sentinels and from
// Across. Clients of PrimaryURL still reach the primary, which goes on
// replicating to Beside.
func (s *SplitBrain) Partition() {
	s.links[s.Primary].Cut()
	s.links[s.Beside].Cut()
}

// Heal undoes Partition.
func (s *SplitBrain) Heal() {
	s.links[s.Primary].Restore()
	s.links[s.Beside].Restore()
}

// URL is the Sentinel URL of database db.
func (s *SplitBrain) URL(db int) string {
	u := fmt.Sprintf("redis://%s/%d?master_name=%s", s.sentinels[0].addr(), db, MasterName)
	for _, sn := range s.sentinels[1:] {
		u += "&addr=" + sn.addr()
	}
	return u
}

// PrimaryURL is the first primary's own address, database db: a client
// configured with it still reaches that server after a failover, as one
// with a stale address (or a virtual IP that has not moved) does.
func (s *SplitBrain) PrimaryURL(db int) string {
	return fmt.Sprintf("redis://%s/%d", s.Primary.Addr(), db)
}

// AwaitPromotion waits until every Sentinel names Across as the primary
// and it answers as one.
func (s *SplitBrain) AwaitPromotion(within time.Duration) {
	s.t.Helper()
	want := s.links[s.Across].Addr()
	Eventually(s.t, within, func() error {
		for _, sn := range s.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr()})
			addr, err := c.GetMasterAddrByName(context.Background(), MasterName).Result()
			c.Close()
			if err != nil {
				return err
			}
			if now := net.JoinHostPort(addr[0], addr[1]); now != want {
				return fmt.Errorf("sentinel %s names %s, not Across (%s)", sn.addr(), now, want)
			}
		}
		if role := serverRole(s.Across.Addr()); role != "master" {
			return fmt.Errorf("Across is %q", role)
		}
		return nil
	})
}

// AwaitDemotion waits, after Heal, until the first primary and Beside are
// both replicas of Across, online: the first primary's writes of the
// partition are gone.
func (s *SplitBrain) AwaitDemotion(within time.Duration) {
	s.t.Helper()
	Eventually(s.t, within, func() error {
		for _, r := range []*RedisServer{s.Primary, s.Beside} {
			if role := serverRole(r.Addr()); role != "slave" {
				return fmt.Errorf("%s is %q, not yet a replica", r.Addr(), role)
			}
		}
		return nil
	})
	awaitReplicas(s.t, s.Across.Addr(), 60*time.Second, false, atLeast(2, s.Across.Addr()))
}

// serverRole is the server's role as it reports it ("master", "slave"),
// or "" when it does not answer.
func serverRole(addr string) string {
	info, err := replicationInfo(addr)
	if err != nil {
		return ""
	}
	return infoField(info, "role")
}

// replicationInfo is the server's INFO replication, on a connection of
// its own.
func replicationInfo(addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	return c.Info(context.Background(), "replication").Result()
}
