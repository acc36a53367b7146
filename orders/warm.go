package orders

import (
	"context"
	"time"

	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Warm loads a sale into Redis from the database: its stock and the
// buyers holding live orders. It does nothing to a sale Redis already has,
// and takes the sale's lock (stock.Warm).
func Warm(ctx context.Context, db *store.Store, st *stock.Stock, sl *ent.Sale) error {
	rs, err := loadable(ctx, db, sl.ID)
	if err != nil {
		return err
	}
	_, err = st.Warm(ctx, rs)
	return err
}

// Load is Warm for a caller holding the sale's lock (stock.Load). It
// reports whether it loaded the sale.
func Load(ctx context.Context, db *store.Store, st *stock.Stock, sl *ent.Sale) (bool, error) {
	rs, err := loadable(ctx, db, sl.ID)
	if err != nil {
		return false, err
	}
	return st.Load(ctx, rs)
}

// loadable reads what Redis needs of the sale in one database snapshot:
// the stock and the buyers of one instant. Read apart, a saga's commit
// between the two reads would show its unit taken in one and its buyer
// missing from the other, and Redis would hold a unit more than the
// database (a buyer told 202 who then fails).
func loadable(ctx context.Context, db *store.Store, saleID int64) (stock.Sale, error) {
	snap, err := db.SaleSnapshot(ctx, saleID)
	if err != nil {
		return stock.Sale{}, err
	}
	return RedisSale(snap.Sale, snap.LiveBuyers()), nil
}

// RedisSale is what Redis needs to admit buyers to sl: its window, price
// and stock, the buyers holding a unit, and the sale's own payment timeout,
// which goes back into its intents (zero: the relay's).
func RedisSale(sl *ent.Sale, buyers []store.Buyer) stock.Sale {
	held := make(map[string]int64, len(buyers))
	keys := map[string]string{}
	for _, b := range buyers {
		held[b.UserID] = b.OrderID
		if b.IdempotencyKey != "" {
			keys[b.UserID] = b.IdempotencyKey
		}
	}
	rs := stock.Sale{
		ID: sl.ID, PriceCents: sl.PriceCents, StartsAt: sl.StartsAt, EndsAt: sl.EndsAt,
		Remaining: sl.Stock, Total: sl.TotalStock, Buyers: held, WinningKeys: keys,
	}
	if sl.PaymentTimeoutSeconds != nil {
		rs.PaymentTimeout = time.Duration(*sl.PaymentTimeoutSeconds) * time.Second
	}
	return rs
}
