package wire_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/api/wire/wiretest"
)

// FuzzDecodeCreateSale feeds arbitrary bodies through huma's decoding and
// validation of the create-sale body, as the api registers it: whatever
// gets through is a valid sale; everything else is a 4xx problem, never a
// 5xx or a panic.
func FuzzDecodeCreateSale(f *testing.F) {
	wiretest.AddCreateSaleSeeds(f) // shared with the other create-sale fuzz target
	mux := http.NewServeMux()
	api := humago.New(mux, huma.DefaultConfig("fuzz", "1"))
	huma.Register(api, huma.Operation{
		OperationID: "create-sale", Method: http.MethodPost, Path: "/v1/sales",
		DefaultStatus: http.StatusCreated, MaxBodyBytes: 16 << 10,
	}, func(ctx context.Context, in *struct{ Body wire.CreateSaleBody }) (*struct{ Body wire.CreateSaleBody }, error) {
		return &struct{ Body wire.CreateSaleBody }{in.Body}, nil
	})
	srv := httptest.NewServer(mux)
	f.Cleanup(srv.Close)

	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := http.Post(srv.URL+"/v1/sales", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated:
			var b wire.CreateSaleBody
			if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
				t.Fatal(err)
			}
			n := utf8.RuneCountInString(b.Name)
			if n < 1 || n > 200 || b.PriceCents < 0 || b.Stock < 1 || b.Stock > 10_000_000 ||
				!b.EndsAt.After(b.StartsAt) || b.EndsAt.Sub(b.StartsAt) > 366*24*time.Hour {
				t.Fatalf("accepted an invalid sale %+v from %q", b, body)
			}
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Fatalf("4xx with content type %q", ct)
			}
		default:
			t.Fatalf("status %d for %q", resp.StatusCode, body)
		}
	})
}
