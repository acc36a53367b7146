package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Shelf is what a buyer reading a sale sees of it in Redis: the units
// left and the end admit.lua judges purchases by.
type Shelf struct {
	// Loaded: Redis holds the sale; without it the other fields are zero.
	Loaded    bool
	Remaining int
	// EndsAt is the end Redis holds: an operator's end or cancel moves it
	// here (end.lua) before or without the reader's copy of the row
	// seeing it. Zero when Redis holds no end.
	EndsAt time.Time
}

// Shelves reads the shelf of each sale in one round trip: one pipeline of
// a GET and an HGET per sale. The two keys of a sale share its hash tag.
// On a single node the whole pipeline is one round trip; on Redis Cluster
// the sales of a page live in different slots, so go-redis's
// ClusterClient splits the pipeline by node and sends the parts in
// parallel (one round trip per node holding a sale of the page). MGET
// would not do there: it must not span slots.
func (s *Stock) Shelves(ctx context.Context, saleIDs []int64) (map[int64]Shelf, error) {
	out := make(map[int64]Shelf, len(saleIDs))
	if len(saleIDs) == 0 {
		return out, nil
	}
	type read struct {
		left *redis.StringCmd
		ends *redis.StringCmd
	}
	pipe := s.rdb.Pipeline()
	reads := make([]read, len(saleIDs))
	for i, id := range saleIDs {
		k := KeysFor(id)
		reads[i] = read{pipe.Get(ctx, k.Stock), pipe.HGet(ctx, k.Meta, "ends_ms")}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the shelves of %d sales: %w", len(saleIDs), err)
	}
	for i, id := range saleIDs {
		left, err := reads[i].left.Int()
		if err != nil {
			continue // not loaded (redis.Nil), or not a count: no shelf
		}
		sh := Shelf{Loaded: true, Remaining: left}
		if ms, err := reads[i].ends.Int64(); err == nil {
			sh.EndsAt = time.UnixMilli(ms)
		}
		out[id] = sh
	}
	return out, nil
}
