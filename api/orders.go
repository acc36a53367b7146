package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
)

// purchaseInput repeats saleIDPath's field: huma reads no parameter from
// an embedded struct.
type purchaseInput struct {
	ID             string `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577180163178496" doc:"The sale's id, as in the id of a sale."`
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"128" doc:"A key of the client's choosing: a retry with the same key answers the same order again (202), where a retry without it would answer ALREADY_PURCHASED."`
}

type purchaseOutput struct {
	Body wire.Purchase
}

// orderIDPath is an order's id in a path: a string of digits, like the
// `order_id` of a purchase and the `id` of an order.
type orderIDPath struct {
	ID string `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577203974242304" doc:"The order's id, as in the order_id of a purchase or the id of an order."`
}

type orderOutput struct {
	Status int
	Body   wire.Order
}

type listOrdersInput struct {
	PageQuery
}

type listOrdersOutput struct {
	PageLink
	Body []wire.Order
}

func (s *Server) registerOrders() {
	huma.Register(s.api, huma.Operation{
		OperationID: "purchase", Method: http.MethodPost, Path: "/v1/sales/{id}/orders",
		Summary:     "Buy one unit",
		Description: "Admits or refuses the buyer at once. Admitted, the answer is 202 with the order, PENDING; the order then becomes AWAITING_PAYMENT (or FAILED) in the background: read it with GET /v1/orders/{id}, or follow it on the websocket. A buyer holds at most one unit of a sale: buying again answers 409 ALREADY_PURCHASED with the order in `order_id`.",
		Tags:        []string{"orders"}, Security: bearer,
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: 1 << 10,
		Responses: s.problems(errNoToken, errNoSale, errSoldOut, errNotStarted, errEnded, errAlreadyPurchased,
			errInvalid, errRateLimited, errUnavailable, errOverloaded, errUnconfirmed),
		Metadata: map[string]any{shedAbove: true},
	}, s.purchase)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-order", Method: http.MethodGet, Path: "/v1/orders/{id}",
		Summary: "Get one of your orders", Tags: []string{"orders"}, Security: bearer,
		Description: "A PENDING order waiting for its turn carries its place in the sale's line (`queue_position`) and an estimate of the wait (`eta_seconds`).",
		Responses:   s.problems(errNoToken, errNoOrder, errInvalid, errUnavailable),
	}, s.getOrder)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-orders", Method: http.MethodGet, Path: "/v1/orders",
		Summary: "List your orders, newest first", Tags: []string{"orders"}, Security: bearer,
		Description: "The orders admitted in the last year, newest (highest id) first, orders not written yet (PENDING) among them. " +
			"Paged: the next page is the `Link` header's rel=\"next\" URL; a page walk lists every order once.",
		Responses: s.problems(errNoToken, errBadCursor, errInvalid, errUnavailable),
		Metadata:  map[string]any{pagedList: true},
	}, s.listOrders)

	huma.Register(s.api, huma.Operation{
		OperationID: "pay-order", Method: http.MethodPost, Path: "/v1/orders/{id}/pay",
		Summary: "Pay an order awaiting payment",
		Description: "Answers 200 with the order once the payment is recorded, or 202 if the order's workflow accepted the payment but has not recorded it within a few seconds (it will: an accepted payment is final). A payment the order's state does not allow (it expired, was cancelled, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.\n\n" +
			"Where the deployment takes payments at a provider, pay starts the payment there instead and answers 202 with the order, still AWAITING_PAYMENT, and `payment`: the provider's hosted page (`redirect_url`) or the client secret of its client library (`client_secret`). The order becomes PAID once the provider reports the capture (read it, or follow it on the websocket); a pay while that payment is pending answers it again, and a pay after a declined one starts another. A provider that cannot be reached answers 503 UNAVAILABLE with `Retry-After`, nothing changed.",
		Tags: []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Responses: s.withAccepted("The payment is accepted and final, but not recorded yet: the order becomes PAID in a moment. "+
			"Or, where payments are taken at a provider, the payment is started there (`payment`): the order becomes PAID once the provider reports the capture.",
			s.problems(errNoToken, errNoOrder, errPayRefused, errInvalid, errUnavailable, errNotConfirmed, errPaymentUnavailable)),
	}, s.payOrder)

	huma.Register(s.api, huma.Operation{
		OperationID: "cancel-order", Method: http.MethodPost, Path: "/v1/orders/{id}/cancel",
		Summary:     "Cancel an order awaiting payment",
		Description: "The unit goes back on sale. Answers 200 once cancelled, or 202 if the order's workflow accepted the cancel but has not recorded it within a few seconds (it will). A cancel the order's state does not allow (it was paid, expired, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Responses: s.withAccepted("The cancel is accepted, but not recorded yet: the order becomes CANCELLED in a moment.",
			s.problems(errNoToken, errNoOrder, errCancelRefused, errInvalid, errUnavailable, errNotConfirmed)),
	}, s.cancelOwnOrder)
}

// withAccepted documents the 202 of pay and cancel beside their 200: both
// carry the order.
func (s *Server) withAccepted(description string, responses map[string]*huma.Response) map[string]*huma.Response {
	order := s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[wire.Order](), true, "Order")
	responses["202"] = &huma.Response{
		Description: description,
		Content:     map[string]*huma.MediaType{"application/json": {Schema: order}},
	}
	return responses
}

// purchase admits the buyer (orders.Purchase) and counts the answer.
func (s *Server) purchase(ctx context.Context, in *purchaseInput) (*purchaseOutput, error) {
	start := time.Now()
	user := userFrom(ctx).ID
	saleID, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	adm, err := s.orders.Purchase(ctx, orders.PurchaseRequest{
		SaleID: saleID, UserID: user, ClientIP: ipFrom(ctx), IdempotencyKey: in.IdempotencyKey,
	})
	if errors.Is(err, orderid.ErrUnfenced) {
		s.metrics.unfenced.Inc()
	}
	s.metrics.observePurchase(err, time.Since(start))
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	// The buyer's sockets here get the order's place in line from the next
	// refresh on (no Redis command: docs/design.md §6.3), as of its
	// admission. A retry of the winning request does not know when that
	// was: the id's time, or now if the id fence put that ahead.
	id, at := adm.OrderID, adm.AdmittedAt
	if at.IsZero() {
		if at = orderid.Time(id); at.After(start) {
			at = start
		}
	}
	s.hub.Waiting(domain.NewEvent(id, saleID, user, domain.StatusPending, "", at))
	return &purchaseOutput{wire.Purchase{
		OrderID: strconv.FormatInt(id, 10), Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id),
	}}, nil
}

func (s *Server) getOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	o, err := s.orders.Get(ctx, userFrom(ctx), id)
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	return &orderOutput{Status: http.StatusOK, Body: s.orderView(o)}, nil
}

func (s *Server) listOrders(ctx context.Context, in *listOrdersInput) (*listOrdersOutput, error) {
	before, err := decodeCursor(listBuyerOrders, in.Cursor)
	if err != nil {
		return nil, err
	}
	list, more, err := s.orders.List(ctx, userFrom(ctx).ID, time.Now().Add(-365*24*time.Hour), before, in.Limit)
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	out := make([]wire.Order, len(list))
	for i, o := range list {
		out[i] = s.orderView(o)
	}
	var last int64
	if len(list) > 0 {
		last = list[len(list)-1].ID
	}
	return &listOrdersOutput{PageLink{nextLink(ctx, listBuyerOrders, last, more)}, out}, nil
}

func (s *Server) payOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	o, err := s.orders.Pay(ctx, userFrom(ctx), id)
	return s.outcome(ctx, o, err)
}

func (s *Server) cancelOwnOrder(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	o, err := s.orders.Cancel(ctx, userFrom(ctx), id)
	return s.outcome(ctx, o, err)
}

// outcome answers a pay or cancel: 200 with the order when the transition
// took place and is recorded, 202 when the workflow accepted it but has
// not recorded it yet, else the refusal (409 INVALID_STATE with the order's
// status, or 404, or 503).
func (s *Server) outcome(ctx context.Context, o orders.Outcome, err error) (*orderOutput, error) {
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	code := http.StatusOK
	if !o.Recorded {
		code = http.StatusAccepted
	}
	body := s.orderView(o.Order)
	if p := o.Payment; p != nil {
		if body.Payment, err = s.buyerAction(ctx, o.Order.ID, p); err != nil {
			return nil, err
		}
	}
	return &orderOutput{Status: code, Body: body}, nil
}

func (s *Server) orderView(o orders.Order) wire.Order {
	w := wire.Order{
		ID: strconv.FormatInt(o.ID, 10), SaleID: strconv.FormatInt(o.SaleID, 10), UserID: o.UserID,
		Status: o.Status, Reason: o.Reason, AmountCents: o.AmountCents, Currency: s.currencyOf(o.SaleID),
		WorkflowID: o.WorkflowID, WorkflowURL: s.workflowURL(o.WorkflowID),
		AdmittedAt: o.AdmittedAt, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}
	if o.PaidAt != nil {
		at := o.PaidAt.UTC()
		w.PaidAt = &at
	}
	w.PaymentProvider, w.PaymentID = o.PaymentProvider, o.PaymentID
	if o.RefundedAt != nil {
		at := o.RefundedAt.UTC()
		w.RefundedAt, w.RefundReason = &at, o.RefundReason
	}
	if o.Status == domain.StatusPending && o.Place.Position > 0 {
		w.QueuePosition = &o.Place.Position
		if o.Place.ETASeconds > 0 {
			w.ETASeconds = &o.Place.ETASeconds
		}
	}
	return w
}

// currencyOf is the currency of a sale's orders: the sale's, which never
// changes, so each instance reads it once per sale (through the sale
// cache) and keeps it. A sale that cannot be read now leaves the order's
// currency out, to be read again by the next view.
func (s *Server) currencyOf(saleID int64) string {
	if c, ok := s.currencies.Load(saleID); ok {
		return c.(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sl, err := s.sales.get(ctx, saleID)
	if err != nil || sl.Currency == "" {
		return ""
	}
	s.currencies.Store(saleID, sl.Currency)
	return sl.Currency
}

// workflowURL is the page of the workflow in the Temporal Web UI, or ""
// when the deployment names no Web UI.
func (s *Server) workflowURL(workflowID string) string {
	if s.cfg.TemporalUIURL == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.TemporalUIURL, "/") + "/namespaces/" + url.PathEscape(cmp.Or(s.cfg.TemporalNamespace, "default")) +
		"/workflows/" + url.PathEscape(workflowID)
}
