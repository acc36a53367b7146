package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHA is Redis as it is run for availability, all processes of the
// test's own on loopback: a primary and its replicas (all with AOF), and
// three Sentinels that monitor them under MasterName with a quorum of two
// and promote a replica DownAfter after the primary stops answering.
type RedisHA struct {
	t testing.TB
	// Servers[0] starts as the primary, the others as its replicas.
	Servers []*RedisServer
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary must not answer before they fail over.
	DownAfter time.Duration
	link      *Proxy // the first replica's first link to the primary
	sentinels []*sentinel
}

// RedisHAOptions shape a RedisHA; the zero value is StartRedisHA's.
type RedisHAOptions struct {
	Replicas int // 0: one
	// MinReplicasToWrite and MinReplicasMaxLag (seconds) are set on every
	// server, as docker-compose.yml does: a primary that has lost its
	// replicas for that long refuses writes. 0: not set.
	MinReplicasToWrite, MinReplicasMaxLag int
	DownAfter                             time.Duration // 0: 1.5 s
}

// MasterName is the name the Sentinels of a RedisHA monitor.
const MasterName = "seckill"

type sentinel struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedisHA starts the primary, one replica and the Sentinels, and
// returns once the replica is in sync and every Sentinel knows both.
func StartRedisHA(t testing.TB) *RedisHA {
	t.Helper()
	return StartRedisHAWith(t, RedisHAOptions{})
}

// StartRedisHAWith starts a RedisHA shaped by o, and returns once every
// replica is in sync and every Sentinel knows them all.
func StartRedisHAWith(t testing.TB, o RedisHAOptions) *RedisHA {
	t.Helper()
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		t.Fatal("redis-sentinel is required: apt-get install redis-sentinel (.ci/run does)")
	}
	o.Replicas = max(o.Replicas, 1)
	if o.DownAfter <= 0 {
		o.DownAfter = 1500 * time.Millisecond
	}
	var bounds []string
	if o.MinReplicasToWrite > 0 {
		bounds = []string{"--min-replicas-to-write", fmt.Sprint(o.MinReplicasToWrite), "--min-replicas-max-lag", fmt.Sprint(o.MinReplicasMaxLag)}
	}
	h := &RedisHA{t: t, DownAfter: o.DownAfter}
	h.Servers = append(h.Servers, StartRedisServer(t, true, bounds...))
	// The first replica reaches the first primary through a proxy the test
	// can cut (CutReplication); Sentinel knows every server by its own port.
	h.link = NewProxy(t, h.Servers[0].Addr())
	_, linkPort, _ := net.SplitHostPort(h.link.Addr())
	primaryPort := fmt.Sprint(h.Servers[0].port)
	for i := range o.Replicas {
		port := primaryPort
		if i == 0 {
			port = linkPort
		}
		h.Servers = append(h.Servers, StartRedisServer(t, true, append([]string{"--replicaof", "127.0.0.1", port}, bounds...)...))
	}
	h.waitInSync(h.Servers[0].Addr(), o.Replicas)
	for range 3 {
		h.sentinels = append(h.sentinels, startSentinel(t, strconv.Itoa(h.Servers[0].port), h.DownAfter))
	}
	t.Cleanup(h.stopSentinels)
	Eventually(t, 30*time.Second, func() error {
		for _, s := range h.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
			replicas, err := c.Replicas(context.Background(), MasterName).Result()
			c.Close()
			if err != nil || len(replicas) != o.Replicas {
				return fmt.Errorf("sentinel %s: replicas %v %v", s.addr(), replicas, err)
			}
		}
		return nil
	})
	return h
}

// CutReplication breaks the first replica's link to the first primary, as
// a network partition would: writes the primary takes from then on do not
// reach the replica until RestoreReplication (and are lost if the primary
// dies first).
func (h *RedisHA) CutReplication() { h.link.Cut() }

// RestoreReplication lets the replica reconnect; it catches up with a
// partial resynchronisation.
func (h *RedisHA) RestoreReplication() { h.link.Restore() }

func (s *sentinel) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (h *RedisHA) stopSentinels() {
	for _, s := range h.sentinels {
		stopOrKill(s.cmd, s.done, os.Interrupt)
	}
}

// SwitchMaster returns a channel that gets the time at which the first
// Sentinel announces a new primary (+switch-master), from now on.
func (h *RedisHA) SwitchMaster() <-chan time.Time {
	h.t.Helper()
	out := make(chan time.Time, 1)
	var once sync.Once
	for _, s := range h.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
		sub := c.Subscribe(context.Background(), "+switch-master")
		if _, err := sub.Receive(context.Background()); err != nil { // the subscription's confirmation
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { sub.Close(); c.Close() })
		go func() {
			if _, ok := <-sub.Channel(); ok {
				once.Do(func() { out <- time.Now() })
			}
		}()
	}
	return out
}

// SentinelAddrs are the Sentinels' host:port.
func (h *RedisHA) SentinelAddrs() []string {
	out := make([]string, len(h.sentinels))
	for i, s := range h.sentinels {
		out[i] = s.addr()
	}
	return out
}

// URL is the failover URL of database db (go-redis's form, which
// `--redis-addr` takes).
func (h *RedisHA) URL(db int) string {
	addrs := h.SentinelAddrs()
	u := fmt.Sprintf("redis://%s/%d?master_name=%s", addrs[0], db, MasterName)
	for _, a := range addrs[1:] {
		u += "&addr=" + a
	}
	return u
}

// Primary is the address the Sentinels name as the primary now.
func (h *RedisHA) Primary() string {
	h.t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: h.sentinels[0].addr()})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(context.Background(), MasterName).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return net.JoinHostPort(addr[0], addr[1])
}

// Server is the server listening at addr.
func (h *RedisHA) Server(addr string) *RedisServer {
	for _, s := range h.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	h.t.Fatalf("no server of the test at %s", addr)
	return nil
}

// AwaitFailover waits until every Sentinel names a primary other than old
// and that server answers as a primary.
func (h *RedisHA) AwaitFailover(old string, within time.Duration) string {
	h.t.Helper()
	var now string
	Eventually(h.t, within, func() error {
		for _, s := range h.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
			addr, err := c.GetMasterAddrByName(context.Background(), MasterName).Result()
			c.Close()
			if err != nil {
				return err
			}
			if now = net.JoinHostPort(addr[0], addr[1]); now == old {
				return fmt.Errorf("sentinel %s still names %s", s.addr(), old)
			}
		}
		if role := serverRole(now); role != "master" {
			return fmt.Errorf("%s is %q, not yet the primary", now, role)
		}
		return nil
	})
	return now
}

// AwaitReplica waits until the server at addr is a replica of the current
// primary, in sync with it.
func (h *RedisHA) AwaitReplica(addr string, within time.Duration) {
	h.t.Helper()
	Eventually(h.t, within, func() error {
		if role := serverRole(addr); role != "slave" {
			return fmt.Errorf("%s is %q, not a replica", addr, role)
		}
		return nil
	})
	_, port, _ := net.SplitHostPort(addr)
	// Within the same bound: a full resync on a loaded machine (a fork, the
	// snapshot, its load) can take longer than a quiet one suggests.
	awaitReplicas(h.t, h.Primary(), within, true, func(replicas []string) error {
		for _, r := range replicas {
			if strings.Contains(r, "port="+port+",") {
				return nil
			}
		}
		return fmt.Errorf("%s is not among the replicas in sync %v; it reports %s", addr, replicas, replicaLink(addr))
	})
}

// replicaLink is what a replica says of its link to its primary.
func replicaLink(addr string) string {
	info, err := replicationInfo(addr)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("master %s:%s, link %s, sync in progress %s, offset %s",
		infoField(info, "master_host"), infoField(info, "master_port"), infoField(info, "master_link_status"),
		infoField(info, "master_sync_in_progress"), infoField(info, "slave_repl_offset"))
}

// waitInSync waits until the primary at addr has n replicas online that
// have every byte of its replication stream.
func (h *RedisHA) waitInSync(addr string, n int) {
	h.t.Helper()
	awaitReplicas(h.t, addr, 30*time.Second, true, atLeast(n, addr))
}

// awaitReplicas waits until ok accepts the INFO lines (slaveN) of the
// replicas of the primary at addr that are online and, if synced, have
// every byte of its replication stream. (While writes go on, as after a
// failover in the middle of a wave, a replica need not have every byte at
// any one moment: synced is for a quiet primary.)
func awaitReplicas(t testing.TB, addr string, within time.Duration, synced bool, ok func(replicas []string) error) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	Eventually(t, within, func() error {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		offset := infoField(info, "master_repl_offset")
		var replicas []string
		for i := 0; ; i++ {
			replica := infoField(info, fmt.Sprintf("slave%d", i))
			if replica == "" {
				break
			}
			if strings.Contains(replica, "state=online") && (!synced || strings.Contains(replica, "offset="+offset+",")) {
				replicas = append(replicas, replica)
			}
		}
		return ok(replicas)
	})
}

// atLeast accepts n replicas or more of the primary at addr.
func atLeast(n int, addr string) func(replicas []string) error {
	return func(replicas []string) error {
		if len(replicas) < n {
			return fmt.Errorf("%d of %d replicas of %s ready: %v", len(replicas), n, addr, replicas)
		}
		return nil
	}
}

// infoField is one field of an INFO reply.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return ""
}
