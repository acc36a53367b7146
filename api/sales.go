package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/workflows"
)

// saleIDPath is a sale's id in a path: a string of digits, like the
// sale's `id` in bodies, so a client passes on the id it read without a
// cast (numbers as such are digits too).
type saleIDPath struct {
	ID string `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577180163178496" doc:"The sale's id, as in the id of a sale."`
}

type saleOutput struct {
	Body wire.Sale
}

type listSalesOutput struct {
	PageLink
	Body []wire.Sale
}

func (s *Server) registerSales() {
	huma.Register(s.api, huma.Operation{
		OperationID: "create-sale", Method: http.MethodPost, Path: "/v1/sales",
		Summary: "Create a sale (admin)", Tags: []string{"sales"},
		Description: "Buyers may buy from `starts_at` until `ends_at`, one unit each, until the stock is gone.",
		Security:    bearer, Metadata: map[string]any{adminOnly: true},
		DefaultStatus: http.StatusCreated, MaxBodyBytes: 16 << 10,
		Responses: s.problems(errMalformed, errNoToken, errAdminsOnly, errTooLarge, errNotJSON, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *struct{ Body wire.CreateSaleBody }) (*saleOutput, error) {
		sl, err := s.deps.Store.CreateSale(ctx, store.NewSale{
			Name: in.Body.Name, PriceCents: in.Body.PriceCents, Currency: cmp.Or(in.Body.Currency, s.cfg.DefaultCurrency), Stock: in.Body.Stock,
			StartsAt: in.Body.StartsAt, EndsAt: in.Body.EndsAt,
			PaymentTimeout: time.Duration(in.Body.PaymentTimeoutSeconds) * time.Second,
		})
		if err != nil {
			return nil, toHTTP(ctx, unavailable(err))
		}
		// A failed warm-up is repaired by the first purchase (warmSale).
		_ = s.warmSale(ctx, sl)
		return &saleOutput{Body: s.saleView(ctx, sl)}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "list-sales", Method: http.MethodGet, Path: "/v1/sales",
		Summary: "List sales, newest first", Tags: []string{"sales"},
		Description: "Paged: the next page is the `Link` header's rel=\"next\" URL.",
		Security:    public, Metadata: map[string]any{pagedList: true},
		Responses: s.problems(errBadCursor, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *struct{ PageQuery }) (*listSalesOutput, error) {
		before, err := decodeCursor(listSales, in.Cursor)
		if err != nil {
			return nil, err
		}
		sales, err := s.deps.Store.Sales(ctx, before, in.Limit+1)
		if err != nil {
			return nil, toHTTP(ctx, unavailable(err))
		}
		sales, last, more := trimPage(sales, in.Limit, func(sl *ent.Sale) int64 { return sl.ID })
		return &listSalesOutput{PageLink{nextLink(ctx, listSales, last, more)}, s.salesView(ctx, sales)}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "get-sale", Method: http.MethodGet, Path: "/v1/sales/{id}",
		Summary: "Get a sale with its live remaining stock", Tags: []string{"sales"},
		Security:  public,
		Responses: s.problems(errNoSale, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *saleIDPath) (*saleOutput, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		// From this instance's short-lived copies (readCache): a refresh
		// storm at the opening reaches the database about once a second
		// and Redis about ten times a second.
		sl, err := s.sales.get(ctx, id)
		if err != nil {
			return nil, toHTTP(ctx, notFoundOr(err))
		}
		sh, err := s.shelves.get(ctx, id)
		if err != nil {
			sh = stock.Shelf{} // Redis unreachable: the row answers
		}
		return &saleOutput{Body: s.shelfView(sl, sh, time.Now())}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "sale-stats", Method: http.MethodGet, Path: "/v1/sales/{id}/stats",
		Summary: "Sale statistics (admin)", Tags: []string{"sales"},
		Description: "Orders by status, the stock in the database and in Redis, and the orders admitted but not started yet.",
		Security:    bearer, Metadata: map[string]any{adminOnly: true},
		Responses: s.problems(errNoToken, errAdminsOnly, errNoSale, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *saleIDPath) (*struct{ Body wire.SaleStats }, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		st, err := s.stats(ctx, id)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &struct{ Body wire.SaleStats }{st}, nil
	})
}

func (s *Server) stats(ctx context.Context, id int64) (wire.SaleStats, error) {
	sl, err := s.deps.Store.Sale(ctx, id)
	if err != nil {
		return wire.SaleStats{}, notFoundOr(err)
	}
	counts, err := s.deps.Store.CountByStatus(ctx, id)
	if err != nil {
		return wire.SaleStats{}, unavailable(err)
	}
	rs, err := s.deps.Stock.Inspect(ctx, id)
	if err != nil {
		return wire.SaleStats{}, unavailable(err)
	}
	st := wire.SaleStats{
		SaleID: strconv.FormatInt(id, 10), Stock: sl.TotalStock, DBStock: sl.Stock,
		RedisRemaining: rs.Remaining, RedisBuyers: rs.Buyers, RelayBacklog: rs.Backlog,
		Orders: map[string]int{},
	}
	live := 0
	for status, n := range counts {
		st.Orders[string(status)] = n
		if status.Live() {
			live += n
		}
	}
	st.Pending = max(0, rs.Buyers-int64(live))
	st.OpenOrders = st.Pending + int64(counts[domain.StatusPending]+counts[domain.StatusAwaitingPayment])
	st.Cancelling = sl.CancelledAt != nil && st.OpenOrders > 0
	return st, nil
}

// saleView renders a sale with its live state (shelfView), in one Redis
// round trip.
func (s *Server) saleView(ctx context.Context, sl *ent.Sale) wire.Sale {
	return s.salesView(ctx, []*ent.Sale{sl})[0]
}

// salesView renders sales with their live state, read from Redis for all
// of them in one round trip (Stock.Shelves): a page of 200 sales costs one
// round trip, not 200. If Redis is unreachable the rows are the best
// answer left.
func (s *Server) salesView(ctx context.Context, sales []*ent.Sale) []wire.Sale {
	ids := make([]int64, len(sales))
	for i, sl := range sales {
		ids[i] = sl.ID
	}
	shelves, err := s.deps.Stock.Shelves(ctx, ids)
	if err != nil {
		shelves = nil // every sale reads as not loaded: the rows answer
	}
	out := make([]wire.Sale, len(sales))
	for i, sl := range sales {
		out[i] = s.shelfView(sl, shelves[sl.ID], time.Now())
	}
	return out
}

// shelf reads one sale's live state from Redis (for the shelves cache).
func (s *Server) shelf(ctx context.Context, id int64) (stock.Shelf, error) {
	shelves, err := s.deps.Stock.Shelves(ctx, []int64{id})
	if err != nil {
		return stock.Shelf{}, err
	}
	return shelves[id], nil
}

// forgetSale drops this instance's copies of a sale it has just changed.
func (s *Server) forgetSale(id int64) {
	s.sales.forget(id)
	s.shelves.forget(id)
}

// shelfView renders a sale's row with what Redis holds of it. Redis
// answers remaining, and the end if it is earlier than the row's: an
// operator's end or cancel reaches Redis (end.lua) before a copy of the
// row kept by another instance sees it (readCache), and a sale Redis has
// ended reads as ended at once. A sale Redis does not hold reads as its
// row says, with the database's stock as remaining.
func (s *Server) shelfView(sl *ent.Sale, sh stock.Shelf, now time.Time) wire.Sale {
	remaining := sl.Stock
	starts, ends := sl.StartsAt, sl.EndsAt
	if sh.Loaded {
		remaining = sh.Remaining
		if !sh.EndsAt.IsZero() && sh.EndsAt.Before(ends) {
			ends = sh.EndsAt
			// As the database's end (store.EndSale): a sale ended before
			// it opened starts a millisecond before its end.
			if !starts.Before(ends) {
				starts = ends.Add(-time.Millisecond)
			}
		}
	}
	state := "active"
	switch {
	case sl.CancelledAt != nil:
		state = "cancelled"
	case !now.Before(ends):
		state = "ended"
	case now.Before(starts):
		state = "upcoming"
	case remaining <= 0:
		state = "sold_out"
	}
	v := wire.Sale{
		ID: strconv.FormatInt(sl.ID, 10), Name: sl.Name, PriceCents: sl.PriceCents, Currency: sl.Currency,
		Stock: sl.TotalStock, Remaining: remaining, State: state,
		StartsAt: starts.UTC(), EndsAt: ends.UTC(),
		PaymentTimeoutSeconds: int(s.paymentTimeout(sl) / time.Second),
	}
	if sl.CancelledAt != nil {
		at := sl.CancelledAt.UTC()
		v.CancelledAt = &at
	}
	return v
}

// paymentTimeout is how long a buyer of the sale has to pay: the sale's
// own timeout, or the one the relay gives every workflow.
func (s *Server) paymentTimeout(sl *ent.Sale) time.Duration {
	if sl.PaymentTimeoutSeconds != nil {
		return time.Duration(*sl.PaymentTimeoutSeconds) * time.Second
	}
	return cmp.Or(s.cfg.Relay.PaymentTimeout, workflows.DefaultPaymentTimeout)
}

// Warm loads sale id into Redis unless Redis has it already.
func (s *Server) Warm(ctx context.Context, id int64) error {
	sl, err := s.deps.Store.Sale(ctx, id)
	if err != nil {
		return err
	}
	return s.warmSale(ctx, sl)
}

// warmSale loads a sale into Redis from the database (orders.Warm): its
// stock and the buyers holding live orders. It does nothing to a sale Redis
// already has.
func (s *Server) warmSale(ctx context.Context, sl *ent.Sale) error {
	return orders.Warm(ctx, s.deps.Store, s.deps.Stock, sl)
}

// notFoundOr keeps not-found errors and marks the rest as unavailability.
func notFoundOr(err error) error {
	if errors.Is(err, domain.ErrUnknownSale) || errors.Is(err, domain.ErrNotFound) {
		return err
	}
	return unavailable(err)
}
