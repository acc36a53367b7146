package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Operators' changes to a live sale. The caller holds the sale's lock
// (WithSaleLock) and has written the change to the database first.

var (
	//go:embed end.lua
	endSrc    string
	endScript = redis.NewScript(endSrc)

	//go:embed add.lua
	addSrc    string
	addScript = redis.NewScript(addSrc)
)

// End ends the sale in Redis at endsAt or now by Redis's clock, whichever
// is earlier, unless it ends earlier already, and moves its start to
// startsAt if that is earlier (keeping the window ordered): every purchase
// that reaches Redis after End answers ENDED. It reports false, changing
// nothing, when the sale is not loaded.
func (s *Stock) End(ctx context.Context, saleID int64, startsAt, endsAt time.Time) (bool, error) {
	n, err := intReply(s.ack.Run(ctx, s.rdb, endScript, []string{KeysFor(saleID).Meta}, endsAt.UnixMilli(), startsAt.UnixMilli()))
	if err != nil {
		return false, fmt.Errorf("end sale %d: %w", saleID, err)
	}
	return n == 1, nil
}

// AddUnits puts units more of the sale on sale in Redis, moves the sale's
// version and announces the restock, so every api instance drops its
// sold-out flag. total is the sale's total stock in the database with the
// units: an add whose total Redis's count covers already (add.lua) changes
// nothing. It reports false, changing nothing, when the sale is not loaded.
func (s *Stock) AddUnits(ctx context.Context, saleID int64, units, total int) (bool, error) {
	if units <= 0 {
		return false, fmt.Errorf("add units to sale %d: %d is not a positive count", saleID, units)
	}
	k := KeysFor(saleID)
	left, err := intReply(s.ack.Run(ctx, s.rdb, addScript, []string{k.Meta, k.Stock, k.Version}, units, total))
	if err != nil {
		return false, fmt.Errorf("add units to sale %d: %w", saleID, err)
	}
	if left < 0 {
		return false, nil
	}
	s.announceRestock(ctx, saleID)
	return true, nil
}

// Ends returns the end (Unix milliseconds) Redis holds for each of the
// sales that is loaded, in one round trip.
func (s *Stock) Ends(ctx context.Context, saleIDs []int64) (map[int64]int64, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(saleIDs))
	for i, id := range saleIDs {
		cmds[i] = pipe.HGet(ctx, KeysFor(id).Meta, "ends_ms")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("sale ends: %w", err)
	}
	out := make(map[int64]int64, len(saleIDs))
	for i, id := range saleIDs {
		if ms, err := cmds[i].Int64(); err == nil {
			out[id] = ms
		}
	}
	return out, nil
}
