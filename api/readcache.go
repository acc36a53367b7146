package api

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// readCache is a short-lived per-instance copy of what the public sale
// reads render (GET /v1/sales/{id}), by sale id, so that the crowd
// refreshing a sale page at its opening reaches the database and Redis
// about once per TTL, not once per refresh (docs/design.md §6.8). Readers
// that miss at once share one load. The api keeps two: the sale rows
// (Config.SaleCacheTTL), which change only by an operator, and the live
// shelves from Redis (Config.ShelfCacheTTL), much shorter. An instance
// forgets a sale's entries when it changes the sale; other instances see
// the change within the TTL.
type readCache[V any] struct {
	ttl  time.Duration
	load func(ctx context.Context, id int64) (V, error)
	// keepErr says which errors are answers to remember like values (an
	// unknown sale); any other error is returned and not kept.
	keepErr func(error) bool

	mu      sync.Mutex
	entries map[int64]cached[V]
	// epoch moves with every forget. A load begun before a forget is
	// neither kept nor joined by readers who come after it: they could
	// otherwise get the sale as it was before the operator's change.
	epoch   uint64
	flights singleflight.Group
	// joined, if set, is called once a reader has joined a load (tests:
	// a reader between its cache miss and joining may find the load over
	// and start another).
	joined func()
}

// cached is a value (or a kept error) and until when it is trusted. The
// value is shared by concurrent readers: never modified.
type cached[V any] struct {
	val   V
	err   error
	until time.Time
}

const (
	// maxCachedSales bounds each cache. Past it, expired entries are
	// swept; if none has expired, a new entry is served but not kept.
	maxCachedSales = 10_000
	// cacheLoadTimeout bounds a load shared by several readers, which
	// runs apart from any one reader's context.
	cacheLoadTimeout = 10 * time.Second
)

func newReadCache[V any](ttl time.Duration, load func(ctx context.Context, id int64) (V, error), keepErr func(error) bool) *readCache[V] {
	if keepErr == nil {
		keepErr = func(error) bool { return false }
	}
	return &readCache[V]{ttl: ttl, load: load, keepErr: keepErr, entries: map[int64]cached[V]{}}
}

// get returns the sale's entry while it is trusted, or the answer of one
// load shared by every reader missing it at once.
func (c *readCache[V]) get(ctx context.Context, id int64) (V, error) {
	if c.ttl <= 0 {
		return c.load(ctx, id)
	}
	c.mu.Lock()
	e, ok := c.entries[id]
	epoch := c.epoch
	c.mu.Unlock()
	if ok && time.Now().Before(e.until) {
		return e.val, e.err
	}
	key := strconv.FormatUint(epoch, 10) + "/" + strconv.FormatInt(id, 10)
	ch := c.flights.DoChan(key, func() (any, error) {
		// The load serves every reader that joins it: one reader leaving
		// must not fail the others.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cacheLoadTimeout)
		defer cancel()
		v, err := c.load(lctx, id)
		if err == nil || c.keepErr(err) {
			c.keep(epoch, id, cached[V]{val: v, err: err, until: time.Now().Add(c.ttl)})
		}
		return v, err
	})
	if c.joined != nil {
		c.joined()
	}
	select {
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	case res := <-ch:
		v, _ := res.Val.(V)
		return v, res.Err
	}
}

// keep stores an entry loaded in epoch, unless a forget came since.
func (c *readCache[V]) keep(epoch uint64, id int64, e cached[V]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if len(c.entries) >= maxCachedSales {
		now := time.Now()
		for k, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedSales {
			return
		}
	}
	c.entries[id] = e
}

// forget drops the entry of a sale this instance has just changed, so its
// next read loads it as the change left it.
func (c *readCache[V]) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
	c.epoch++
}
