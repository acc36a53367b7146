package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
)

func TestBadInputChangesNothing(t *testing.T) {
	s := start(t, options{})
	admin := s.token("ops", auth.RoleAdmin)
	now := time.Now().UTC()
	valid := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"name": "tv", "price_cents": 100, "stock": 10,
			"starts_at": now.Format(time.RFC3339), "ends_at": now.Add(time.Hour).Format(time.RFC3339)}
		edit(m)
		return m
	}
	cases := map[string]struct {
		body any
		want int
	}{
		"malformed json":   {`{"name": "tv",`, http.StatusBadRequest},
		"not an object":    {`[1,2,3]`, http.StatusUnprocessableEntity},
		"wrong type":       {valid(func(m map[string]any) { m["stock"] = "ten" }), http.StatusUnprocessableEntity},
		"negative stock":   {valid(func(m map[string]any) { m["stock"] = -5 }), http.StatusUnprocessableEntity},
		"zero stock":       {valid(func(m map[string]any) { m["stock"] = 0 }), http.StatusUnprocessableEntity},
		"negative price":   {valid(func(m map[string]any) { m["price_cents"] = -1 }), http.StatusUnprocessableEntity},
		"empty name":       {valid(func(m map[string]any) { m["name"] = "" }), http.StatusUnprocessableEntity},
		"end before start": {valid(func(m map[string]any) { m["ends_at"] = now.Add(-time.Hour).Format(time.RFC3339) }), http.StatusUnprocessableEntity},
		"bad time":         {valid(func(m map[string]any) { m["starts_at"] = "tomorrow" }), http.StatusUnprocessableEntity},
		"missing field":    {valid(func(m map[string]any) { delete(m, "stock") }), http.StatusUnprocessableEntity},
		"unknown currency": {valid(func(m map[string]any) { m["currency"] = "ABC" }), http.StatusUnprocessableEntity},
		"currency shape":   {valid(func(m map[string]any) { m["currency"] = "eur" }), http.StatusUnprocessableEntity},
		"1 MiB body":       {`{"name":"` + strings.Repeat("a", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for name, tc := range cases {
		r := s.do("POST", "/v1/sales", admin, tc.body)
		if r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, truncate(r.body), tc.want)
			continue
		}
		if p := r.problem(t); p.Code == "" || p.Status != tc.want {
			t.Errorf("%s: problem %+v", name, p)
		}
	}
	for name, path := range map[string]string{
		"non-numeric sale":    "/v1/sales/abc/orders",
		"negative sale":       "/v1/sales/-1/orders",
		"huge sale id":        "/v1/sales/99999999999999999999999/orders",
		"zero sale":           "/v1/sales/0/orders",
		"sale id past 2^63":   "/v1/sales/9999999999999999999/orders",
		"order id not digits": "/v1/orders/1e3/pay",
	} {
		if r := s.do("POST", path, s.token("u", auth.RoleBuyer), nil); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", name, r.status, r.body)
		}
	}
	if r := s.do("POST", "/v1/sales/424242/orders", s.token("u", auth.RoleBuyer), nil); r.status != http.StatusNotFound {
		t.Errorf("unknown sale: %d %s, want 404", r.status, r.body)
	}
	if n, _ := s.store.Client().Sale.Query().Count(context.Background()); n != 0 {
		t.Fatalf("bad input wrote %d sales", n)
	}
	if n, _ := s.store.Client().Order.Query().Count(context.Background()); n != 0 {
		t.Fatalf("bad input wrote %d orders", n)
	}
	// Errors say nothing of the internals.
	for _, b := range [][]byte{s.do("GET", "/v1/orders/1", s.token("u", auth.RoleBuyer), nil).body} {
		if strings.Contains(strings.ToLower(string(b)), "sql") || strings.Contains(string(b), "goroutine") {
			t.Fatalf("error body leaks internals: %s", b)
		}
	}
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// An error is reported once, where it is: a body that does not parse, or a
// time that is not RFC 3339, is not also said to end before it starts; a
// body not sent as JSON is a 415 problem, as documented.
func TestBadBodyIsOneError(t *testing.T) {
	s := start(t, options{})
	admin := s.token("ops", auth.RoleAdmin)
	now := time.Now().UTC()
	for name, body := range map[string]any{
		"malformed json": `{"name": "tv",`,
		"bad time": map[string]any{"name": "tv", "price_cents": 100, "stock": 10,
			"starts_at": "tomorrow", "ends_at": now.Add(time.Hour).Format(time.RFC3339)},
		"missing end": map[string]any{"name": "tv", "price_cents": 100, "stock": 10, "starts_at": now.Format(time.RFC3339)},
		// The pattern refuses it; ISO 4217's list is not asked as well.
		"currency shape": map[string]any{"name": "tv", "price_cents": 100, "stock": 10, "currency": "EURO",
			"starts_at": now.Format(time.RFC3339), "ends_at": now.Add(time.Hour).Format(time.RFC3339)},
	} {
		p := s.do("POST", "/v1/sales", admin, body).problem(t)
		for _, e := range p.Errors {
			if e.Message == "must be after starts_at" {
				t.Errorf("%s: a phantom error beside the real one: %+v", name, p.Errors)
			}
		}
		if len(p.Errors) != 1 {
			t.Errorf("%s: %d errors, want the one: %+v", name, len(p.Errors), p.Errors)
		}
	}
	valid := `{"name":"tv","price_cents":100,"stock":10,"starts_at":"` + now.Format(time.RFC3339) + `","ends_at":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		r := s.do("POST", "/v1/sales", admin, valid, "Content-Type", ct)
		if p := r.problem(t); r.status != http.StatusUnsupportedMediaType || p.Code != wire.CodeBadRequest {
			t.Errorf("Content-Type %s: %d %s, want 415 %s", ct, r.status, r.body, wire.CodeBadRequest)
		}
	}
	if n, _ := s.store.Client().Sale.Query().Count(context.Background()); n != 0 {
		t.Fatalf("bad bodies wrote %d sales", n)
	}
}
