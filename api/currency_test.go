package api_test

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
)

// Money has a currency (docs/design.md §1.1): a sale names one or takes
// the deployment's default, and its orders carry it, in their body and in
// the export.
func TestSalesAndOrdersCarryTheirCurrency(t *testing.T) {
	s := start(t, options{cfg: api.Config{DefaultCurrency: "JPY"}})
	admin := s.token("ops", auth.RoleAdmin)
	now := time.Now().UTC()
	create := func(currency string) wire.Sale {
		t.Helper()
		body := map[string]any{"name": "kettle", "price_cents": 500, "stock": 3,
			"starts_at": now.Add(-time.Second).Format(time.RFC3339), "ends_at": now.Add(time.Hour).Format(time.RFC3339)}
		if currency != "" {
			body["currency"] = currency
		}
		r := s.do("POST", "/v1/sales", admin, body)
		if r.status != http.StatusCreated {
			t.Fatalf("create a sale in %q: %d %s", currency, r.status, r.body)
		}
		var sl wire.Sale
		r.decode(t, &sl)
		return sl
	}
	eur, dflt := create("EUR"), create("")
	if eur.Currency != "EUR" || dflt.Currency != "JPY" {
		t.Fatalf("sales in %q and %q; want EUR as asked and JPY, the deployment's default", eur.Currency, dflt.Currency)
	}
	var got wire.Sale
	s.do("GET", "/v1/sales/"+eur.ID, "", nil).decode(t, &got)
	if got.Currency != "EUR" {
		t.Fatalf("GET the sale: currency %q, want EUR", got.Currency)
	}

	var placed wire.Purchase
	s.buy(eur.ID, "yen").decode(t, &placed)
	if o, r := s.getOrder(placed.OrderID, "yen"); r.status != http.StatusOK || o.Currency != "EUR" || o.AmountCents != 500 {
		t.Fatalf("the order as placed: %+v (%d); want 500 EUR", o, r.status)
	}
	s.waitStatus(placed.OrderID, "yen", domain.StatusAwaitingPayment)
	if o, _ := s.getOrder(placed.OrderID, "yen"); o.Currency != "EUR" {
		t.Fatalf("the order awaiting payment: currency %q, want EUR", o.Currency)
	}

	r := s.do("GET", "/v1/sales/"+eur.ID+"/orders/export?format=csv", admin, nil)
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("export: %d %q %v; want a header and one order", r.status, r.body, err)
	}
	// A column added after the first ones, which keep their places.
	col := slices.Index(rows[0], "currency")
	if col <= slices.Index(rows[0], "workflow_url") || rows[1][col] != "EUR" {
		t.Fatalf("export columns %q, row %q; want currency after the original columns, EUR", rows[0], rows[1])
	}
}
