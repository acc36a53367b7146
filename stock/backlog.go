package stock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Backlog is the number of admitted orders whose workflow has not started
// yet, over every sale loaded in Redis, read in one round trip.
func (s *Stock) Backlog(ctx context.Context) (int64, error) {
	sales, err := s.Sales(ctx)
	if err != nil || len(sales) == 0 {
		return 0, err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(sales))
	for i, sale := range sales {
		cmds[i] = pipe.XLen(ctx, KeysFor(sale).Intents)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("backlog: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
