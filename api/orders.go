package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-redis/redis_rate/v10"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/relay"
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
		Description: "Answers 200 with the order once the payment is recorded, or 202 if the order's workflow accepted the payment but has not recorded it within a few seconds (it will: an accepted payment is final). A payment the order's state does not allow (it expired, was cancelled, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, func(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
		return s.transition(ctx, userFrom(ctx), in.ID, workflows.UpdatePay, nil, domain.StatusPaid)
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "cancel-order", Method: http.MethodPost, Path: "/v1/orders/{id}/cancel",
		Summary:     "Cancel an order awaiting payment",
		Description: "The unit goes back on sale. Answers 200 once cancelled, or 202 if the order's workflow accepted the cancel but has not recorded it within a few seconds (it will). A cancel the order's state does not allow (it was paid, expired, or is still being placed) answers 409 INVALID_STATE with the order's status in `order_status`.",
		Tags:        []string{"orders"}, Security: bearer, MaxBodyBytes: 1 << 10,
		Errors: []int{401, 404, 409, 422, 503},
	}, func(ctx context.Context, in *orderIDPath) (*orderOutput, error) {
		return s.transition(ctx, userFrom(ctx), in.ID, workflows.UpdateCancel, []any{workflows.CancelRequest{Reason: "cancelled by buyer"}}, domain.StatusCancelled)
	})
}

// purchase runs the admission path: sold-out flag, rate limits, reserve.
func (s *Server) purchase(ctx context.Context, user auth.User, saleID int64, idemKey string) (int64, error) {
	if s.soldOut.isSet(saleID) {
		// The flag spares a sold-out sale the rate limiters, not the
		// buyer's own answer: one read-only script still tells a winner
		// their order, a retry of the winning request its 202, and anyone
		// that the sale ended.
		id, open, err := s.deps.Stock.Lookup(ctx, saleID, user.ID, idemKey)
		switch {
		case err == nil && !open:
			return id, nil
		case err == nil, errors.Is(err, domain.ErrUnknownSale):
			s.soldOut.clear(saleID) // a unit came back, or Redis lost the sale
		case errors.Is(err, domain.ErrSoldOut):
			return 0, err
		default:
			return 0, admissionError(err)
		}
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
	minted, err := s.mint()
	if err != nil {
		return 0, err
	}
	id, err := s.reserve(ctx, saleID, user.ID, minted, idemKey)
	if errors.Is(err, domain.ErrUnknownSale) {
		// Redis does not know the sale: never warmed, or Redis lost it.
		// Load it from the database, which knows.
		sl, serr := s.deps.Store.Sale(ctx, saleID)
		if serr != nil {
			return 0, notFoundOr(serr)
		}
		if !time.Now().Before(sl.EndsAt) {
			// Ended, and retired from Redis (or never loaded): the
			// database answers, and the sale stays out of Redis.
			return 0, domain.ErrEnded
		}
		if werr := s.warmSale(ctx, sl); werr != nil {
			return 0, unavailable(werr)
		}
		id, err = s.reserve(ctx, saleID, user.ID, minted, idemKey)
	}
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, domain.ErrSoldOut):
		s.soldOut.set(saleID)
		return 0, err
	}
	return 0, admissionError(err)
}

// reserve is Stock.Reserve, in a span of its own when tracing is on: the
// intent then carries the span's trace context, so the relay starts the
// order's workflow in the purchase's trace. Tracing off, it adds nothing.
func (s *Server) reserve(ctx context.Context, saleID int64, userID string, orderID int64, idemKey string) (int64, error) {
	if s.tracer == nil {
		return s.deps.Stock.Reserve(ctx, saleID, userID, orderID, idemKey)
	}
	rctx, span := s.tracer.Start(ctx, "stock.Reserve", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sale.id", strconv.FormatInt(saleID, 10)),
			attribute.String("user.id", userID)))
	defer span.End()
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(rctx, carrier)
	id, err := s.deps.Stock.ReserveTraced(rctx, saleID, userID, orderID, idemKey, carrier["traceparent"])
	switch {
	case err == nil:
		// The order that holds the buyer's unit: the minted one, or the
		// first one on a retry of the winning request.
		attr := relay.OrderIDKey.String(strconv.FormatInt(id, 10))
		span.SetAttributes(attr)
		trace.SpanFromContext(ctx).SetAttributes(attr) // the purchase request's span
	case admissionError(err) == err:
		span.SetAttributes(attribute.String("admission.outcome", err.Error())) // a business answer
	default:
		span.SetStatus(codes.Error, err.Error())
	}
	return id, err
}

// admissionError passes the business answers of Reserve and Lookup through
// and turns anything else into 503.
func admissionError(err error) error {
	var already *domain.AlreadyPurchasedError
	switch {
	case errors.As(err, &already), errors.Is(err, domain.ErrSoldOut), errors.Is(err, domain.ErrNotStarted),
		errors.Is(err, domain.ErrEnded), errors.Is(err, domain.ErrUnknownSale):
		return err
	}
	return unavailable(err)
}

// mint returns a fresh order id, or 503 when this instance cannot confirm
// its order-id node lease (orderid.ErrUnfenced): better no purchase than an
// id another instance may also mint.
func (s *Server) mint() (int64, error) {
	id, err := s.deps.IDs.Next()
	if err != nil {
		s.metrics.unfenced.Inc()
		return 0, unavailable(err)
	}
	return id, nil
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
// exist yet: admitted orders whose workflow has not written them. It costs
// one Redis round trip over the sales still loaded (retired sales are not)
// and two queries, however many orders the buyer has.
func (s *Server) pendingOf(ctx context.Context, userID string) ([]Order, error) {
	held, err := s.deps.Stock.HoldersOf(ctx, userID)
	if err != nil {
		return nil, unavailable(err)
	}
	if len(held) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(held))
	saleIDs := make([]int64, 0, len(held))
	for sale, id := range held {
		ids = append(ids, id)
		saleIDs = append(saleIDs, sale)
	}
	written, err := s.deps.Store.OrdersWritten(ctx, ids)
	if err != nil {
		return nil, unavailable(err)
	}
	sales, err := s.deps.Store.SalesByID(ctx, saleIDs)
	if err != nil {
		return nil, unavailable(err)
	}
	var out []Order
	for sale, id := range held {
		if written[id] {
			continue
		}
		at := orderid.Time(id)
		o := Order{
			ID: strconv.FormatInt(id, 10), SaleID: strconv.FormatInt(sale, 10), UserID: userID,
			Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id), CreatedAt: at, UpdatedAt: at,
		}
		if sl := sales[sale]; sl != nil {
			o.AmountCents = sl.PriceCents
		}
		out = append(out, o)
	}
	// Newest first, like the rows.
	slices.SortFunc(out, func(a, b Order) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// transition asks an order's workflow to pay or cancel (a Temporal update)
// and answers with what happened: 200 with the order when the transition
// the caller asked for took place, 409 INVALID_STATE with the order's real
// status when it did not, and 202 when the workflow accepted it but has not
// recorded it within PayWait (it will: an accepted decision is final).
func (s *Server) transition(ctx context.Context, user auth.User, id int64, update string, args []any, want domain.Status) (*orderOutput, error) {
	o, err := s.order(ctx, user, id)
	if err == nil && o.UserID != user.ID {
		err = domain.ErrNotFound // admins read any order but pay or cancel only their own
	}
	if err != nil {
		return nil, toHTTP(ctx, err)
	}
	switch o.Status {
	case want:
		return &orderOutput{Status: http.StatusOK, Body: o}, nil // a repeated request
	case domain.StatusAwaitingPayment:
	default:
		return nil, toHTTP(ctx, stateError(update, o.Status))
	}
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.traceTransition(ctx, id, o.WorkflowID, update)
		defer span.End()
	}
	// The update id is the transition's name: a retried or concurrent
	// request for the same transition joins the first one's outcome.
	h, err := s.deps.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: o.WorkflowID, UpdateID: update, UpdateName: update, Args: args,
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	var st workflows.OrderState
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.PayWait)
		err = h.Get(wctx, &st)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return s.answer(ctx, id, want, http.StatusAccepted)
		}
	}
	if err != nil {
		return s.refused(ctx, id, update, want, err)
	}
	if st.Status != want {
		return nil, toHTTP(ctx, stateError(update, st.Status))
	}
	return s.answer(ctx, id, want, http.StatusOK)
}

// traceTransition opens the span of a pay or cancel. It runs in the
// request's own trace (Temporal's interceptor carries it into the update
// handler) and links to the order's trace, whose context the relay kept in
// the workflow's memo: one DescribeWorkflowExecution, made only when
// tracing is on. An order started without tracing gets no link.
func (s *Server) traceTransition(ctx context.Context, id int64, workflowID, update string) (context.Context, trace.Span) {
	orderAttr := relay.OrderIDKey.String(strconv.FormatInt(id, 10))
	trace.SpanFromContext(ctx).SetAttributes(orderAttr)
	opts := []trace.SpanStartOption{trace.WithAttributes(orderAttr, attribute.String("workflow.id", workflowID))}
	if d, err := s.deps.Temporal.DescribeWorkflowExecution(ctx, workflowID, ""); err == nil {
		if p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[relay.TraceparentMemo]; p != nil {
			var tp string
			if converter.GetDefaultDataConverter().FromPayload(p, &tp) == nil {
				order := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp}))
				if order.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: order,
						Attributes: []attribute.KeyValue{attribute.String("link.kind", "order")}}))
				}
			}
		}
	}
	return s.tracer.Start(ctx, "order."+update, opts...)
}

// refused turns an update that did not run into the answer: the order's
// real status, read from the refusal or, once the workflow has ended, from
// its row.
func (s *Server) refused(ctx context.Context, id int64, update string, want domain.Status, err error) (*orderOutput, error) {
	var (
		app      *temporal.ApplicationError
		nf       *serviceerror.NotFound
		timedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	)
	switch {
	case errors.As(err, &app) && app.Type() == workflows.ErrTypeInvalidState:
		var status domain.Status
		if derr := app.Details(&status); derr != nil {
			return nil, toHTTP(ctx, fmt.Errorf("decode refusal of %s: %w", update, derr))
		}
		if status == want {
			// Decided by an earlier request of the same kind.
			return s.answer(ctx, id, want, http.StatusOK)
		}
		return nil, toHTTP(ctx, stateError(update, status))
	case errors.As(err, &nf):
		// The workflow has ended; its row says how.
		return s.answer(ctx, id, want, http.StatusOK)
	case errors.As(err, &timedOut):
		// The request reached Temporal but no worker took it up in time
		// (workers restarting): it may still take effect, so this 503 does
		// not say that nothing changed.
		slog.WarnContext(ctx, "order update not confirmed in time", "order_id", id, "update", update, "err", err)
		return nil, problem(http.StatusServiceUnavailable, CodeUnavailable,
			"the order's workflow did not confirm the request in time; it may still take effect, so read the order before retrying")
	}
	return nil, toHTTP(ctx, unavailable(err))
}

// answer reads the order's row once the transition is decided: code if the
// row shows want, 202 if it is decided but not yet recorded, else 409 with
// the row's status.
func (s *Server) answer(ctx context.Context, id int64, want domain.Status, code int) (*orderOutput, error) {
	row, err := s.deps.Store.Order(ctx, id)
	if err != nil {
		return nil, toHTTP(ctx, unavailable(err))
	}
	switch status := domain.Status(row.Status); {
	case status == want:
		return &orderOutput{Status: code, Body: orderView(row)}, nil
	case status == domain.StatusAwaitingPayment:
		return &orderOutput{Status: http.StatusAccepted, Body: orderView(row)}, nil
	default:
		return nil, toHTTP(ctx, stateError("change", status))
	}
}

// stateError says why a transition was refused, with the order's status.
func stateError(what string, status domain.Status) error {
	detail := fmt.Sprintf("cannot %s: the order is %s", what, status)
	if status == domain.StatusPending {
		detail = fmt.Sprintf("cannot %s yet: the order is still being placed; retry in a moment", what)
	}
	return &domain.StateError{Status: status, Detail: detail}
}

func orderView(o *ent.Order) Order {
	return Order{
		ID: strconv.FormatInt(o.ID, 10), SaleID: strconv.FormatInt(o.SaleID, 10), UserID: o.UserID,
		Status: domain.Status(o.Status), Reason: o.Reason, AmountCents: o.AmountCents,
		WorkflowID: domain.WorkflowID(o.ID), CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
}
