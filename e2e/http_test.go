package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
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
// into out (if not nil); it returns the status.
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
	var sale struct{ ID string }
	status := call(t, "POST", api+"/v1/sales", admin, map[string]any{
		"name": "e2e", "price_cents": 500, "stock": units,
		"starts_at": time.Now().Add(-time.Second), "ends_at": time.Now().Add(time.Hour),
	}, &sale)
	if status != http.StatusCreated {
		t.Fatalf("create sale: %d", status)
	}
	return sale.ID
}

// buy purchases one unit and returns the order id.
func buy(t *testing.T, api, saleID, token string) string {
	t.Helper()
	var p struct {
		OrderID string `json:"order_id"`
	}
	if status := call(t, "POST", api+"/v1/sales/"+saleID+"/orders", token, nil, &p); status != http.StatusAccepted {
		t.Fatalf("buy: %d", status)
	}
	return p.OrderID
}

func orderStatus(t *testing.T, api, id, token string) string {
	t.Helper()
	var o struct{ Status string }
	if status := call(t, "GET", api+"/v1/orders/"+id, token, nil, &o); status != http.StatusOK {
		return ""
	}
	return o.Status
}
