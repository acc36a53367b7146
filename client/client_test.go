package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
)

// fake answers as the api does, for what the client itself decides: the
// request it sends and how it reads the answer. The api's behaviour is
// tested against the real api (api, e2e, chaos).
func fake(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	writeProblem := func(w http.ResponseWriter, p wire.Problem) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(p.Status)
		_ = json.NewEncoder(w).Encode(p)
	}
	mux.HandleFunc("POST /v1/sales/{id}/orders", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer buyer" {
			writeProblem(w, wire.Problem{ErrorModel: huma.ErrorModel{Status: 401}, Code: wire.CodeUnauthorized})
			return
		}
		if r.Header.Get("Idempotency-Key") == "" {
			writeProblem(w, wire.Problem{ErrorModel: huma.ErrorModel{Status: 409, Detail: "you already hold a unit of this sale"},
				Code: wire.CodeAlreadyPurchased, OrderID: "7"})
			return
		}
		if r.Header.Get("Idempotency-Key") == "key-unsure" {
			w.Header().Set("Retry-After", "3")
			writeProblem(w, wire.Problem{ErrorModel: huma.ErrorModel{Status: 503}, Code: wire.CodeUnconfirmed, OrderID: "7"})
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(wire.Purchase{OrderID: "7", Status: domain.StatusPending})
	})
	mux.HandleFunc("POST /v1/orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(wire.Order{ID: r.PathValue("id"), Status: domain.StatusAwaitingPayment})
	})
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	})
	mux.HandleFunc("GET /v1/ws", func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(websocket.Subprotocols(r), "bearer.buyer") {
			writeProblem(w, wire.Problem{ErrorModel: huma.ErrorModel{Status: 401}, Code: wire.CodeUnauthorized})
			return
		}
		up := websocket.Upgrader{Subprotocols: []string{"seckill.v1"}}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for _, s := range []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid} {
			_ = conn.WriteJSON(domain.Event{Type: "order", OrderID: "7", Status: s})
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestPurchase(t *testing.T) {
	srv := fake(t)
	ctx := context.Background()
	c := client.New(srv.URL+"/", "buyer", nil)

	if p, err := c.Purchase(ctx, "1", "key-1"); err != nil || p.OrderID != "7" || p.Status != domain.StatusPending {
		t.Fatalf("purchase with a key: %+v %v", p, err)
	}

	_, err := c.Purchase(ctx, "1", "")
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusConflict ||
		e.Problem.Code != wire.CodeAlreadyPurchased || e.Problem.OrderID != "7" {
		t.Fatalf("purchase refused: %#v", err)
	}
	if e.RetryAfter != 0 {
		t.Fatalf("a refusal without Retry-After has RetryAfter %v", e.RetryAfter)
	}

	_, err = c.Purchase(ctx, "1", "key-unsure")
	if !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable || e.RetryAfter != 3*time.Second {
		t.Fatalf("purchase unconfirmed: %#v, want a 503 with RetryAfter 3s", err)
	}

	_, err = c.WithToken("someone").Purchase(ctx, "1", "key-1")
	if !errors.As(err, &e) || e.Problem.Code != wire.CodeUnauthorized {
		t.Fatalf("another token: %v", err)
	}
}

func TestPayNotRecordedYet(t *testing.T) {
	c := client.New(fake(t).URL, "buyer", nil)
	o, err := c.Pay(context.Background(), "7")
	if err != nil || o.Recorded || o.Order.ID != "7" || o.Order.Status != domain.StatusAwaitingPayment {
		t.Fatalf("pay answered 202: %+v %v", o, err)
	}
}

func TestErrorWithoutProblem(t *testing.T) {
	c := client.New(fake(t).URL, "buyer", nil)
	_, err := c.Order(context.Background(), "7")
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadGateway || e.Problem.Code != "" {
		t.Fatalf("a proxy's error page: %#v", err)
	}
}

func TestWatch(t *testing.T) {
	srv := fake(t)
	ctx := context.Background()
	events, err := client.New(srv.URL, "buyer", nil).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.Status
	for e, err := range events {
		if err != nil {
			break // the fake closes the socket after its events
		}
		got = append(got, e.Status)
	}
	if want := []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}

	_, err = client.New(srv.URL, "someone", nil).Watch(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized || e.Problem.Code != wire.CodeUnauthorized {
		t.Fatalf("refused handshake: %#v", err)
	}
}
