package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/workflows"
)

// notifyBodyMax bounds a notification's body: providers' events are a few
// KiB.
const notifyBodyMax = 64 << 10

type notifyInput struct {
	Provider string `path:"provider" pattern:"^[a-z0-9_-]+$" maxLength:"32" example:"builtin" doc:"The payment provider's name, as the deployment configures it: builtin or stripe."`
	RawBody  []byte `contentType:"application/json"`
	// header is every header of the request: each provider signs in its
	// own (Builtinpay-Signature, Stripe-Signature).
	header http.Header
}

// Resolve keeps the request's headers for the provider's Verify.
func (in *notifyInput) Resolve(ctx huma.Context) []error {
	in.header = http.Header{}
	ctx.EachHeader(func(name, value string) { in.header.Add(name, value) })
	return nil
}

type notifyOutput struct {
	Body wire.PaymentNotified
}

func (s *Server) registerPayments() {
	huma.Register(s.api, huma.Operation{
		OperationID: "payment-notify", Method: http.MethodPost, Path: "/v1/payments/{provider}/notify",
		Summary: "Take a payment provider's notification",
		Description: "The webhook a payment provider calls when a payment changes (captured, declined, cancelled, refunded): " +
			"configure `<public URL>/v1/payments/stripe/notify` at Stripe. No bearer token: the provider's signature over the body is the " +
			"authentication, checked before anything else (a missing or wrong one is 401, one signed too long ago 400, and either changes nothing). " +
			"A verified notification is handed to the order's workflow, which acts on it once whatever the order and the repeats; " +
			"one for an order whose workflow has ended is settled by a workflow of its own (a capture the order did not keep is refunded). " +
			"Answers 200 at once; a notification of a kind seckill does not act on is acknowledged with 200 too.",
		Tags: []string{"payments"}, Security: public, MaxBodyBytes: notifyBodyMax,
		// The body is the provider's, read only once its signature holds:
		// huma neither parses nor validates it.
		SkipValidateBody: true,
		Responses:        s.problems(errBadSignature, errStaleNotification, errNoProvider, errTooLarge, errInvalid, errUnavailable),
	}, s.paymentNotify)
	// The body as documented: a JSON object of the provider's. huma types
	// a raw body as binary with a contentMediaType, a keyword the 3.0
	// document it derives must not carry.
	if body := s.api.OpenAPI().Paths["/v1/payments/{provider}/notify"].Post.RequestBody; body != nil {
		body.Description = "The provider's notification, as it sent it (JSON for Stripe and the built-in provider)."
		body.Content = map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true}}}
	}
}

// paymentNotify verifies a provider's notification first (nothing is read
// from it before its signature holds), then hands it to the order's
// workflow as a payment signal, or, once that workflow has closed, to a
// PaymentSettleWorkflow of the payment. The workflows do the work, so the
// provider gets its 200 fast.
func (s *Server) paymentNotify(ctx context.Context, in *notifyInput) (*notifyOutput, error) {
	prov := s.deps.Payments[in.Provider]
	if prov == nil {
		return nil, problem(http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("no payment provider %q is configured", in.Provider))
	}
	ev, err := prov.Verify(in.header, in.RawBody, time.Now())
	switch {
	case errors.Is(err, payment.ErrBadSignature):
		slog.WarnContext(ctx, "payment notification refused: bad signature", "provider", in.Provider, "ip", ipFrom(ctx))
		return nil, problem(http.StatusUnauthorized, wire.CodeUnauthorized, "the notification's signature does not verify")
	case errors.Is(err, payment.ErrStale):
		slog.WarnContext(ctx, "payment notification refused: stale", "provider", in.Provider, "ip", ipFrom(ctx), "err", err)
		return nil, problem(http.StatusBadRequest, wire.CodeBadRequest, "the notification was signed too long ago")
	case errors.Is(err, payment.ErrIgnored):
		return &notifyOutput{wire.PaymentNotified{Received: true}}, nil
	case errors.Is(err, payment.ErrNotReadable):
		// Signed by the provider, and not to be lost: a 5xx, so that it is
		// sent again once the operator has fixed what this says.
		slog.ErrorContext(ctx, "payment notification not readable as configured: fix the configuration, the provider sends it again",
			"provider", in.Provider, "err", err)
		return nil, problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the notification is signed, but this deployment cannot read it as configured; send it again later")
	case err != nil:
		slog.WarnContext(ctx, "payment notification refused: unreadable", "provider", in.Provider, "err", err)
		return nil, problem(http.StatusBadRequest, wire.CodeBadRequest, "the notification could not be read")
	}
	orderID := ev.Payment.OrderID
	if orderID <= 0 {
		// Verified, but of a payment no order started (made at the
		// provider by hand): nothing of seckill's to act on.
		slog.WarnContext(ctx, "payment notification of a payment without an order", "provider", in.Provider, "payment_id", ev.Payment.ID, "event_id", ev.ID)
		return &notifyOutput{wire.PaymentNotified{Received: true}}, nil
	}
	// What the buyer's client needs to pay (the built-in provider's events
	// carry the hosted page's URL) is no workflow's business, and stays
	// out of the order's history.
	pe := workflows.PaymentEvent{EventID: ev.ID, Provider: prov.Name(), Payment: ev.Payment.WithoutClientAction(), At: ev.At, Refund: ev.Refund}
	err = s.deps.Temporal.SignalWorkflow(ctx, domain.WorkflowID(orderID), "", workflows.SignalPayment, pe)
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		// Signalled, the provider told of a failure: it sends the event
		// again, which the workflow (or, once it closed, the payment's
		// PaymentSettleWorkflow) takes once.
		if err = fault.Hit(fault.PaymentSignal); err != nil {
			err = unavailable(err)
		}
	case errors.As(err, &nf):
		err = s.settleLate(ctx, pe)
	default:
		err = unavailable(fmt.Errorf("signal order %d of payment %s: %w", orderID, ev.Payment.ID, err))
	}
	if err != nil {
		return nil, toHTTP(ctx, err) // 503: the provider sends it again
	}
	return &notifyOutput{wire.PaymentNotified{Received: true}}, nil
}

// settleLate takes a payment event whose order's workflow has closed: a
// capture, or a refund the row does not record, is handed to the
// payment's PaymentSettleWorkflow, started once per payment (a repeat, or
// the refund of a capture it refunded, finds it started and is done).
func (s *Server) settleLate(ctx context.Context, pe workflows.PaymentEvent) error {
	refund := pe.Refund != nil || pe.Payment.State == payment.Refunded
	switch {
	case refund:
		row, err := s.deps.Store.Order(ctx, pe.Payment.OrderID)
		if errors.Is(err, domain.ErrNotFound) || (err == nil && row.RefundID != "") {
			return nil // recorded already, or no such order
		}
		if err != nil {
			return unavailable(err)
		}
	case pe.Payment.State != payment.Captured:
		return nil // declined or cancelled: nothing moved
	}
	// Started, and the provider told of a failure (fault.PaymentSettle):
	// the event again finds the payment's workflow started.
	started, err := workflows.StartSettle(ctx, s.deps.Temporal, pe)
	switch {
	case err != nil:
		return unavailable(err)
	case !started:
		return nil
	}
	if err := fault.Hit(fault.PaymentSettle); err != nil {
		return unavailable(err)
	}
	slog.InfoContext(ctx, "payment event after the order's workflow closed: settling it", "order_id", pe.Payment.OrderID,
		"provider", pe.Provider, "payment_id", pe.Payment.ID, "state", pe.Payment.State)
	return nil
}

// buyerAction is the payment of a pay's answer as the buyer gets it: with
// the plain hosted page's URL or client secret, opened from the seal the
// order's history carries it in (payment.Sealer). A payment started
// before the seal carries them plain, and passes as it is.
//
// A seal that does not open (the provider's secret key was rotated since
// the payment started, or this api's key is not the worker's) costs a
// read of the payment at its provider, whose answer has them (the
// built-in provider's page URL, Stripe's client secret), once per pay. If
// that read fails too, the pay answers 503 with Retry-After: the payment
// stands, and a pay again answers the same one.
func (s *Server) buyerAction(ctx context.Context, orderID int64, p *workflows.PaymentAction) (*wire.PaymentAction, error) {
	out := &wire.PaymentAction{Provider: p.Provider, ID: p.ID, RedirectURL: p.RedirectURL, ClientSecret: p.ClientSecret}
	if p.Sealed == "" {
		return out, nil
	}
	prov := s.deps.Payments[p.Provider]
	if prov == nil {
		return nil, actionUnavailable(ctx, orderID, p, fmt.Errorf("no payment provider %q is configured on this api", p.Provider))
	}
	a, err := prov.Sealer().Open(orderID, p.ID, p.Sealed)
	if err == nil {
		out.RedirectURL, out.ClientSecret = a.RedirectURL, a.ClientSecret
		return out, nil
	}
	slog.WarnContext(ctx, "payment's sealed client action does not open (provider key rotated, or not the worker's): reading the payment at the provider",
		"order_id", orderID, "provider", p.Provider, "payment_id", p.ID, "err", err)
	pay, err := prov.Get(ctx, p.ID)
	switch {
	case err != nil:
		return nil, actionUnavailable(ctx, orderID, p, err)
	case pay.OrderID != orderID:
		// Not this order's payment: never handed to its buyer.
		return nil, actionUnavailable(ctx, orderID, p, fmt.Errorf("the provider says payment %s is of order %d", p.ID, pay.OrderID))
	case payment.Of(pay).Empty():
		return nil, actionUnavailable(ctx, orderID, p, errors.New("the provider's payment has no client action"))
	}
	out.RedirectURL, out.ClientSecret = pay.RedirectURL, pay.ClientSecret
	return out, nil
}

// actionUnavailable is the pay's answer when the client action of a
// payment it started cannot be given: 503 with Retry-After, as when the
// provider cannot be reached to start it; the payment stands, so a pay
// again answers it.
func actionUnavailable(ctx context.Context, orderID int64, p *workflows.PaymentAction, err error) error {
	slog.WarnContext(ctx, "pay: the payment's client action cannot be given to the buyer", "order_id", orderID,
		"provider", p.Provider, "payment_id", p.ID, "err", err)
	return huma.ErrorWithHeaders(problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
		"the payment was started, but what completes it could not be read from the payment provider; pay again in a moment"),
		http.Header{"Retry-After": {"2"}})
}
