package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/workflows"
)

// Orders whose workflow closed before it ended them (docs/design.md §4.8).
// The Web UI offers Terminate on every order; a terminated workflow runs
// no compensation, so its order would keep its unit, its buyer and its
// AWAITING_PAYMENT row forever. The reconciler finds such orders and ends
// them the way the workflow would have: an order whose closed run had
// accepted a pay is PAID (that buyer was told so) — or, for an order that
// pays at a provider, whose pay only starts a payment, one whose run had
// been told of its capture, PAID by that payment; any other ends with the
// decision the run had taken (a buyer's cancel, the payment timeout) or,
// if none, CANCELLED with a reason that names the termination, through the
// saga's own compensations (FinishOrder, RestoreStock, ReleaseReservation,
// Notify), each idempotent by order id.

// Stranded is an order whose workflow's current run has closed while the
// order still holds what only its workflow would give back: a live row, no
// row at all, or an ended row whose unit the database has not restored.
type Stranded struct {
	Ref    domain.OrderRef
	Row    domain.Status // "" when the order has no row
	RunID  string
	Closed enumspb.WorkflowExecutionStatus
	// Provider is the payment provider the order pays at, "" for one
	// that pays without (workflows.OrderInput.Provider; a sale priced 0
	// pays without it too).
	Provider string
}

// strandedQuery lists the closed order workflows whose last recorded status
// was live: the only ones whose order can be stranded, since a workflow
// records the final status before it completes.
const strandedQuery = "WorkflowType = 'OrderWorkflow' AND ExecutionStatus != 'Running' AND " +
	"(OrderStatus = 'PENDING' OR OrderStatus = 'AWAITING_PAYMENT')"

// Holds says which order Redis holds a sale's unit for a buyer under
// (stock.Stock.Holder).
type Holds func(ctx context.Context, saleID int64, userID string) (orderID int64, held bool, _ error)

// FindStranded lists the stranded orders, of one sale (saleID > 0) or of
// all. It reads Temporal's visibility, which trails a close by moments: an
// order terminated just now is found by a later call. With holds, an order
// whose row has ended and whose unit the database has back is stranded
// still while Redis holds it: its ending stopped before the release, the
// last step (a Terminate mid-EndOrder, a reconciler stopped after its
// restore), and on a sale that has ended or was cancelled no drift repair
// releases it.
func FindStranded(ctx context.Context, tc client.Client, db *store.Store, holds Holds, saleID int64) ([]Stranded, error) {
	query := strandedQuery
	if saleID > 0 {
		query += fmt.Sprintf(" AND SaleId = '%d'", saleID)
	}
	var out []Stranded
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return out, fmt.Errorf("list closed order workflows: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			s, ok, err := stranded(ctx, tc, db, holds, ex.GetExecution().GetWorkflowId())
			if err != nil {
				return out, err
			}
			if ok {
				out = append(out, s)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// stranded looks at one order whose workflow has a closed run.
func stranded(ctx context.Context, tc client.Client, db *store.Store, holds Holds, workflowID string) (Stranded, bool, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(workflowID, "order-"), 10, 64)
	if err != nil {
		return Stranded{}, false, nil // not an order's workflow
	}
	var s Stranded
	row, err := db.Order(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
	case err != nil:
		return s, false, err
	default:
		s.Row = domain.Status(row.Status)
		if s.Row == domain.StatusPaid || s.Row == domain.StatusRefunded {
			// Paid, or refunded by an operator without a restock: the
			// unit is the order's for good.
			return s, false, nil
		}
		if s.Row.Final() {
			held, err := db.HoldsUnit(ctx, id)
			if err != nil {
				return s, false, err
			}
			if !held && holds != nil {
				holder, inRedis, err := holds(ctx, row.SaleID, row.UserID)
				if err != nil {
					return s, false, err
				}
				held = inRedis && holder == id
			}
			if !held {
				return s, false, nil
			}
		}
	}
	// The current run, not the one visibility listed: an operator may
	// have reset the order since, and a running run ends it itself.
	d, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return s, false, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return s, false, nil
	}
	s.RunID, s.Closed = info.GetExecution().GetRunId(), info.GetStatus()
	in, err := startInput(ctx, tc, workflowID, s.RunID)
	if err != nil {
		return s, false, err
	}
	s.Ref = in.Order
	if in.Order.AmountCents > 0 {
		s.Provider = in.Provider
	}
	return s, true, nil
}

// startInput reads the order workflow's input from its first event.
func startInput(ctx context.Context, tc client.Client, workflowID, runID string) (workflows.OrderInput, error) {
	var in workflows.OrderInput
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("history of %s: empty", workflowID)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("history of %s: %w", workflowID, err)
	}
	started := ev.GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		return in, fmt.Errorf("history of %s: first event is %s", workflowID, ev.GetEventType())
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in); err != nil {
		return in, fmt.Errorf("input of %s: %w", workflowID, err)
	}
	return in, nil
}

// Ending is how the reconciler ended a stranded order.
type Ending struct {
	Stranded
	Status domain.Status
	Reason string
	// PaymentID is the provider's payment an order ended PAID was paid
	// by ("" for one paid without a provider).
	PaymentID string
}

// decision reads what the closed run had decided, from its history: the
// first accepted pay or cancel update, a fired payment timer or a cancel
// request, as the workflow itself decides (first wins); else how the run
// closed. For an order that pays at a provider a pay decides nothing (it
// starts a payment): the capture of the order's payment, for its amount,
// signalled to the run does, and paymentID names it.
func decision(ctx context.Context, tc client.Client, s Stranded) (status domain.Status, reason, paymentID string, _ error) {
	workflowID := domain.WorkflowID(s.Ref.OrderID)
	it := tc.GetWorkflowHistory(ctx, workflowID, s.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var closeReason string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", "", "", fmt.Errorf("history of %s: %w", workflowID, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			if status, reason, ok := s.updateDecision(ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()); ok {
				return status, reason, "", nil
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if id, ok := s.capture(ev.GetWorkflowExecutionSignaledEventAttributes()); ok {
				return domain.StatusPaid, "", id, nil
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED:
			// A run started by a Reset gets the updates the run before it
			// had accepted again, as admitted ones: that run had decided
			// by them, and its buyer may have been told so, even if this
			// run was closed before it accepted them itself.
			a := ev.GetWorkflowExecutionUpdateAdmittedEventAttributes()
			if a.GetOrigin() != enumspb.UPDATE_ADMITTED_EVENT_ORIGIN_REAPPLY {
				continue
			}
			if status, reason, ok := s.updateDecision(a.GetRequest().GetInput()); ok {
				return status, reason, "", nil
			}
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			return domain.StatusExpired, "payment timeout", "", nil
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			return domain.StatusCancelled, "order workflow cancelled", "", nil
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			closeReason = ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			closeReason = ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
		}
	}
	switch s.Closed {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		reason := "order workflow terminated"
		if closeReason != "" {
			reason += ": " + closeReason
		}
		return domain.StatusCancelled, reason, "", nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return domain.StatusCancelled, "order workflow cancelled", "", nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return domain.StatusFailed, "order workflow timed out", "", nil
	}
	reason = "order workflow closed (" + strings.ToLower(s.Closed.String()) + ") before it ended the order"
	if closeReason != "" {
		reason += ": " + closeReason
	}
	return domain.StatusFailed, reason, "", nil
}

// updateDecision is what a pay or cancel update decides: PAID (unless the
// order pays at a provider, where a pay starts a payment), or CANCELLED
// with the reason the cancel carried.
func (s Stranded) updateDecision(in *updatepb.Input) (domain.Status, string, bool) {
	switch in.GetName() {
	case workflows.UpdatePay:
		if s.Provider != "" {
			return "", "", false
		}
		return domain.StatusPaid, "", true
	case workflows.UpdateCancel:
		var req workflows.CancelRequest
		if converter.GetDefaultDataConverter().FromPayloads(in.GetArgs(), &req) != nil || req.Reason == "" {
			return domain.StatusCancelled, "cancelled by buyer", true
		}
		return domain.StatusCancelled, req.Reason, true
	}
	return "", "", false
}

// capture reports whether a signal told the run, of an order that pays at
// a provider, that the order's payment was captured for its amount, as the
// run would have decided PAID by it, and names the payment.
func (s Stranded) capture(sig *historypb.WorkflowExecutionSignaledEventAttributes) (string, bool) {
	if s.Provider == "" || sig.GetSignalName() != workflows.SignalPayment {
		return "", false
	}
	var ev workflows.PaymentEvent
	if converter.GetDefaultDataConverter().FromPayloads(sig.GetInput(), &ev) != nil {
		return "", false
	}
	p := ev.Payment
	ok := (ev.Provider == "" || ev.Provider == s.Provider) && p.OrderID == s.Ref.OrderID && p.State == payment.Captured &&
		ev.Refund == nil && p.Captured.Minor == s.Ref.AmountCents && p.Captured.Currency == p.Amount.Currency
	return p.ID, ok
}

// Stranded ends every stranded order (of every sale): see FindStranded.
// It needs Temporal; a Reconciler without it does nothing here. One order
// that cannot be ended now does not stop the others: their errors are
// joined.
func (rc *Reconciler) Stranded(ctx context.Context) ([]Ending, error) {
	if rc.Temporal == nil {
		return nil, nil
	}
	found, err := FindStranded(ctx, rc.Temporal, rc.Store, rc.Stock.Holder, 0)
	var ends []Ending
	for _, s := range found {
		e, eerr := rc.endStranded(ctx, s)
		if eerr != nil {
			err = errors.Join(err, fmt.Errorf("end stranded order %d: %w", s.Ref.OrderID, eerr))
			continue
		}
		ends = append(ends, e)
		rc.logger().Warn("reconciler ended an order whose workflow had closed without ending it",
			"order_id", s.Ref.OrderID, "sale_id", s.Ref.SaleID, "user_id", s.Ref.UserID,
			"workflow_status", s.Closed.String(), "status", e.Status, "reason", e.Reason)
		if rc.OnStranded != nil {
			rc.OnStranded(e)
		}
	}
	return ends, err
}

// endStranded ends one order as its workflow would have: the row first
// (MarkPaid or FinishOrder), then the unit back in the database, then in
// Redis, then the buyer told. Every step is idempotent by order id, so a
// pass that stops between two steps is finished by the next: the order is
// found again as long as its ledger holds the unit.
func (rc *Reconciler) endStranded(ctx context.Context, s Stranded) (Ending, error) {
	e := Ending{Stranded: s}
	status, reason, paymentID, err := decision(ctx, rc.Temporal, s)
	if err != nil {
		return e, err
	}
	if s.Row.Final() {
		status, reason, paymentID = s.Row, "", "" // ended before a stop between two steps
	}
	if status == domain.StatusPaid {
		provider := s.Provider
		if paymentID == "" {
			provider = ""
		}
		if err := rc.Store.MarkPaidWith(ctx, s.Ref.OrderID, provider, paymentID); err != nil {
			return e, err
		}
		e.PaymentID = paymentID
	} else {
		final, err := rc.Store.FinishOrder(ctx, s.Ref, status, reason)
		if err != nil {
			return e, err
		}
		status = final
	}
	e.Status, e.Reason = status, reason
	if err := fault.Hit(fault.StrandedFinish); err != nil {
		return e, err
	}
	if status != domain.StatusPaid {
		if _, err := rc.Store.RestoreStock(ctx, s.Ref); err != nil {
			return e, err
		}
		if err := fault.Hit(fault.StrandedRestore); err != nil {
			return e, err
		}
		// Redis last, as the saga does: until then Redis holds fewer units
		// than the database, the side that cannot oversell.
		if _, err := rc.Stock.Release(ctx, s.Ref.SaleID, s.Ref.UserID, s.Ref.OrderID); err != nil {
			return e, err
		}
		if err := fault.Hit(fault.StrandedRelease); err != nil {
			return e, err
		}
	}
	if rc.Events != nil {
		// Best effort, as the saga's Notify: the socket's snapshot on
		// connect carries the row.
		_ = rc.Events.Publish(ctx, domain.NewEvent(s.Ref.OrderID, s.Ref.SaleID, s.Ref.UserID, status, reason, time.Now()))
	}
	return e, nil
}
