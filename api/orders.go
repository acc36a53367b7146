package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
)

type purchaseInput struct {
	ID             int64  `path:"id" minimum:"1" doc:"Sale id."`
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"128" doc:"Retrying with the same key returns the same order as a success."`
}

type purchaseOutput struct {
	Body wire.Purchase
}

type orderIDPath struct {
	ID int64 `path:"id" minimum:"1" doc:"Order id."`
}

type orderOutput struct {
	Status int
	Body   wire.Order
}

type listOrdersInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"200" default:"50"`
}

type listOrdersOutput struct {
	Body []wire.Order
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
	}, s.purchase)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-order", Method: http.MethodGet, Path: "/v1/orders/{id}",
		Summary: "Get one of your orders", Tags: []string{"orders"}, Security: bearer,
		Errors: []int{401, 404, 422, 503},
	}, s.getOrder)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-orders", Method: http.MethodGet, Path: "/v1/orders",
		Summary: "List your orders, newest first", Tags: []string{"orders"}, Security: bearer,
		Errors: []int{401, 422, 503},
	}, s.listOrders)

	huma.Register(s.api, huma.Operation{
		OperationID: "pay-order", Method: http.MethodPost, Path: "/v1/orders/{id}/pay",
		Summary:     "Pay an order awaiting payment",
		Description: "Answers 200 with the order once the payment is recorded, or 202 if the order's workflow accepted the payment but has not recorded it within a few seconds (it will: an accepted payment is final). A payment the order's state does not allow (it expired, was cancelled, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, s.payOrder)

	huma.Register(s.api, huma.Operation{
		OperationID: "cancel-order", Method: http.MethodPost, Path: "/v1/orders/{id}/cancel",
		Summary:     "Cancel an order awaiting payment",
		Description: "The unit goes back on sale. Answers 200 once cancelled, or 202 if the order's workflow accepted the cancel but has not recorded it within a few seconds (it will). A cancel the order's state does not allow (it was paid, expired, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, s.cancelOwnOrder)
}

// purchase admits the buyer (orders.Purchase) and counts the answer.
func (s *Server) purchase(ctx context.Context, in *purchaseInput) (*purchaseOutput, error) {
	start := time.Now()
	user := userFrom(ctx).ID
	id, err := s.orders.Purchase(ctx, orders.PurchaseRequest{
		SaleID: in.ID, UserID: user, ClientIP: ipFrom(ctx), IdempotencyKey: in.IdempotencyKey,
	})
	if errors.Is(err, orderid.ErrUnfenced) {
		s.metrics.unfenced.Inc()
	}
	s.metrics.observePurchase(err, time.Since(start))
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	// The buyer's sockets here get the order's place in line from the next
	// refresh on (no Redis command: docs/design.md §6.3).
	s.hub.Waiting(domain.NewEvent(id, in.ID, user, domain.StatusPending, "", orderid.Time(id)))
	return &purchaseOutput{wire.Purchase{
		OrderID: strconv.FormatInt(id, 10), Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id),
	}}, nil
}

func (s *Server) getOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	o, err := s.orders.Get(ctx, userFrom(ctx), in.ID)
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	return &orderOutput{Status: http.StatusOK, Body: orderView(o)}, nil
}

func (s *Server) listOrders(ctx context.Context, in *listOrdersInput) (*listOrdersOutput, error) {
	list, err := s.orders.List(ctx, userFrom(ctx).ID, time.Now().Add(-365*24*time.Hour), in.Limit)
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	out := make([]wire.Order, len(list))
	for i, o := range list {
		out[i] = orderView(o)
	}
	return &listOrdersOutput{out}, nil
}

func (s *Server) payOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	o, err := s.orders.Pay(ctx, userFrom(ctx), in.ID)
	return outcome(ctx, o, err)
}

func (s *Server) cancelOwnOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	o, err := s.orders.Cancel(ctx, userFrom(ctx), in.ID)
	return outcome(ctx, o, err)
}

// outcome answers a pay or cancel: 200 with the order when the transition
// took place and is recorded, 202 when the workflow accepted it but has
// not recorded it yet, else the refusal (409 INVALID_STATE with the order's
// status, or 404, or 503).
func outcome(ctx context.Context, o orders.Outcome, err error) (*orderOutput, error) {
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	code := http.StatusOK
	if !o.Recorded {
		code = http.StatusAccepted
	}
	return &orderOutput{Status: code, Body: orderView(o.Order)}, nil
}

func orderView(o orders.Order) wire.Order {
	w := wire.Order{
		ID: strconv.FormatInt(o.ID, 10), SaleID: strconv.FormatInt(o.SaleID, 10), UserID: o.UserID,
		Status: o.Status, Reason: o.Reason, AmountCents: o.AmountCents,
		WorkflowID: o.WorkflowID, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}
	if o.Status == domain.StatusPending && o.Place.Position > 0 {
		w.QueuePosition = &o.Place.Position
		if o.Place.ETASeconds > 0 {
			w.ETASeconds = &o.Place.ETASeconds
		}
	}
	return w
}
