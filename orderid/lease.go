package orderid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoFreeNode is returned when every node id is leased.
var ErrNoFreeNode = errors.New("orderid: all node ids are leased")

// Lease holds a node id for as long as the process lives. It is renewed in
// the background; Close gives it back.
type Lease struct {
	rdb    redis.UniversalClient
	key    string
	token  string
	node   int
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}
}

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
	token := hex.EncodeToString(b[:])
	startN, err := rand.Int(rand.Reader, big.NewInt(MaxNodes))
	if err != nil {
		return nil, err
	}
	start := int(startN.Int64())
	for i := range MaxNodes {
		node := (start + i) % MaxNodes
		ok, err := rdb.SetNX(ctx, nodeKey(node), token, ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("lease order id node: %w", err)
		}
		if !ok {
			continue
		}
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l := &Lease{rdb: rdb, key: nodeKey(node), token: token, node: node, ttl: ttl, cancel: cancel, done: make(chan struct{})}
		go l.renew(lctx)
		return l, nil
	}
	return nil, ErrNoFreeNode
}

// Node is the leased node id.
func (l *Lease) Node() int { return l.node }

func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			held, err := renewScript.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
			switch {
			case err != nil && ctx.Err() == nil:
				slog.Warn("order id lease renewal failed", "node", l.node, "err", err)
			case err == nil && held == 0:
				// Someone else took the node after our lease lapsed. Ids stay
				// unique only while this process stops minting, which it
				// cannot do on its own: make it loud.
				slog.Error("order id node lease lost to another process", "node", l.node)
			}
		}
	}
}

// Close stops renewing and frees the node id.
func (l *Lease) Close(ctx context.Context) error {
	l.cancel()
	<-l.done
	return redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`).
		Run(ctx, l.rdb, []string{l.key}, l.token).Err()
}
