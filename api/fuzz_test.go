package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/api/wire/wiretest"
	"github.com/seckill/seckill/auth"
)

// FuzzCreateSale sends arbitrary bodies to POST /v1/sales of the whole api
// (database included): every answer is a 201 with a sane sale, or a 4xx
// problem+json; never a 5xx. Its seeds run with the tests; CI fuzzes the
// decoding itself in api/wire, whose build is a fraction of this one.
func FuzzCreateSale(f *testing.F) {
	wiretest.AddCreateSaleSeeds(f) // shared with the other create-sale fuzz target
	srv, _, signer := admissionOnly(f, api.Config{})
	hs := httptest.NewServer(srv.Handler())
	f.Cleanup(hs.Close)
	admin, _ := signer.Mint("ops", auth.RoleAdmin, time.Hour)

	f.Fuzz(func(t *testing.T, body []byte) {
		req, _ := http.NewRequest("POST", hs.URL+"/v1/sales", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated:
			var sale wire.Sale
			if err := json.NewDecoder(resp.Body).Decode(&sale); err != nil {
				t.Fatal(err)
			}
			if sale.Stock < 1 || sale.PriceCents < 0 || !sale.EndsAt.After(sale.StartsAt) || sale.Name == "" {
				t.Fatalf("accepted an invalid sale %+v from %q", sale, body)
			}
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			var p wire.Problem
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Code == "" {
				t.Fatalf("4xx without a problem body: %v %+v", err, p)
			}
		default:
			t.Fatalf("status %d for body %q", resp.StatusCode, body)
		}
	})
}
