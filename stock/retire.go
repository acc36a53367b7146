package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
)

var (
	//go:embed retire.lua
	retireSrc    string
	retireScript = redis.NewScript(retireSrc)
)

// ErrNotDrained is returned by Retire for a sale that has not ended in
// Redis or still holds intents its relay has not started.
var ErrNotDrained = errors.New("sale has not ended or still holds intents")

// Retire drops an ended, drained sale's hot keys from Redis (meta, stock,
// buyers, idem, intents with its consumer group, version, released, the
// line and its departure counter) and
// forgets the sale, so neither the relay nor a buyer's reads pay for it any
// more. Postgres keeps the record; the api answers for a retired sale from
// there. The caller checks that every order of the sale is final; the
// script checks, atomically, that the sale has ended and its stream is
// drained and acknowledged, else it changes nothing (ErrNotDrained).
func (s *Stock) Retire(ctx context.Context, saleID int64) error {
	k := KeysFor(saleID)
	err := s.WithSaleLock(ctx, saleID, func(ctx context.Context) error {
		n, err := retireScript.Run(ctx, s.rdb, k.All()).Int()
		if err != nil {
			return fmt.Errorf("retire sale %d: %w", saleID, err)
		}
		if n == 0 {
			return ErrNotDrained
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := fault.Hit(fault.RetireKeys); err != nil {
		return err
	}
	// SalesKey lives in another slot; a sale whose keys are gone but which
	// is still listed is harmless (nothing to read) and removed here, or
	// by the next pass, whose retire.lua finds the keys gone.
	if err := s.rdb.SRem(ctx, SalesKey, saleID).Err(); err != nil {
		return fmt.Errorf("forget sale %d: %w", saleID, err)
	}
	return fault.Hit(fault.RetireUnlist)
}

// HoldersOf returns, for every sale loaded in Redis, the order through
// which userID holds a unit, in one round trip. Retired sales are not
// loaded, so the cost follows the sales still in Redis, not every sale
// ever held.
func (s *Stock) HoldersOf(ctx context.Context, userID string) (map[int64]int64, error) {
	sales, err := s.Sales(ctx)
	if err != nil || len(sales) == 0 {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(sales))
	for i, sale := range sales {
		cmds[i] = pipe.HGet(ctx, KeysFor(sale).Buyers, userID)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("holdings of %s: %w", userID, err)
	}
	out := map[int64]int64{}
	for i, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("holdings of %s: %w", userID, err)
		}
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("holdings of %s in sale %d: bad order id %q", userID, sales[i], v)
		}
		out[sales[i]] = id
	}
	return out, nil
}

// AdmissionTimes returns when each of orders was admitted, on its
// admitting api's clock, by order id, in one round trip: for orders whose
// row is not written yet. Only OrderID and SaleID are read. An order
// admitted before the time was kept, or released since, is missing.
func (s *Stock) AdmissionTimes(ctx context.Context, orders []domain.OrderRef) (map[int64]time.Time, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(orders))
	for i, o := range orders {
		cmds[i] = pipe.HGet(ctx, KeysFor(o.SaleID).Admitted, strconv.FormatInt(o.OrderID, 10))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("admission times: %w", err)
	}
	out := make(map[int64]time.Time, len(orders))
	for i, c := range cmds {
		if ms, err := c.Int64(); err == nil && ms > 0 {
			out[orders[i].OrderID] = time.UnixMilli(ms).UTC()
		}
	}
	return out, nil
}
