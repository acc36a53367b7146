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
)

// ErrNoFreeNode is returned when every node id is leased.
var ErrNoFreeNode = errors.New("orderid: all node ids are leased")

// Lease holds a node id for as long as the process lives. It is renewed in
// the background; Close gives it back.
type Lease struct {
	rdb    redis.UniversalClient
	token  string
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	// node is the leased node id and until the Unix millisecond up to
	// which the lease is confirmed; both change together under mu.
	mu    sync.Mutex
	node  int
	until int64
}

// margin is taken off every confirmation, for clocks that run at slightly
// different rates here and on the Redis server.
func (l *Lease) margin() time.Duration { return l.ttl / 10 }

func nodeKey(node int) string { return fmt.Sprintf("seckill:orderid:node:%d", node) }

// renewScript extends the lease only if this process still holds it, and
// takes it back if Redis lost it (a restart without persistence).
var renewScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] or not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`)

// LeaseNode claims a free node id in Redis for ttl and keeps it renewed
// every ttl/3 until ctx ends or Close is called.
func LeaseNode(ctx context.Context, rdb redis.UniversalClient, ttl time.Duration) (*Lease, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lease{rdb: rdb, token: hex.EncodeToString(b[:]), ttl: ttl, cancel: cancel, done: make(chan struct{})}
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
		ok, err := l.rdb.SetNX(ctx, nodeKey(node), l.token, l.ttl).Result()
		if err != nil {
			return fmt.Errorf("lease order id node: %w", err)
		}
		if ok {
			l.confirm(node, sent)
			return nil
		}
	}
	return ErrNoFreeNode
}

// confirm records that node is ours for ttl from sent, the moment the
// command that confirmed it was sent (Redis runs it later, so its expiry
// is later still).
func (l *Lease) confirm(node int, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.node, l.until = node, sent.Add(l.ttl-l.margin()).UnixMilli()
}

// confirmed returns the node and the Unix millisecond up to which ids may
// be minted under it.
func (l *Lease) confirmed() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node, l.until
}

// Node is the leased node id.
func (l *Lease) Node() int {
	node, _ := l.confirmed()
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
			node, _ := l.confirmed()
			sent := time.Now()
			held, err := renewScript.Run(ctx, l.rdb, []string{nodeKey(node)}, l.token, l.ttl.Milliseconds()).Int()
			switch {
			case err != nil:
				// Minting stops by itself once the last confirmation runs out.
				if ctx.Err() == nil {
					slog.Warn("order id lease renewal failed", "node", node, "err", err)
				}
			case held == 1:
				l.confirm(node, sent)
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

// Close stops renewing and frees the node id.
func (l *Lease) Close(ctx context.Context) error {
	l.cancel()
	<-l.done
	node, _ := l.confirmed()
	return redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`).
		Run(ctx, l.rdb, []string{nodeKey(node)}, l.token).Err()
}
