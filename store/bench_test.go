package store_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// BenchmarkPlaceOrderOneSale places orders of one sale from 64 goroutines
// at once, as the workers of a flash sale do: every placing queues for
// the sale row's lock. "function" is PlaceOrder on Postgres (one
// statement), "transaction" the same transaction through ent. It reports
// orders/s and the statements each order sent.
//
//	go test -run '^$' -bench PlaceOrderOneSale -benchtime 4000x ./store
func BenchmarkPlaceOrderOneSale(b *testing.B) {
	for _, way := range []struct {
		name  string
		place func(*store.Store, context.Context, domain.OrderRef) error
	}{
		{"function", (*store.Store).PlaceOrder},
		{"transaction", (*store.Store).PlaceTx},
	} {
		b.Run(way.name, func(b *testing.B) {
			ctx := context.Background()
			db, statements := testenv.CountingDB(b, testenv.DatabaseURL(b))
			db.SetMaxOpenConns(store.PostgresPool)
			st := store.OpenPostgresDB(db)
			if err := st.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			sl, err := st.CreateSale(ctx, store.NewSale{
				Name: "bench", PriceCents: 100, Stock: b.N,
				StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour),
			})
			if err != nil {
				b.Fatal(err)
			}
			first := orderid.FirstAt(time.Now())
			var next atomic.Int64
			statements.Store(0)
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					ref := domain.OrderRef{OrderID: first + i, SaleID: sl.ID, UserID: "b" + strconv.FormatInt(i, 10), AmountCents: 100}
					if err := way.place(st, ctx, ref); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
			b.ReportMetric(float64(statements.Load())/float64(b.N), "statements/order")
			if got := stockOf(b, st, sl.ID); got != 0 {
				b.Fatalf("stock = %d after %d orders, want 0", got, b.N)
			}
		})
	}
}
