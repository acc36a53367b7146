package orderid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/redisack"
)

// ErrNoFreeNode is returned when every node id is leased.
var ErrNoFreeNode = errors.New("orderid: all node ids are leased")

// Lease holds a node id for as long as the process lives. It is renewed in
// the background; Close gives it back.
type Lease struct {
	rdb    redis.UniversalClient
	ack    redisack.Policy
	token  string
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	// node is the leased node id and until the Unix millisecond up to
	// which the lease is confirmed; floor is the Unix millisecond below
	// which the node's earlier holders may have minted (their last
	// confirmed until), so this holder mints at floor or later. All three
	// change together under mu.
	mu    sync.Mutex
	node  int
	until int64
	floor int64
}

// margin is taken off every confirmation, for clocks that run at slightly
// different rates here and on the Redis server.
func (l *Lease) margin() time.Duration { return l.ttl / 10 }

func nodeKey(node int) string { return fmt.Sprintf("seckill:orderid:node:%d", node) }

// floorKey holds, for a node, the highest Unix millisecond up to which any
// holder of it was confirmed: no id minted under the node has a later
// time. It has no expiry, so it outlives every lease of the node.
func floorKey(node int) string { return fmt.Sprintf("seckill:orderid:node:%d:floor", node) }

// Both scripts record the holder's new confirmation as the node's floor
// (never lowering it) in the same step as the lease, so whoever holds the
// node next starts above every id this holder can mint, whatever the two
// hosts' clocks say and however the lease ends: a Close while handlers
// still mint, a lapse during a pause, a crash. raiseFloor leaves the floor
// as it was before in prev.
const raiseFloor = `
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[3]) > prev then
  redis.call('SET', KEYS[2], ARGV[3])
end
`

// acquireScript takes a free node and returns its earlier holders' floor,
// or -1 when the node is held.
var acquireScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return -1
end` + raiseFloor + `
return prev`)

// renewScript extends the lease only if this process still holds it (-1
// otherwise), and takes it back if Redis lost it (a restart without
// persistence). It returns the floor to mint above: 0 while the key was
// ours all along, since the floor then is this holder's own last
// confirmation, and its ids need not stay above the ones it may still
// mint (the generator keeps them increasing): staying above it would put
// every id up to a lease's term in the future. A key found gone may have
// been held by another process meanwhile, whose floor counts.
var renewScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] and cur then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])` + raiseFloor + `
if cur then
  return 0
end
return prev`)

// LeaseNode claims a free node id in Redis for ttl and keeps it renewed
// every ttl/3 until ctx ends or Close is called. A lease and its floor
// count only once ack's replicas hold them (docs/design.md §3.13): a
// failover must not hand a promoted replica a node without its holder, or
// a floor below the ids already minted.
func LeaseNode(ctx context.Context, rdb redis.UniversalClient, ttl time.Duration, ack redisack.Policy) (*Lease, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lease{rdb: rdb, ack: ack, token: hex.EncodeToString(b[:]), ttl: ttl, cancel: cancel, done: make(chan struct{})}
	if err := l.acquire(ctx); err != nil {
		cancel()
		return nil, err
	}
	go l.renew(lctx)
	return l, nil
}

// acquire takes a free node id, starting at a random one.
func (l *Lease) acquire(ctx context.Context) error {
	startN, err := rand.Int(rand.Reader, big.NewInt(MaxNodes))
	if err != nil {
		return err
	}
	start := int(startN.Int64())
	for i := range MaxNodes {
		node := (start + i) % MaxNodes
		sent := time.Now()
		until := l.term(sent)
		prev, err := int64Reply(l.ack.Run(ctx, l.rdb, acquireScript, []string{nodeKey(node), floorKey(node)}, l.token, l.ttl.Milliseconds(), until))
		if err != nil {
			return fmt.Errorf("lease order id node: %w", err)
		}
		if prev >= 0 {
			l.confirm(node, until, prev)
			return nil
		}
	}
	return ErrNoFreeNode
}

// int64Reply is the integer reply of an acknowledged script run; a reply
// replicas did not confirm is an error.
func int64Reply(cmd *redis.Cmd, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

// term is the Unix millisecond up to which a lease confirmed by a command
// sent at sent covers minting: ttl from then (Redis runs the command later,
// so its expiry is later still), less the margin.
func (l *Lease) term(sent time.Time) int64 { return sent.Add(l.ttl - l.margin()).UnixMilli() }

// confirm records that node is ours until then, above its earlier holders'
// floor.
func (l *Lease) confirm(node int, until, floor int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if node != l.node {
		l.floor = 0
	}
	l.node, l.until, l.floor = node, until, max(l.floor, floor)
}

// confirmed returns the node, the Unix millisecond up to which ids may be
// minted under it, and the one from which they may be.
func (l *Lease) confirmed() (node int, until, floor int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node, l.until, l.floor
}

// Node is the leased node id.
func (l *Lease) Node() int {
	node, _, _ := l.confirmed()
	return node
}

func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			node, _, _ := l.confirmed()
			until := l.term(time.Now())
			prev, err := int64Reply(l.ack.Run(ctx, l.rdb, renewScript, []string{nodeKey(node), floorKey(node)}, l.token, l.ttl.Milliseconds(), until))
			switch {
			case err != nil:
				// Minting stops by itself once the last confirmation runs
				// out; so it does when replicas did not acknowledge it.
				if ctx.Err() == nil {
					slog.Warn("order id lease renewal failed", "node", node, "err", err)
				}
			case prev >= 0:
				l.confirm(node, until, prev)
			default:
				// Another process took the node after our lease lapsed; the
				// fence already stopped minting. Move to a free node.
				slog.Error("order id node lease lost to another process; taking a new node", "node", node)
				if err := l.acquire(ctx); err != nil && ctx.Err() == nil {
					slog.Error("order id lease: no new node", "err", err)
				}
			}
		}
	}
}

// Close stops renewing and frees the node id. Handlers still running may
// go on minting until the last confirmation runs out: the node's floor
// already covers those ids, so its next holder starts above them.
func (l *Lease) Close(ctx context.Context) error {
	l.cancel()
	<-l.done
	node, _, _ := l.confirmed()
	return redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`).
		Run(ctx, l.rdb, []string{nodeKey(node)}, l.token).Err()
}
