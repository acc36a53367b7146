package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
)

// HTTPLimit is the fastest admission over HTTP on this machine: the same
// wave against a bare handler that runs one reserve.lua per purchase and
// nothing else (no token check, no rate limits, no metrics).
type HTTPLimit struct {
	Seconds        float64        `json:"seconds"`
	RequestsPerSec float64        `json:"requests_per_second"`
	Latency        Latency        `json:"latency"`
	Outcomes       map[string]int `json:"outcomes"`
}

// BareAPI is the HTTP limit's server, listening on URL with a scratch sale
// SaleID of the units asked for.
type BareAPI struct {
	URL    string
	SaleID string
	Close  func()
}

// BareReserveAPI returns a starter of the HTTP limit's server: a bare
// net/http handler of POST /v1/sales/{id}/orders, on 127.0.0.1 in the
// bench's process, over a scratch sale in database db of the Redis at opts
// (as RedisCeiling's). The buyer is the bearer token as it comes, unverified;
// the answers have the api's shapes: a 202 wire.Purchase, or a
// problem+json with the api's code. Close deletes the scratch keys.
func BareReserveAPI(opts *redis.Options, db int) func(ctx context.Context, units, concurrency int) (*BareAPI, error) {
	return func(ctx context.Context, units, concurrency int) (*BareAPI, error) {
		st, sale, cleanup, err := scratchSale(ctx, opts, db, units, concurrency)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cleanup()
			return nil, err
		}
		var next atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/sales/{id}/orders", func(w http.ResponseWriter, r *http.Request) {
			saleID, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeProblem(w, http.StatusNotFound, wire.CodeNotFound, "no such sale", "")
				return
			}
			user := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			id, err := st.Reserve(r.Context(), saleID, user, next.Add(1), "")
			var already *domain.AlreadyPurchasedError
			switch {
			case err == nil:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_ = json.NewEncoder(w).Encode(wire.Purchase{OrderID: strconv.FormatInt(id, 10),
					Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id)})
			case errors.As(err, &already):
				writeProblem(w, http.StatusConflict, wire.CodeAlreadyPurchased, "you already hold a unit of this sale", strconv.FormatInt(already.OrderID, 10))
			case errors.Is(err, domain.ErrSoldOut):
				writeProblem(w, http.StatusConflict, wire.CodeSoldOut, "the sale is sold out", "")
			default:
				writeProblem(w, http.StatusInternalServerError, "", err.Error(), "")
			}
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		return &BareAPI{
			URL:    "http://" + ln.Addr().String(),
			SaleID: strconv.FormatInt(sale, 10),
			Close: func() {
				_ = srv.Close()
				cleanup()
			},
		}, nil
	}
}

func writeProblem(w http.ResponseWriter, status int, code, detail, orderID string) {
	p := wire.Problem{Code: code, OrderID: orderID}
	p.Status, p.Title, p.Detail = status, http.StatusText(status), detail
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// measureHTTPLimit runs the admission wave, with the same client, tokens,
// order of requests and concurrency, against the bare handler.
func measureHTTPLimit(ctx context.Context, o Options, tokens []string, requests []int) (*HTTPLimit, error) {
	api, err := o.BareAPI(ctx, o.Stock, o.Concurrency)
	if err != nil {
		return nil, err
	}
	defer api.Close()
	bare := newTarget(api.URL, o.Concurrency)
	defer bare.http.CloseIdleConnections()
	w, _, err := bare.wave(ctx, o, api.SaleID, tokens, requests, "http limit")
	if err != nil {
		return nil, err
	}
	for code, n := range w.outcomes {
		if code != "ACCEPTED" && code != wire.CodeSoldOut && code != wire.CodeAlreadyPurchased {
			return nil, fmt.Errorf("the bare handler answered %s %d times (outcomes %v)", code, n, w.outcomes)
		}
	}
	return &HTTPLimit{Seconds: w.seconds, RequestsPerSec: float64(len(requests)) / w.seconds,
		Latency: summarize(w.latencies), Outcomes: w.outcomes}, nil
}
