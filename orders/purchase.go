package orders

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
)

// PurchaseRequest is one buyer asking for one unit of a sale.
type PurchaseRequest struct {
	SaleID int64
	UserID string
	// ClientIP is the caller's address, for the per-address rate limit.
	ClientIP string
	// IdempotencyKey, if set, makes a retry of the same request answer
	// with the same order as a success.
	IdempotencyKey string
}

// Admission is the order a purchase answers with.
type Admission struct {
	OrderID int64
	// AdmittedAt is this instance's clock when it admitted the order, to
	// the millisecond: the order's admitted_at. Zero when the order is an
	// earlier request's (a retry of the winning request).
	AdmittedAt time.Time
}

// Purchase runs the admission path: sold-out flag, rate limits, a fenced
// order id, the reservation in Redis (loading the sale from the database
// if Redis does not hold it). It returns the order holding the buyer's
// unit: the new one, or, for a retry of the winning request, the first.
// Refusals are domain errors (sold out, already purchased, not started,
// ended, unknown sale), *domain.RateLimitedError, or domain.ErrUnavailable;
// an unconfirmed order-id lease wraps orderid.ErrUnfenced too.
func (s *Service) Purchase(ctx context.Context, req PurchaseRequest) (Admission, error) {
	var minted Admission
	id, err := s.purchase(ctx, req, &minted)
	if id != minted.OrderID {
		return Admission{OrderID: id}, err
	}
	return minted, err
}

// purchase is Purchase, returning the order that holds the buyer's unit;
// minted is set to the order it mints, and when.
func (s *Service) purchase(ctx context.Context, req PurchaseRequest, minted *Admission) (int64, error) {
	saleID, userID, idemKey := req.SaleID, req.UserID, req.IdempotencyKey
	if s.soldOut.isSet(saleID) {
		// The flag spares a sold-out sale the rate limiters, not the
		// buyer's own answer: one read-only script still tells a winner
		// their order, a retry of the winning request its 202, and anyone
		// that the sale ended.
		id, open, err := s.deps.Stock.Lookup(ctx, saleID, userID, idemKey)
		var already *domain.AlreadyPurchasedError
		switch {
		case (err == nil && !open || errors.As(err, &already)) && s.deps.Stock.Acknowledged():
			// A retry of the winning request, or a buyer holding a unit,
			// to be answered only once a replica holds the reservation:
			// the reservation below answers again, and waits for the
			// replicas. (The flag's "sold out" needs no wait: the flag is
			// set only from a confirmed one.)
		case err == nil && !open:
			return id, nil
		case err == nil, errors.Is(err, domain.ErrUnknownSale):
			s.soldOut.clear(saleID) // a unit came back, or Redis lost the sale
		case errors.Is(err, domain.ErrSoldOut):
			return 0, err
		case neverSent(err):
			return 0, unavailable(err)
		default:
			return 0, admissionError(err)
		}
	}
	if err := s.Allow(ctx, "ip:"+req.ClientIP, s.cfg.IPRate); err != nil {
		return 0, err
	}
	// The buyer's limit is checked in the reservation's own script run
	// (Stock.Admit), so it holds across api instances at no round trip of
	// its own; a request it refuses has cost Redis that run, and counts
	// against the sale's budget like any other.
	if !s.saleLimits.allow(saleID) {
		return 0, &domain.RateLimitedError{RetryAfter: s.saleLimits.retryAfter()}
	}
	// The admission time is read before the id is minted, so the id's
	// time is never before it (it may be after: docs/design.md §3.9).
	admitted := time.Now().Truncate(time.Millisecond).UTC()
	id, err := s.mint()
	if err != nil {
		return 0, err
	}
	*minted = Admission{OrderID: id, AdmittedAt: admitted}
	p := stock.Purchase{SaleID: saleID, UserID: userID, OrderID: id, IdempotencyKey: idemKey, BuyerRate: s.cfg.UserRate,
		AdmittedAt: admitted}
	id, err = s.reserve(ctx, p)
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
		if werr := Warm(ctx, s.deps.Store, s.deps.Stock, sl); werr != nil {
			return 0, unavailable(werr)
		}
		p.BuyerRate = 0 // the first run counted this request
		id, err = s.reserve(ctx, p)
	}
	if err == nil {
		err = fault.Hit(fault.PurchaseReserve)
	}
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, stock.ErrSoldOutUnconfirmed):
		// Sold out on the primary, and no replica confirmed it: a failover
		// may yet bring units back. Nothing was taken.
		return 0, unavailable(err)
	case redisack.IsNotAcknowledged(err):
		return 0, &UnconfirmedError{OrderID: id, Held: errors.Is(err, stock.ErrHeldUnconfirmed), Err: err}
	case errors.Is(err, domain.ErrSoldOut):
		s.soldOut.set(saleID)
		return 0, err
	}
	if neverSent(err) {
		return 0, unavailable(err) // nothing changed
	}
	if err = admissionError(err); errors.Is(err, ErrUnconfirmed) {
		// The script may have run: if it did, the order has the minted id.
		return 0, &UnconfirmedError{OrderID: p.OrderID, Err: err}
	}
	return 0, err
}

// neverSent reports whether a Redis call failed before its command left:
// no connection could be made, none was free in the pool, or the fence
// held it back (redisack.ErrFenced).
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redisack.ErrFenced)
}

// reserve is Stock.Admit, in a span of its own when tracing is on: the
// intent then carries the span's trace context, so the relay starts the
// order's workflow in the purchase's trace. Tracing off, it adds nothing.
func (s *Service) reserve(ctx context.Context, p stock.Purchase) (int64, error) {
	if s.deps.Tracer == nil {
		// fault: purchase.reserve, hit in Purchase once the reservation answered.
		return s.deps.Stock.Admit(ctx, p)
	}
	rctx, span := s.deps.Tracer.Start(ctx, "stock.Reserve", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sale.id", strconv.FormatInt(p.SaleID, 10)),
			attribute.String("user.id", p.UserID)))
	defer span.End()
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(rctx, carrier)
	p.Traceparent = carrier["traceparent"]
	// fault: purchase.reserve, hit in Purchase once the reservation answered.
	id, err := s.deps.Stock.Admit(rctx, p)
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
// and marks anything else as unavailability.
func admissionError(err error) error {
	var already *domain.AlreadyPurchasedError
	var limited *domain.RateLimitedError
	switch {
	case errors.As(err, &already), errors.As(err, &limited), errors.Is(err, domain.ErrSoldOut), errors.Is(err, domain.ErrNotStarted),
		errors.Is(err, domain.ErrEnded), errors.Is(err, domain.ErrUnknownSale):
		return err
	}
	return errors.Join(ErrUnconfirmed, err)
}

// ErrUnconfirmed means Redis did not answer a purchase's script: a
// timeout or a dropped connection after the script was sent may still have
// taken the unit, so unlike other unavailability it does not say that
// nothing changed. A retry with the same Idempotency-Key answers the same
// 202 if it was taken. It is a domain.ErrUnavailable.
var ErrUnconfirmed = fmt.Errorf("%w: Redis did not confirm the purchase", domain.ErrUnavailable)

// UnconfirmedError is a purchase that may or may not hold a unit: Redis did
// not answer its script, or its replicas did not acknowledge the
// reservation in time (a failover may lose it). OrderID is the order the
// buyer has if it was taken. A retry with the same Idempotency-Key answers
// 202 with that order if the reservation stands, or admits the buyer anew
// if it was lost; it never finds that nothing happened when something did.
// It is an ErrUnconfirmed.
type UnconfirmedError struct {
	OrderID int64
	// Held: the buyer was found holding OrderID from an earlier purchase
	// (the answer would have been 409 ALREADY_PURCHASED), and no replica
	// has confirmed that reservation yet.
	Held bool
	Err  error
}

func (e *UnconfirmedError) Error() string {
	return fmt.Sprintf("purchase not confirmed (order %d): %v", e.OrderID, e.Err)
}

func (e *UnconfirmedError) Unwrap() []error { return []error{ErrUnconfirmed, e.Err} }

// mint returns a fresh order id, or unavailability wrapping
// orderid.ErrUnfenced when this instance cannot confirm its order-id node
// lease: better no purchase than an id another instance may also mint.
func (s *Service) mint() (int64, error) {
	id, err := s.deps.IDs.Next()
	if err != nil {
		return 0, unavailable(err)
	}
	return id, nil
}

// Allow spends one request of the per-second budget under key (0 or
// less: no limit), or refuses with *domain.RateLimitedError. The api's websocket
// connects are limited by it too.
func (s *Service) Allow(ctx context.Context, key string, perSecond int) error {
	if perSecond <= 0 {
		return nil
	}
	res, err := s.limiter.Allow(ctx, "seckill:rate:"+key, redis_rate.PerSecond(perSecond))
	if err != nil {
		return unavailable(fmt.Errorf("rate limiter: %w", err))
	}
	if res.Allowed == 0 {
		return &domain.RateLimitedError{RetryAfter: res.RetryAfter}
	}
	return nil
}
