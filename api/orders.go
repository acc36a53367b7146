package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-redis/redis_rate/v10"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/workflows"
)

// Order is an order on the wire.
type Order struct {
	ID          string        `json:"id"`
	SaleID      string        `json:"sale_id"`
	UserID      string        `json:"user_id"`
	Status      domain.Status `json:"status" enum:"PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED"`
	Reason      string        `json:"reason"`
	AmountCents int64         `json:"amount_cents"`
	WorkflowID  string        `json:"workflow_id"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// Purchase is the answer to a purchase: the buyer's order, PENDING until
// its workflow has written it.
type Purchase struct {
	OrderID    string        `json:"order_id"`
	Status     domain.Status `json:"status"`
	WorkflowID string        `json:"workflow_id"`
}

type orderIDPath struct {
	ID int64 `path:"id" minimum:"1" doc:"Order id."`
}

type orderOutput struct {
	Status int
	Body   Order
}

func (s *Server) registerOrders() {
	huma.Register(s.api, huma.Operation{
		OperationID: "purchase", Method: http.MethodPost, Path: "/v1/sales/{id}/orders",
		Summary:     "Buy one unit",
		Description: "Admits the buyer in one atomic Redis step and answers at once; the order's workflow then deducts the stock and writes the order. The result also arrives on the websocket.",
		Tags:        []string{"orders"}, Security: bearer,
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: 1 << 10,
		Errors:   []int{401, 404, 409, 422, 429, 503},
		Metadata: map[string]any{shedAbove: true},
	}, func(ctx context.Context, in *struct {
		ID             int64  `path:"id" minimum:"1" doc:"Sale id."`
		IdempotencyKey string `header:"Idempotency-Key" maxLength:"128" doc:"Retrying with the same key returns the same order as a success."`
	}) (*struct{ Body Purchase }, error) {
		start := time.Now()
		id, err := s.purchase(ctx, userFrom(ctx), in.ID, in.IdempotencyKey)
		s.metrics.observePurchase(err, time.Since(start))
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &struct{ Body Purchase }{Purchase{
			OrderID: strconv.FormatInt(id, 10), Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id),
		}}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "get-order", Method: http.MethodGet, Path: "/v1/orders/{id}",
		Summary: "Get one of your orders", Tags: []string{"orders"}, Security: bearer,
		Errors: []int{401, 404, 422, 503},
	}, func(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
		o, err := s.order(ctx, userFrom(ctx), in.ID)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &orderOutput{Status: http.StatusOK, Body: o}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "list-orders", Method: http.MethodGet, Path: "/v1/orders",
		Summary: "List your orders, newest first", Tags: []string{"orders"}, Security: bearer,
		Errors: []int{401, 422, 503},
	}, func(ctx context.Context, in *struct {
		Limit int `query:"limit" minimum:"1" maximum:"200" default:"50"`
	}) (*struct{ Body []Order }, error) {
		orders, err := s.ordersOf(ctx, userFrom(ctx).ID, time.Now().Add(-365*24*time.Hour), in.Limit)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &struct{ Body []Order }{orders}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "pay-order", Method: http.MethodPost, Path: "/v1/orders/{id}/pay",
		Summary:     "Pay an order awaiting payment",
		Description: "Answers 200 with the order once the payment is recorded, or 202 if the workflow has not recorded it within a few seconds (it will).",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, func(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
		return s.transition(ctx, userFrom(ctx), in.ID, workflows.SignalPay, nil, domain.StatusPaid)
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "cancel-order", Method: http.MethodPost, Path: "/v1/orders/{id}/cancel",
		Summary:     "Cancel an order awaiting payment",
		Description: "The unit goes back on sale. Answers 200 once cancelled, or 202 if the workflow has not recorded it within a few seconds (it will).",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, func(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
		return s.transition(ctx, userFrom(ctx), in.ID, workflows.SignalCancel, workflows.CancelRequest{Reason: "cancelled by buyer"}, domain.StatusCancelled)
	})
}

// purchase runs the admission path: sold-out flag, rate limits, reserve.
func (s *Server) purchase(ctx context.Context, user auth.User, saleID int64, idemKey string) (int64, error) {
	if s.soldOut.isSet(saleID) {
		return 0, domain.ErrSoldOut
	}
	if err := s.allow(ctx, "ip:"+ipFrom(ctx), s.cfg.IPRate); err != nil {
		return 0, err
	}
	if err := s.allow(ctx, "user:"+user.ID, s.cfg.UserRate); err != nil {
		return 0, err
	}
	if err := s.allow(ctx, "sale:"+strconv.FormatInt(saleID, 10), s.cfg.SaleRate); err != nil {
		return 0, err
	}
	id, err := s.deps.Stock.Reserve(ctx, saleID, user.ID, s.deps.IDs.Next(), idemKey)
	if errors.Is(err, domain.ErrUnknownSale) {
		// Redis does not know the sale: never warmed, or Redis lost it.
		// Load it from the database, which knows.
		sl, serr := s.deps.Store.Sale(ctx, saleID)
		if serr != nil {
			return 0, notFoundOr(serr)
		}
		if werr := s.warmSale(ctx, sl); werr != nil {
			return 0, unavailable(werr)
		}
		id, err = s.deps.Stock.Reserve(ctx, saleID, user.ID, s.deps.IDs.Next(), idemKey)
	}
	var already *domain.AlreadyPurchasedError
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, domain.ErrSoldOut):
		s.soldOut.set(saleID)
		return 0, err
	case errors.As(err, &already), errors.Is(err, domain.ErrNotStarted), errors.Is(err, domain.ErrEnded), errors.Is(err, domain.ErrUnknownSale):
		return 0, err
	}
	return 0, unavailable(err)
}

func (s *Server) allow(ctx context.Context, key string, perSecond int) error {
	if perSecond <= 0 {
		return nil
	}
	res, err := s.limiter.Allow(ctx, "seckill:rate:"+key, redis_rate.PerSecond(perSecond))
	if err != nil {
		return unavailable(fmt.Errorf("rate limiter: %w", err))
	}
	if res.Allowed == 0 {
		return rateLimited(res.RetryAfter)
	}
	return nil
}

// order returns an order the user may see: theirs (admins see all). An
// order that is not theirs is reported as not found, not forbidden, so ids
// cannot be probed.
func (s *Server) order(ctx context.Context, user auth.User, id int64) (Order, error) {
	row, err := s.deps.Store.Order(ctx, id)
	switch {
	case err == nil:
		if row.UserID != user.ID && !user.Admin() {
			return Order{}, domain.ErrNotFound
		}
		return orderView(row), nil
	case !errors.Is(err, domain.ErrNotFound):
		return Order{}, unavailable(err)
	}
	// No row yet: the order may be admitted and on its way.
	pending, err := s.pendingOf(ctx, user.ID)
	if err != nil {
		return Order{}, err
	}
	for _, o := range pending {
		if o.ID == strconv.FormatInt(id, 10) {
			return o, nil
		}
	}
	return Order{}, domain.ErrNotFound
}

// ordersOf lists a user's orders since a time: the rows, plus the admitted
// orders that have no row yet.
func (s *Server) ordersOf(ctx context.Context, userID string, since time.Time, limit int) ([]Order, error) {
	rows, err := s.deps.Store.OrdersOf(ctx, userID, since, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	pending, err := s.pendingOf(ctx, userID)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(rows))
	out := make([]Order, 0, len(rows)+len(pending))
	for _, r := range rows {
		known[strconv.FormatInt(r.ID, 10)] = true
	}
	for _, p := range pending {
		if !known[p.ID] {
			out = append(out, p)
		}
	}
	for _, r := range rows {
		out = append(out, orderView(r))
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// pendingOf finds the units a user holds in Redis whose order row does not
// exist yet: admitted orders whose workflow has not written them.
func (s *Server) pendingOf(ctx context.Context, userID string) ([]Order, error) {
	sales, err := s.deps.Stock.Sales(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	var out []Order
	for _, sale := range sales {
		id, ok, err := s.deps.Stock.Holder(ctx, sale, userID)
		if err != nil {
			return nil, unavailable(err)
		}
		if !ok {
			continue
		}
		if _, err := s.deps.Store.Order(ctx, id); err == nil {
			continue // written already
		}
		at := orderid.Time(id)
		o := Order{
			ID: strconv.FormatInt(id, 10), SaleID: strconv.FormatInt(sale, 10), UserID: userID,
			Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id), CreatedAt: at, UpdatedAt: at,
		}
		if sl, err := s.deps.Store.Sale(ctx, sale); err == nil {
			o.AmountCents = sl.PriceCents
		}
		out = append(out, o)
	}
	return out, nil
}

// transition asks an order's workflow to pay or cancel, then waits briefly
// for the order row to show the result.
func (s *Server) transition(ctx context.Context, user auth.User, id int64, signal string, arg any, want domain.Status) (*orderOutput, error) {
	o, err := s.order(ctx, user, id)
	if err == nil && o.UserID != user.ID {
		err = domain.ErrNotFound // admins read any order but pay or cancel only their own
	}
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	switch {
	case o.Status == want:
		return &orderOutput{Status: http.StatusOK, Body: o}, nil // repeated request
	case o.Status == domain.StatusPending:
		return nil, toHTTP(ctx, fmt.Errorf("%w: the order is still being placed; retry in a moment", domain.ErrConflict))
	case o.Status != domain.StatusAwaitingPayment:
		return nil, toHTTP(ctx, fmt.Errorf("%w: order is %s", domain.ErrConflict, o.Status))
	}
	if err := s.deps.Temporal.SignalWorkflow(ctx, o.WorkflowID, "", signal, arg); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, toHTTP(ctx, fmt.Errorf("%w: the order's workflow has ended", domain.ErrConflict))
		}
		return nil, toHTTP(ctx, unavailable(err))
	}
	deadline := time.Now().Add(s.cfg.PayWait)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		row, err := s.deps.Store.Order(ctx, id)
		if err != nil {
			return nil, toHTTP(ctx, unavailable(err))
		}
		if domain.Status(row.Status) != domain.StatusAwaitingPayment {
			return &orderOutput{Status: http.StatusOK, Body: orderView(row)}, nil
		}
		if time.Now().After(deadline) {
			return &orderOutput{Status: http.StatusAccepted, Body: orderView(row)}, nil
		}
		select {
		case <-ctx.Done():
			return nil, toHTTP(ctx, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func orderView(o *ent.Order) Order {
	return Order{
		ID: strconv.FormatInt(o.ID, 10), SaleID: strconv.FormatInt(o.SaleID, 10), UserID: o.UserID,
		Status: domain.Status(o.Status), Reason: o.Reason, AmountCents: o.AmountCents,
		WorkflowID: domain.WorkflowID(o.ID), CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
}
