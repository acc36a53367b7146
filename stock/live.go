package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// LiveSales returns, in ascending order, the loaded sales (members of
// SalesKey) whose intent stream still needs a reader: the sale has not
// ended, or its stream holds intents, or a consumer group of the stream
// holds entries read and not yet acknowledged. An ended sale whose intents
// have all been started is not live, and stays so: admit.lua admits nobody
// once now >= ends_ms, so nothing is added to its stream any more.
//
// It costs one SMEMBERS and one pipeline of three O(1) commands per loaded
// sale. The end is judged by Redis's clock, the one admit.lua judges it by,
// read in the same pipeline before the streams' lengths: an intent
// admitted before that instant is counted in XLEN, and none is admitted
// after it.
func (s *Stock) LiveSales(ctx context.Context) ([]int64, error) {
	ids, err := s.Sales(ctx)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	slices.Sort(ids)
	type probe struct {
		ends    *redis.StringCmd
		backlog *redis.IntCmd
		groups  *redis.XInfoGroupsCmd
	}
	pipe := s.rdb.Pipeline()
	clock := pipe.Time(ctx)
	probes := make([]probe, len(ids))
	for i, id := range ids {
		k := KeysFor(id)
		probes[i] = probe{pipe.HGet(ctx, k.Meta, "ends_ms"), pipe.XLen(ctx, k.Intents), pipe.XInfoGroups(ctx, k.Intents)}
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	now, err := clock.Result()
	if err != nil {
		return nil, fmt.Errorf("live sales: %w", err)
	}
	live := make([]int64, 0, len(ids))
	for i, id := range ids {
		p := probes[i]
		ends, err := p.ends.Int64()
		if errors.Is(err, redis.Nil) {
			ends = 0 // no meta: nobody is admitted, as if it had ended
		} else if err != nil {
			return nil, fmt.Errorf("live sales: end of sale %d: %w", id, err)
		}
		backlog, err := p.backlog.Result()
		if err != nil {
			return nil, fmt.Errorf("live sales: intents of sale %d: %w", id, err)
		}
		var pending int64
		groups, err := p.groups.Result()
		switch {
		case redis.HasErrorPrefix(err, "no such key"):
		case err != nil:
			return nil, fmt.Errorf("live sales: consumer groups of sale %d: %w", id, err)
		}
		for _, g := range groups {
			pending += g.Pending
		}
		if ends > now.UnixMilli() || backlog > 0 || pending > 0 {
			live = append(live, id)
		}
	}
	return live, nil
}
