package stock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/stock"
)

// BenchmarkReserve is one reserve.lua round trip per operation against the
// real Redis, from parallel clients, with stock to spare (every call
// admits a new buyer and queues an intent).
func BenchmarkReserve(b *testing.B) {
	rdb, _ := testenvRedis(b)
	st := newStockOn(rdb)
	ctx := context.Background()
	if _, err := st.Warm(ctx, stock.Sale{ID: 1, Remaining: 1 << 30,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := st.Reserve(ctx, 1, fmt.Sprint("u", i), i, ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReserveSoldOut is the common case of a flash sale: the answer
// is SOLD_OUT.
func BenchmarkReserveSoldOut(b *testing.B) {
	rdb, _ := testenvRedis(b)
	st := newStockOn(rdb)
	ctx := context.Background()
	if _, err := st.Warm(ctx, stock.Sale{ID: 2, Remaining: 0,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = st.Reserve(ctx, 2, "late", 1, "")
		}
	})
}

// BenchmarkLinePlaces is one Places call for 1,000 orders waiting in one
// sale's line: what a hub's refresh tick costs with 1,000 waiting buyers
// connected.
func BenchmarkLinePlaces(b *testing.B) {
	rdb, _ := testenvRedis(b)
	st := newStockOn(rdb)
	ctx := context.Background()
	if _, err := st.Warm(ctx, stock.Sale{ID: 3, Remaining: 1 << 20,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	orders := make([]domain.OrderRef, 1000)
	for i := range orders {
		if _, err := st.Reserve(ctx, 3, fmt.Sprint("u", i), int64(i+1), ""); err != nil {
			b.Fatal(err)
		}
		orders[i] = domain.OrderRef{OrderID: int64(i + 1), SaleID: 3}
	}
	line := st.NewLine(stock.LineOptions{})
	b.ResetTimer()
	for b.Loop() {
		places, err := line.Places(ctx, orders)
		if err != nil || len(places) != len(orders) {
			b.Fatalf("%d places, %v", len(places), err)
		}
	}
}
