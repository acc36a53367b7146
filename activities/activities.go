// Package activities adapts the order saga's steps to Temporal. Each
// activity is a thin, idempotent wrapper over the store (Postgres), the
// stock (Redis) or the event publisher, keyed by the order id so a retry
// never applies a step twice.
package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Error types the workflow treats as final: retrying cannot change them.
const (
	ErrTypeOutOfStock   = "OutOfStock"
	ErrTypeInvalidOrder = "InvalidOrder"
	// ErrTypeSaleCancelled: an operator cancelled the sale before the
	// order deducted its unit; the workflow ends the order CANCELLED.
	ErrTypeSaleCancelled = "SaleCancelled"
)

// Activities holds the dependencies of the saga steps.
type Activities struct {
	Store   *store.Store
	Stock   *stock.Stock
	Events  *push.Publisher
	Metrics *Metrics // optional
	// Payments are the payment providers orders pay through, by Name()
	// (payments.go).
	Payments map[string]payment.Provider
}

// DeductStock takes the order's unit from the sale's stock in Postgres.
func (a *Activities) DeductStock(ctx context.Context, ref domain.OrderRef) error {
	start := time.Now()
	err := classify(a.Store.DeductStock(ctx, ref))
	a.Metrics.observe("DeductStock", start, err)
	return err
}

// RestoreStock gives the order's unit back to the sale's stock in Postgres
// (compensates DeductStock).
func (a *Activities) RestoreStock(ctx context.Context, ref domain.OrderRef) error {
	start := time.Now()
	restored, err := a.Store.RestoreStock(ctx, ref)
	a.Metrics.observe("RestoreStock", start, err)
	if err == nil && restored {
		a.restored(ctx, ref)
	}
	return err
}

// restored counts and logs a unit given back to the sale in the database.
func (a *Activities) restored(ctx context.Context, ref domain.OrderRef) {
	a.Metrics.compensated("RestoreStock")
	activity.GetLogger(ctx).Info("stock restored", "order_id", ref.OrderID, "sale_id", ref.SaleID, "user_id", ref.UserID)
}

// CreateOrder writes the order row as AWAITING_PAYMENT.
func (a *Activities) CreateOrder(ctx context.Context, ref domain.OrderRef) error {
	start := time.Now()
	err := classify(a.Store.CreateOrder(ctx, ref))
	a.Metrics.observe("CreateOrder", start, err)
	if err == nil {
		a.Metrics.entered(domain.StatusAwaitingPayment)
	}
	return err
}

// PlaceOrder takes the order's unit in Postgres and writes its row as
// AWAITING_PAYMENT in one transaction (store.PlaceOrder), then tells the
// buyer. It is the lean saga's first step (workflows.VersionLeanSaga). The
// push is best effort, as Notify's: a buyer who misses it sees the order in
// the snapshot their socket gets on connect, so a failed publish is logged
// and counted, never a reason to fail or retry the order.
func (a *Activities) PlaceOrder(ctx context.Context, ref domain.OrderRef) error {
	start := time.Now()
	err := classify(a.Store.PlaceOrder(ctx, ref))
	a.Metrics.observe("PlaceOrder", start, err)
	if err != nil {
		return err
	}
	a.Metrics.entered(domain.StatusAwaitingPayment)
	if perr := a.Notify(ctx, NotifyInput{Ref: ref, Status: domain.StatusAwaitingPayment}); perr != nil {
		activity.GetLogger(ctx).Warn("notify buyer", "order_id", ref.OrderID, "status", domain.StatusAwaitingPayment, "err", perr)
	}
	return nil
}

// FinishInput says how an order ended without a sale.
type FinishInput struct {
	Ref    domain.OrderRef
	Status domain.Status
	Reason string
}

// FinishOrder records the order's ending status (it compensates
// CreateOrder, and writes the row of an order that never got one) and
// returns the status the row ends with: PAID if the order was paid, which
// the saga must then not compensate.
func (a *Activities) FinishOrder(ctx context.Context, in FinishInput) (domain.Status, error) {
	start := time.Now()
	final, err := a.Store.FinishOrder(ctx, in.Ref, in.Status, in.Reason)
	err = classify(err)
	a.Metrics.observe("FinishOrder", start, err)
	if err == nil {
		a.finished(in, final)
	}
	return final, err
}

// finished counts an ending the row took (final is the status it ends
// with: another one when it had ended already).
func (a *Activities) finished(in FinishInput, final domain.Status) {
	if final == in.Status {
		a.Metrics.compensated("FinishOrder")
		a.Metrics.entered(in.Status)
	}
}

// CancelOrder is FinishOrder without its result: the name order workflows
// started before the pay/cancel updates call (workflows.VersionUpdates).
// Keep it registered until no such workflow can be running.
func (a *Activities) CancelOrder(ctx context.Context, in FinishInput) error {
	_, err := a.FinishOrder(ctx, in)
	return err
}

// EndOrder is the whole ending of an order in one activity (workflows
// started at workflows.VersionOneStepEnd or later): FinishOrder and
// RestoreStock in one database transaction (store.EndOrder), then, unless
// the row says PAID, ReleaseReservation. It returns the status the row
// ends with, as FinishOrder does. A retry after the commit finds the row
// ended and the unit restored, and releases again, which is harmless.
func (a *Activities) EndOrder(ctx context.Context, in FinishInput) (domain.Status, error) {
	start := time.Now()
	final, restored, err := a.Store.EndOrder(ctx, in.Ref, in.Status, in.Reason)
	err = classify(err)
	a.Metrics.observe("EndOrder", start, err)
	if err != nil {
		return "", err
	}
	a.finished(in, final)
	if restored {
		a.restored(ctx, in.Ref)
	}
	if final == domain.StatusPaid {
		return final, nil // a paid order keeps its unit, in Redis too
	}
	if err := a.ReleaseReservation(ctx, in.Ref); err != nil {
		return "", err
	}
	return final, nil
}

// MarkPaid records the payment and returns when the order was paid (the
// row's paid_at): the pay update answers with it instead of the api
// reading the row again. Workflows recorded before it returned the time
// read none, and get the zero time.
func (a *Activities) MarkPaid(ctx context.Context, ref domain.OrderRef) (time.Time, error) {
	start := time.Now()
	at, err := a.Store.RecordPaid(ctx, ref.OrderID, "", "")
	err = classify(err)
	a.Metrics.observe("MarkPaid", start, err)
	if err == nil {
		a.Metrics.entered(domain.StatusPaid)
	}
	return at, err
}

// ReleaseReservation gives the unit back to Redis and frees the buyer, so
// the unit can be sold again.
func (a *Activities) ReleaseReservation(ctx context.Context, ref domain.OrderRef) error {
	start := time.Now()
	released, err := a.Stock.Release(ctx, ref.SaleID, ref.UserID, ref.OrderID)
	a.Metrics.observe("ReleaseReservation", start, err)
	if released {
		a.Metrics.compensated("ReleaseReservation")
	}
	return err
}

// NotifyInput is an order event to push to the buyer.
type NotifyInput struct {
	Ref    domain.OrderRef
	Status domain.Status
	Reason string
	// RefundedPayment, if set, is the id of a payment given back to the
	// buyer: the event tells of the refund, Status is the order's own.
	RefundedPayment string `json:",omitempty"`
}

// Notify pushes the order's new status to the buyer's websocket.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) error {
	start := time.Now()
	e := domain.NewEvent(in.Ref.OrderID, in.Ref.SaleID, in.Ref.UserID, in.Status, in.Reason, start)
	e.RefundedPayment = in.RefundedPayment
	err := a.Events.Publish(ctx, e)
	a.Metrics.observe("Notify", start, err)
	return err
}

// classify marks business failures as non-retryable so the workflow
// compensates at once; everything else is infrastructure and is retried.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, domain.ErrOutOfStock):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeOutOfStock, err)
	case errors.Is(err, domain.ErrSaleCancelled):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSaleCancelled, err)
	case errors.Is(err, domain.ErrInvalidOrder), errors.Is(err, domain.ErrConflict), errors.Is(err, domain.ErrNotFound),
		errors.Is(err, domain.ErrCompensated), errors.Is(err, domain.ErrAdmittedAfterEnd):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidOrder, err)
	}
	return err
}
