package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/client"
)

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// call sends a JSON request with a bearer token and decodes the answer
// into out (if not nil); it returns the status. It is the raw helper, for
// requests the typed client (package client) does not make; everything
// else goes through the client.
func call(t *testing.T, method, url, token string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// openSale creates a sale of units that is open now.
func openSale(t *testing.T, api, admin string, units int) string {
	t.Helper()
	sale, err := client.New(api, admin, nil).CreateSale(context.Background(), wire.CreateSaleBody{
		Name: "e2e", PriceCents: 500, Stock: units,
		StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatalf("create sale: %v", err)
	}
	return sale.ID
}

// buy purchases one unit and returns the order id.
func buy(t *testing.T, api, saleID, token string) string {
	t.Helper()
	p, err := client.New(api, token, nil).Purchase(context.Background(), saleID, "")
	if err != nil {
		t.Fatalf("buy: %v", err)
	}
	return p.OrderID
}

// orderStatus is the order's status, or "" if it cannot be read.
func orderStatus(t *testing.T, api, id, token string) string {
	t.Helper()
	o, err := client.New(api, token, nil).Order(context.Background(), id)
	if err != nil {
		return ""
	}
	return string(o.Status)
}
