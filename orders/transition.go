package orders

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/workflows"
)

// Outcome is what a pay or cancel did: the transition the caller asked for
// took place. Recorded says the order's row shows it (the api answers
// 200); else the workflow accepted it but has not recorded it within
// PayWait (202): it will, since an accepted decision is final. A
// transition that did not take place is a *domain.StateError instead.
type Outcome struct {
	Order    Order
	Recorded bool
	// Payment, for a pay of an order that pays at a provider, is the
	// payment the buyer is to complete there; the order stays
	// AWAITING_PAYMENT until the provider reports the capture.
	Payment *workflows.PaymentAction
}

// ErrNotConfirmed means a pay or cancel reached Temporal but no worker took
// it up in time (workers restarting): it may still take effect, so unlike
// other unavailability it does not say that nothing changed. It is a
// domain.ErrUnavailable.
var ErrNotConfirmed = fmt.Errorf("%w: the order's workflow did not confirm the request in time", domain.ErrUnavailable)

// ErrRepairPending means the order's workflow has closed while its row is
// still live: an operator terminated it (the Web UI offers Terminate on
// every order), or it failed. Nothing can pay or cancel it until the
// reconciler ends it (reconcile.Reconciler.Stranded): the request changed
// nothing and a retry in a moment gets the order's final answer. It is a
// domain.ErrUnavailable.
var ErrRepairPending = fmt.Errorf("%w: the order's workflow has closed without ending the order; it is being repaired", domain.ErrUnavailable)

// ErrPaymentUnavailable means the order's payment provider could not be
// reached to start the payment: nothing was decided, and a retry may
// succeed. ErrPaymentRejected: the provider refused to start it. Both are
// domain.ErrUnavailable.
var (
	ErrPaymentUnavailable = fmt.Errorf("%w: the payment provider could not be reached to start the payment; nothing was changed", domain.ErrUnavailable)
	ErrPaymentRejected    = fmt.Errorf("%w: the payment provider refused to start the payment; nothing was changed", domain.ErrUnavailable)
)

// Pay pays one of the user's orders awaiting payment. With a payment
// provider it starts (or answers) the payment at the provider, and the
// outcome carries it: the provider's capture decides the order.
func (s *Service) Pay(ctx context.Context, user auth.User, id int64) (Outcome, error) {
	if s.cfg.PaymentProvider == "" {
		return s.transition(ctx, user, id, workflows.UpdatePay, workflows.UpdatePay, nil, domain.StatusPaid)
	}
	// A new update id per request: the workflow answers a pay while an
	// attempt is pending with that attempt, and starts the next attempt
	// after a decline, which an update id shared by every pay (whose
	// completed result Temporal answers again) would hide.
	updateID := workflows.UpdatePay + "-" + rand.Text()
	req := workflows.PayRequest{ReturnURL: returnURL(s.cfg.ReturnURL, id)}
	return s.transition(ctx, user, id, workflows.UpdatePay, updateID, []any{req}, domain.StatusPaid)
}

// returnURL is where the provider's hosted page sends the buyer back:
// base with the order's id added as order_id ("" without a base).
func returnURL(base string, id int64) string {
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set("order_id", strconv.FormatInt(id, 10))
	u.RawQuery = q.Encode()
	return u.String()
}

// Cancel cancels one of the user's orders awaiting payment; its unit goes
// back on sale.
func (s *Service) Cancel(ctx context.Context, user auth.User, id int64) (Outcome, error) {
	return s.transition(ctx, user, id, workflows.UpdateCancel, workflows.UpdateCancel,
		[]any{workflows.CancelRequest{Reason: "cancelled by buyer"}}, domain.StatusCancelled)
}

// transition asks an order's workflow to pay or cancel (a Temporal update)
// and says what happened: the order when the transition the caller asked
// for took place, a StateError with the order's real status when it did
// not.
func (s *Service) transition(ctx context.Context, user auth.User, id int64, update, updateID string, args []any, want domain.Status) (Outcome, error) {
	o, err := s.Get(ctx, user, id)
	if err == nil && o.UserID != user.ID {
		err = domain.ErrNotFound // admins read any order but pay or cancel only their own
	}
	if err != nil {
		return Outcome{}, err
	}
	switch o.Status {
	case want:
		return Outcome{Order: o, Recorded: true}, nil // a repeated request
	case domain.StatusAwaitingPayment:
	default:
		return Outcome{}, stateError(update, o.Status)
	}
	if s.deps.Tracer != nil {
		var span trace.Span
		ctx, span = s.traceTransition(ctx, id, o.WorkflowID, update)
		defer span.End()
	}
	// The update id is the transition's name (but for a pay at a
	// provider): a retried or concurrent request for the same transition
	// joins the first one's outcome.
	h, err := s.deps.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: o.WorkflowID, UpdateID: updateID, UpdateName: update, Args: args,
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	var st workflows.OrderState
	if err == nil {
		deadline := time.Now().Add(s.cfg.PayWait)
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err = h.Get(wctx, &st)
		var expired *client.WorkflowUpdateServiceTimeoutOrCanceledError
		waited := wctx.Err() != nil || !time.Now().Before(deadline) || errors.As(err, &expired)
		cancel()
		// Accepted, but not recorded within PayWait: the decision is final,
		// so this is a 202, whatever error the SDK wraps the deadline in. A
		// gRPC DeadlineExceeded status is not context.DeadlineExceeded, and
		// the server, which gets the deadline with the call, may cancel the
		// stream (RST_STREAM CANCEL) a moment before this process's timer
		// marks wctx done: the update's own wait timing out or being
		// cancelled while the request lives is the same answer.
		if err != nil && ctx.Err() == nil && waited {
			return s.answer(ctx, id, want, false)
		}
	}
	if err != nil {
		return s.refused(ctx, id, update, want, err)
	}
	if st.Status == domain.StatusAwaitingPayment && st.Payment != nil {
		// A payment started (or pending) at the provider: the buyer
		// completes it there, and its capture decides the order.
		return Outcome{Order: o, Payment: st.Payment}, nil
	}
	if st.Status != want {
		return Outcome{}, stateError(update, st.Status)
	}
	if want == domain.StatusPaid && st.PaidAt != nil {
		// The update answers when the row was paid, and MarkPaid changed
		// nothing else on it: the order read above, paid then, is what a
		// read of the row would show now, without reading it.
		at := st.PaidAt.UTC()
		o.Status, o.Reason, o.PaidAt, o.UpdatedAt = domain.StatusPaid, "", &at, at
		return Outcome{Order: o, Recorded: true}, nil
	}
	return s.answer(ctx, id, want, true)
}

// traceTransition opens the span of a pay or cancel. It runs in the
// request's own trace (Temporal's interceptor carries it into the update
// handler) and links to the order's trace, whose context the relay kept in
// the workflow's memo: one DescribeWorkflowExecution, made only when
// tracing is on. An order started without tracing gets no link.
func (s *Service) traceTransition(ctx context.Context, id int64, workflowID, update string) (context.Context, trace.Span) {
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
	return s.deps.Tracer.Start(ctx, "order."+update, opts...)
}

// refused turns an update that did not run into the outcome: the order's
// real status, read from the refusal or, once the workflow has ended, from
// its row.
func (s *Service) refused(ctx context.Context, id int64, update string, want domain.Status, err error) (Outcome, error) {
	var (
		app      *temporal.ApplicationError
		nf       *serviceerror.NotFound
		timedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	)
	switch {
	case errors.As(err, &app) && app.Type() == workflows.ErrTypePaymentUnavailable:
		slog.WarnContext(ctx, "payment provider unavailable for a pay", "order_id", id, "err", err)
		return Outcome{}, ErrPaymentUnavailable
	case errors.As(err, &app) && app.Type() == activities.ErrTypePaymentRejected:
		slog.ErrorContext(ctx, "payment provider refused a pay", "order_id", id, "err", err)
		return Outcome{}, ErrPaymentRejected
	case errors.As(err, &app) && app.Type() == workflows.ErrTypeInvalidState:
		var status domain.Status
		if derr := app.Details(&status); derr != nil {
			return Outcome{}, fmt.Errorf("decode refusal of %s: %w", update, derr)
		}
		if status == want {
			// Decided by an earlier request of the same kind.
			return s.answer(ctx, id, want, true)
		}
		if status == domain.StatusAwaitingPayment {
			// The payment window has closed and the ending is being
			// written: the workflow does not name an ending the database
			// does not hold yet (a Reset could still undo it), so the row
			// tells, once it has it.
			return Outcome{}, s.ending(ctx, id, update)
		}
		return Outcome{}, stateError(update, status)
	case errors.As(err, &nf):
		// The workflow has closed; its row says how the order ended,
		// unless the workflow closed without ending it (Terminate): that
		// order waits for the reconciler, and this request did nothing.
		out, err := s.answer(ctx, id, want, true)
		if err == nil && !out.Recorded {
			slog.WarnContext(ctx, "order's workflow closed while the order is live; the reconciler will end it", "order_id", id, "update", update)
			return Outcome{}, ErrRepairPending
		}
		return out, err
	case errors.As(err, &timedOut):
		slog.WarnContext(ctx, "order update not confirmed in time", "order_id", id, "update", update, "err", err)
		return Outcome{}, ErrNotConfirmed
	}
	return Outcome{}, unavailable(err)
}

// ending waits up to PayWait for the row of an order whose workflow is
// ending it to say how it ended, and refuses the transition with that
// status, or with AWAITING_PAYMENT ("being ended") if the row has not
// changed by then.
func (s *Service) ending(ctx context.Context, id int64, update string) error {
	deadline := time.Now().Add(s.cfg.PayWait)
	for {
		row, err := s.deps.Store.Order(ctx, id)
		if err != nil {
			return unavailable(err)
		}
		status := domain.Status(row.Status)
		if status != domain.StatusAwaitingPayment || !time.Now().Before(deadline) {
			return stateError(update, status)
		}
		select {
		case <-ctx.Done():
			return unavailable(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answer reads the order's row once the transition is decided: recorded
// as asked if the row shows want, not recorded if it is decided but the
// row still awaits payment, else a StateError with the row's status.
func (s *Service) answer(ctx context.Context, id int64, want domain.Status, recorded bool) (Outcome, error) {
	row, err := s.deps.Store.Order(ctx, id)
	if err != nil {
		return Outcome{}, unavailable(err)
	}
	switch status := domain.Status(row.Status); {
	case status == want:
		return Outcome{Order: view(row), Recorded: recorded}, nil
	case status == domain.StatusAwaitingPayment:
		return Outcome{Order: view(row), Recorded: false}, nil
	default:
		return Outcome{}, stateError("change", status)
	}
}

// stateError says why a transition was refused, with the order's status.
func stateError(what string, status domain.Status) error {
	detail := fmt.Sprintf("cannot %s: the order is %s", what, status)
	switch status {
	case domain.StatusPending:
		detail = fmt.Sprintf("cannot %s yet: the order is still being placed; retry in a moment", what)
	case domain.StatusAwaitingPayment:
		// The workflow refused while the row still awaits payment: its
		// payment window has closed and the ending is being written.
		detail = fmt.Sprintf("cannot %s: the order's payment window has closed and it is being ended; read it in a moment", what)
	}
	return &domain.StateError{Status: status, Detail: detail}
}
