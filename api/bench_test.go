package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
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
