// Package orders holds a buyer's use cases, independent of HTTP: Purchase
// (admission in Redis), Pay and Cancel (Temporal Workflow Updates), Get and
// List (database rows merged with the orders Redis admitted that have no
// row yet). The api adapts them to HTTP; the outcomes are domain errors
// and typed results, which the api maps to status codes in one place.
//
// It also owns loading a sale from the database into Redis (Warm, Load,
// RedisSale), shared by the api and the reconciler.
package orders

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Order is an order as its buyer sees it: its row, or, before the order's
// workflow has written one, the unit Redis admitted it to (PENDING).
type Order struct {
	ID          int64
	SaleID      int64
	UserID      string
	Status      domain.Status
	Reason      string
	AmountCents int64
	WorkflowID  string
	// AdmittedAt is when the admitting api admitted the order, on its
	// clock (see AdmittedAt).
	AdmittedAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// PaidAt is when a PAID order was paid; nil otherwise.
	PaidAt *time.Time
	// PaymentProvider and PaymentID name the payment at a provider that
	// paid the order (or the first one refunded); empty without one.
	PaymentProvider, PaymentID string
	// RefundedAt and RefundReason: a capture the order did not keep was
	// refunded (the first one, recorded on the row).
	RefundedAt   *time.Time
	RefundReason string
	// Place is a PENDING order's place in its sale's line; zero when the
	// order is not in line (docs/design.md §3.11).
	Place domain.Place
}

// Config tunes the use cases.
type Config struct {
	// IPRate, UserRate and SaleRate bound purchases per second per client
	// address, buyer (on one sale) and sale; 0 or negative: no limit.
	// IPRate and UserRate are kept in Redis and hold across api instances
	// (UserRate in the reservation's own script run, Stock.Admit);
	// SaleRate is kept in each instance's memory, so a sale's budget is
	// SaleRate per instance.
	IPRate, UserRate, SaleRate int
	// SoldOutTTL bounds how long the local sold-out flag of a sale is
	// trusted without a restock event.
	SoldOutTTL time.Duration
	// PayWait is how long Pay and Cancel wait for the workflow to record
	// the change before answering that it is accepted but not recorded.
	PayWait time.Duration
	// PaymentProvider, if set, is the provider orders pay at: Pay then
	// sends the pay update a workflows.PayRequest with ReturnURL (the
	// order's id added as order_id), and answers the payment to complete
	// there. Empty: the pay update carries nothing, as workers before
	// workflows.VersionPayments expect.
	PaymentProvider string
	ReturnURL       string
}

// Deps are the services the use cases use.
type Deps struct {
	Store    *store.Store
	Stock    *stock.Stock
	Temporal client.Client
	IDs      *orderid.Generator
	// Tracer, if set, traces the reservation of each purchase and each pay
	// or cancel. Nil: no tracing, and the purchase path does nothing more.
	Tracer trace.Tracer
}

// Service runs the use cases of one api instance.
type Service struct {
	cfg     Config
	deps    Deps
	limiter *redis_rate.Limiter
	// saleLimits keeps the per-sale limit in this instance's memory.
	saleLimits *saleLimits
	soldOut    soldOutFlags
	line       *stock.Line
}

// New builds a Service.
func New(cfg Config, deps Deps) *Service {
	s := &Service{cfg: cfg, deps: deps, limiter: redis_rate.NewLimiter(deps.Stock.Client()), saleLimits: newSaleLimits(cfg.SaleRate),
		line: deps.Stock.NewLine(stock.LineOptions{})}
	s.soldOut.ttl = cfg.SoldOutTTL
	return s
}

// Places returns the place in line of each of orders that is still in its
// sale's line (docs/design.md §3.11), by order id, in one Redis round trip;
// only OrderID and SaleID are read. The websocket hub refreshes its
// buyers' PENDING orders with it.
func (s *Service) Places(ctx context.Context, orders []domain.OrderRef) (map[int64]domain.Place, error) {
	places, err := s.line.Places(ctx, orders)
	if err != nil {
		return nil, unavailable(err)
	}
	return places, nil
}

// Get returns an order the user may see: theirs (admins see all). An order
// that is not theirs is reported as not found, not forbidden, so ids cannot
// be probed.
func (s *Service) Get(ctx context.Context, user auth.User, id int64) (Order, error) {
	o, exists, err := s.row(ctx, user, id)
	if exists || !errors.Is(err, domain.ErrNotFound) {
		return o, err
	}
	// No row yet: the order may be admitted and on its way.
	pending, err := s.pendingOf(ctx, user.ID)
	if err != nil {
		return Order{}, err
	}
	for _, o := range pending {
		if o.ID == id {
			return o, nil
		}
	}
	// The order's workflow may have written its row since it was looked
	// for (pendingOf then skips the order as written): look again, so an
	// order moving from Redis to the database is never reported missing.
	o, _, err = s.row(ctx, user, id)
	return o, err
}

// row returns the order's row as user sees it, or domain.ErrNotFound when
// there is none or it is not theirs; exists says whether the row exists.
func (s *Service) row(ctx context.Context, user auth.User, id int64) (o Order, exists bool, err error) {
	r, err := s.deps.Store.Order(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return Order{}, false, domain.ErrNotFound
	case err != nil:
		return Order{}, false, unavailable(err)
	case r.UserID != user.ID && !user.Admin():
		return Order{}, true, domain.ErrNotFound
	}
	return view(r), true, nil
}

// List lists a user's orders admitted since a time with ids below before
// (0: from the newest), newest (highest id) first: the rows, merged with
// the admitted orders that have no row yet. It returns at most limit
// orders, and whether more follow the last of them.
func (s *Service) List(ctx context.Context, userID string, since time.Time, before int64, limit int) ([]Order, bool, error) {
	from := orderid.FirstAt(since)
	// One more than asked says whether another page follows.
	rows, err := s.deps.Store.OrdersOf(ctx, userID, from, before, limit+1)
	if err != nil {
		return nil, false, unavailable(err)
	}
	pending, err := s.pendingOf(ctx, userID)
	if err != nil {
		return nil, false, err
	}
	out := make([]Order, 0, len(rows)+len(pending))
	written := make(map[int64]bool, len(rows))
	for _, r := range rows {
		out = append(out, view(r))
		written[r.ID] = true
	}
	for _, p := range pending {
		if !written[p.ID] && p.ID >= from && (before <= 0 || p.ID < before) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Order) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// pendingOf finds the units a user holds in Redis whose order row does not
// exist yet: admitted orders whose workflow has not written them. It costs
// one Redis round trip over the sales still loaded (retired sales are not)
// and two queries, however many orders the buyer has.
func (s *Service) pendingOf(ctx context.Context, userID string) ([]Order, error) {
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
	var refs []domain.OrderRef
	for sale, id := range held {
		if written[id] {
			continue
		}
		o := Order{
			ID: id, SaleID: sale, UserID: userID,
			Status: domain.StatusPending, WorkflowID: domain.WorkflowID(id),
		}
		if sl := sales[sale]; sl != nil {
			o.AmountCents = sl.PriceCents
		}
		out = append(out, o)
		refs = append(refs, domain.OrderRef{OrderID: id, SaleID: sale})
	}
	s.admissionTimes(ctx, out, refs)
	s.placeInLine(ctx, out)
	return out, nil
}

// admissionTimes sets pending orders' admission times (and their created
// and updated times, which have no row to come from), as Redis kept them
// (refs are the orders'). An order admitted before Redis kept them, or
// when Redis does not answer, shows its id's time, or now if the id fence
// put that ahead (docs/design.md §3.9): it was not admitted later than
// either.
func (s *Service) admissionTimes(ctx context.Context, pending []Order, refs []domain.OrderRef) {
	if len(pending) == 0 {
		return
	}
	kept, err := s.deps.Stock.AdmissionTimes(ctx, refs)
	if err != nil {
		slog.WarnContext(ctx, "reading admission times", "user_id", pending[0].UserID, "err", err)
	}
	now := time.Now().Truncate(time.Millisecond).UTC()
	for i := range pending {
		at, ok := kept[pending[i].ID]
		if !ok {
			if at = orderid.Time(pending[i].ID); at.After(now) {
				at = now
			}
		}
		pending[i].AdmittedAt, pending[i].CreatedAt, pending[i].UpdatedAt = at, at, at
	}
}

// placeInLine sets the place in line of pending orders, in one more round
// trip. A place is an estimate that is fine to leave out: when Redis does
// not answer now, the orders go without one rather than the answer failing.
func (s *Service) placeInLine(ctx context.Context, pending []Order) {
	if len(pending) == 0 {
		return
	}
	refs := make([]domain.OrderRef, len(pending))
	for i, o := range pending {
		refs[i] = domain.OrderRef{OrderID: o.ID, SaleID: o.SaleID}
	}
	places, err := s.line.Places(ctx, refs)
	if err != nil {
		slog.WarnContext(ctx, "reading places in line", "user_id", pending[0].UserID, "err", err)
		return
	}
	for i := range pending {
		pending[i].Place = places[pending[i].ID]
	}
}

func view(o *ent.Order) Order {
	return Order{
		ID: o.ID, SaleID: o.SaleID, UserID: o.UserID,
		Status: domain.Status(o.Status), Reason: o.Reason, AmountCents: o.AmountCents,
		WorkflowID: domain.WorkflowID(o.ID), AdmittedAt: AdmittedAt(o), CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
		PaidAt: o.PaidAt, PaymentProvider: o.PaymentProvider, PaymentID: o.PaymentID,
		RefundedAt: o.RefundedAt, RefundReason: o.RefundReason,
	}
}

// AdmittedAt is when the order's admitting api admitted it, on that api's
// clock, to the millisecond: its row's admitted_at. A row written by a
// version that did not record it (until `seckill migrate` fills it in)
// shows the id's time.
func AdmittedAt(o *ent.Order) time.Time {
	if o.AdmittedAt != nil {
		return o.AdmittedAt.UTC()
	}
	return orderid.Time(o.ID)
}

// View is an order row as its buyer or an operator sees it.
func View(o *ent.Order) Order { return view(o) }

// unavailable marks an infrastructure error, which the api answers 503.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(domain.ErrUnavailable, err)
}

// notFoundOr keeps not-found errors and marks the rest as unavailability.
func notFoundOr(err error) error {
	if errors.Is(err, domain.ErrUnknownSale) || errors.Is(err, domain.ErrNotFound) {
		return err
	}
	return unavailable(err)
}
