package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/workflows"
)

// RefundRequest is an operator's refund of a paid order.
type RefundRequest struct {
	Reason  string
	Restock bool
}

// Refund refunds a PAID order at an operator's request (docs/design.md
// §4.11): its payment is given back, whole, at its provider, the order
// becomes REFUNDED, or REFUNDED_RESTOCKED when the operator asked for a
// restock and the sale is still open. The work is the order's
// OrderRefundWorkflow (refund-<id>): a repeated or concurrent request joins
// the running one, and one after it completed finds the order refunded and
// answers it as it is, so an order is refunded, and restocked, once.
//
// The outcome is Recorded once the row shows the refund (the api's 200),
// else the refund is under way (202: it finishes, retried until the
// provider takes it). An order that is not PAID, or refunded already, is a
// *domain.StateError with its status; an unknown order domain.ErrNotFound.
func (s *Service) Refund(ctx context.Context, admin auth.User, id int64, req RefundRequest) (Outcome, error) {
	row, err := s.deps.Store.Order(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return Outcome{}, err
	case err != nil:
		return Outcome{}, unavailable(err)
	}
	switch status := domain.Status(row.Status); {
	case status.Refunded():
		return Outcome{Order: view(row), Recorded: true}, nil // a repeated request
	case status != domain.StatusPaid:
		return Outcome{}, refundRefused(status, "")
	}
	ref := domain.OrderRef{OrderID: row.ID, SaleID: row.SaleID, UserID: row.UserID, AmountCents: row.AmountCents}
	h, err := s.deps.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.RefundWorkflowID(id),
		TaskQueue: workflows.TaskQueue,
		// A refund that completed is never run again; one that failed (the
		// provider refused it) may be asked again.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		// The order's sale and buyer, so the Web UI lists the refund with
		// the order; OrderStatus becomes the refund's status at its end.
		TypedSearchAttributes: workflows.SearchAttributes(ref, domain.StatusPaid),
	}, workflows.OrderRefundWorkflowName, workflows.RefundRequest{OrderID: id, Reason: req.Reason, Restock: req.Restock, By: admin.ID})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		// Its refund completed: the row shows it (read below).
		return s.refundAnswer(ctx, id, true)
	case err != nil:
		return Outcome{}, unavailable(fmt.Errorf("start the refund of order %d: %w", id, err))
	}
	slog.InfoContext(ctx, "refund of a paid order asked", "order_id", id, "sale_id", row.SaleID, "user_id", row.UserID,
		"by", admin.ID, "restock", req.Restock)
	// As long as a pay waits for its recording (PayWait), then 202.
	deadline := time.Now().Add(s.cfg.PayWait)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var out workflows.RefundOutcome
	err = h.Get(wctx, &out)
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return s.refundAnswer(ctx, id, true)
	case ctx.Err() == nil && (wctx.Err() != nil || !time.Now().Before(deadline)):
		// Under way: it finishes on its own.
		return s.refundAnswer(ctx, id, false)
	case errors.As(err, &app) && app.Type() == workflows.ErrTypeInvalidState:
		var status domain.Status
		if app.Details(&status) != nil {
			status = domain.Status(row.Status)
		}
		return Outcome{}, refundRefused(status, "")
	case errors.As(err, &app) && app.Type() == activities.ErrTypePaymentRejected:
		return Outcome{}, refundRefused(domain.StatusPaid, "cannot refund: the payment provider refused the refund ("+app.Error()+"); the order stays PAID")
	}
	return Outcome{}, unavailable(fmt.Errorf("refund of order %d: %w", id, err))
}

// refundAnswer answers a refund with the order's row: refunded, or, while
// the refund is under way, still PAID (never recorded then).
func (s *Service) refundAnswer(ctx context.Context, id int64, done bool) (Outcome, error) {
	row, err := s.deps.Store.Order(ctx, id)
	if err != nil {
		return Outcome{}, unavailable(err)
	}
	switch status := domain.Status(row.Status); {
	case status.Refunded():
		return Outcome{Order: view(row), Recorded: true}, nil
	case status == domain.StatusPaid:
		return Outcome{Order: view(row), Recorded: false}, nil
	default:
		if done {
			return Outcome{}, refundRefused(status, "")
		}
		return Outcome{Order: view(row)}, nil
	}
}

// refundRefused is a refund the order's status does not allow.
func refundRefused(status domain.Status, detail string) error {
	if detail == "" {
		detail = fmt.Sprintf("cannot refund: the order is %s; only a PAID order can be refunded", status)
	}
	return &domain.StateError{Status: status, Detail: detail}
}
