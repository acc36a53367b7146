package api

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
)

// saleRows is this instance's short-lived copy of the sale rows that the
// public reads (GET /v1/sales/{id}) render, so that the crowd refreshing
// a sale page at its opening reaches the database about once per TTL, not
// once per refresh. What a row holds changes only by an operator (end,
// add units, cancel): this instance forgets its copy when it makes such a
// change, and other instances see it within the TTL. The live parts of a
// sale do not come from here: the remaining stock and the end Redis holds
// are read at each request (Stock.Shelves), so an ended or cancelled sale
// reads as ended on every instance as soon as Redis has the end
// (docs/design.md §6.7).
type saleRows struct {
	ttl  time.Duration
	load func(ctx context.Context, id int64) (*ent.Sale, error)

	mu   sync.Mutex
	rows map[int64]saleRow
	// epoch moves with every forget. A load begun before a forget is
	// neither kept nor joined by readers who come after it: they could
	// otherwise get the row as it was before the operator's change.
	epoch   uint64
	flights singleflight.Group
}

// saleRow is a row (or the answer that there is none) and until when it
// is trusted. The row is shared by concurrent readers: never modified.
type saleRow struct {
	sale  *ent.Sale
	err   error // nil or domain.ErrUnknownSale
	until time.Time
}

const (
	// maxSaleRows bounds the copy. Past it, expired rows are swept; if
	// none has expired, a new row is served but not kept.
	maxSaleRows = 10_000
	// saleLoadTimeout bounds a load shared by several readers, which runs
	// apart from any one reader's context.
	saleLoadTimeout = 10 * time.Second
)

func newSaleRows(ttl time.Duration, load func(ctx context.Context, id int64) (*ent.Sale, error)) *saleRows {
	return &saleRows{ttl: ttl, load: load, rows: map[int64]saleRow{}}
}

// sale returns the sale's row, from the copy while it is trusted, or from
// one load shared by every reader missing it at once. An unknown sale is
// remembered as unknown for the TTL too.
func (c *saleRows) sale(ctx context.Context, id int64) (*ent.Sale, error) {
	if c.ttl <= 0 {
		return c.load(ctx, id)
	}
	c.mu.Lock()
	row, ok := c.rows[id]
	epoch := c.epoch
	c.mu.Unlock()
	if ok && time.Now().Before(row.until) {
		return row.sale, row.err
	}
	key := strconv.FormatUint(epoch, 10) + "/" + strconv.FormatInt(id, 10)
	ch := c.flights.DoChan(key, func() (any, error) {
		// The load serves every reader that joins it: one reader leaving
		// must not fail the others.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saleLoadTimeout)
		defer cancel()
		sl, err := c.load(lctx, id)
		if err == nil || errors.Is(err, domain.ErrUnknownSale) {
			c.keep(epoch, id, saleRow{sale: sl, err: err, until: time.Now().Add(c.ttl)})
		}
		return sl, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		sl, _ := res.Val.(*ent.Sale)
		return sl, res.Err
	}
}

// keep stores a row loaded in epoch, unless a forget came since.
func (c *saleRows) keep(epoch uint64, id int64, row saleRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if len(c.rows) >= maxSaleRows {
		now := time.Now()
		for k, r := range c.rows {
			if !now.Before(r.until) {
				delete(c.rows, k)
			}
		}
		if len(c.rows) >= maxSaleRows {
			return
		}
	}
	c.rows[id] = row
}

// forget drops the copy of a sale this instance has just changed, so its
// next read loads the row as the change left it.
func (c *saleRows) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rows, id)
	c.epoch++
}
