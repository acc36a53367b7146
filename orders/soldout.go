package orders

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/stock"
)

// soldOutFlags remember, per instance, which sales answered SOLD_OUT, so
// the flood of buyers after the last unit is refused without a Redis round
// trip. A flag is dropped when a restock event arrives, and after ttl in
// case that event was missed.
type soldOutFlags struct {
	ttl   time.Duration
	sales sync.Map // sale id -> time.Time flagged
}

func (f *soldOutFlags) set(sale int64) { f.sales.Store(sale, time.Now()) }

func (f *soldOutFlags) clear(sale int64) { f.sales.Delete(sale) }

func (f *soldOutFlags) isSet(sale int64) bool {
	v, ok := f.sales.Load(sale)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) > f.ttl {
		f.sales.CompareAndDelete(sale, v)
		return false
	}
	return true
}

// ListenRestock clears sold-out flags when a compensation returns a unit.
// It returns when ctx ends.
func (s *Service) ListenRestock(ctx context.Context) error {
	sub := s.deps.Stock.Client().Subscribe(ctx, stock.RestockChannel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			if id, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				s.soldOut.clear(id)
			}
		}
	}
}

// Restocked clears this instance's sold-out flag of a sale that got units
// back (an operator added some).
func (s *Service) Restocked(saleID int64) { s.soldOut.clear(saleID) }
