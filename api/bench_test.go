package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// admissionServer serves a warm sale of units: admission never waits for
// Temporal, so it is not needed here.
func admissionServer(b *testing.B, units int, cfg api.Config) (*httptest.Server, string, *auth.Signer) {
	b.Helper()
	srv, db, signer := admissionOnly(b, cfg)
	sale, err := db.CreateSale(b.Context(), store.NewSale{Name: "bench", PriceCents: 1, Stock: units,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Warm(b.Context(), sale.ID); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	return hs, fmt.Sprint(sale.ID), signer
}

func benchmarkPurchase(b *testing.B, units int, cfg api.Config) {
	hs, sale, signer := admissionServer(b, units, cfg)
	tokens := make([]string, b.N)
	for i := range tokens {
		tokens[i], _ = signer.Mint(fmt.Sprint("buyer-", i), auth.RoleBuyer, time.Hour)
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", hs.URL+"/v1/sales/"+sale+"/orders", nil)
			req.Header.Set("Authorization", "Bearer "+tokens[next.Add(1)-1])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusConflict {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkPurchaseAccepted: every request wins a unit (202).
func BenchmarkPurchaseAccepted(b *testing.B) {
	benchmarkPurchase(b, 1<<30, api.Config{UserRate: -1, SaleRate: -1})
}

// BenchmarkPurchaseAcceptedDefaultLimits: the same with the per-buyer and
// per-sale limits at their defaults, as `seckill serve` runs: what the
// limits cost a purchase.
func BenchmarkPurchaseAcceptedDefaultLimits(b *testing.B) { benchmarkPurchase(b, 1<<30, api.Config{}) }

// BenchmarkPurchaseSoldOut: the sale is sold out (409 from the local flag
// after the first answer), the bulk of a flash sale's traffic.
func BenchmarkPurchaseSoldOut(b *testing.B) {
	benchmarkPurchase(b, 1, api.Config{UserRate: -1, SaleRate: -1})
}

// BenchmarkExportSaleOrders streams a sale's orders as CSV over HTTP and
// reports the peak of the live heap while it does (sampled every
// millisecond, less the heap before): the export holds one page of rows,
// so the peak must not grow with the sale. Run with -benchtime=3x; the
// figures are in docs/performance.md.
func BenchmarkExportSaleOrders(b *testing.B) {
	for _, rows := range []int{2_000, 20_000, 100_000} {
		b.Run(fmt.Sprint("rows=", rows), func(b *testing.B) {
			srv, st, signer := admissionOnly(b, api.Config{})
			sl, err := st.CreateSale(b.Context(), store.NewSale{Name: "export", PriceCents: 1, Stock: 1,
				StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			b.Cleanup(hs.Close)
			saleID, sale := sl.ID, fmt.Sprint(sl.ID)
			ids := mint(b, rows)
			orders := make([]testenv.OrderRow, rows)
			for i, id := range ids {
				orders[i] = testenv.OrderRow{ID: id, SaleID: saleID, UserID: fmt.Sprint("buyer-", i), Status: domain.StatusPaid}
			}
			testenv.WriteOrders(b, st, orders)
			admin, _ := signer.Mint("ops", auth.RoleAdmin, time.Hour)
			var peak uint64
			b.ResetTimer()
			for range b.N {
				runtime.GC()
				base := liveHeap()
				stop := make(chan struct{})
				sampled := make(chan uint64)
				go func() {
					top := base
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							sampled <- top - base
							return
						case <-tick.C:
							top = max(top, liveHeap())
						}
					}
				}()
				req, _ := http.NewRequest("GET", hs.URL+"/v1/sales/"+sale+"/orders/export?format=csv", nil)
				req.Header.Set("Authorization", "Bearer "+admin)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				close(stop)
				peak = max(peak, <-sampled)
				if err != nil || resp.StatusCode != http.StatusOK || n < int64(rows)*50 {
					b.Fatalf("export: %d, %d bytes, %v", resp.StatusCode, n, err)
				}
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// liveHeap is the bytes of live and not yet swept heap objects.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
