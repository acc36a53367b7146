package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
)

// The payment activities: the order's workflow runs its payment at a
// provider through them (docs/design.md §4.3, §4.10). Each call carries
// an idempotency key derived from the order, so a retry never pays or
// refunds twice.

// Error types of the payment activities.
const (
	// ErrTypePaymentRejected: the provider refused the request, or knows
	// no such payment; retrying cannot change it.
	ErrTypePaymentRejected = "PaymentRejected"
	// ErrTypePaymentKept: RefundPayment was asked to refund the capture
	// the order's row says paid the order; it refunds nothing, and no
	// retry will.
	ErrTypePaymentKept = "PaymentKept"
	// ErrTypePaymentRateLimited: the provider answered 429; the activity
	// is retried after the provider's Retry-After.
	ErrTypePaymentRateLimited = "PaymentRateLimited"
)

// StartPaymentInput asks for one payment attempt of an order.
type StartPaymentInput struct {
	Ref      domain.OrderRef
	Provider string
	// Attempt numbers the order's payment attempts from 1: a declined
	// payment's retry is a new attempt, with a new idempotency key.
	Attempt   int
	ReturnURL string
	// ExpiresAt is the payment window's end.
	ExpiresAt time.Time
}

// PaymentRefIn names one payment at its provider.
type PaymentRefIn struct {
	Provider  string
	PaymentID string
}

// RefundInput asks for the refund of a capture the order did not keep.
type RefundInput struct {
	Ref       domain.OrderRef
	Provider  string
	PaymentID string
	Reason    string
	// Class is the reason's class in seckill_payments_refunded_late_total
	// (RefundLate, ...); "" counts nothing there.
	Class string `json:",omitempty"`
}

// PaidInput records an order paid by a payment at a provider.
type PaidInput struct {
	Ref       domain.OrderRef
	Provider  string
	PaymentID string
}

// paymentKey is the idempotency key of an order's payment attempt in the
// payment window ending at expires. The window is part of it: a run made
// by a Reset numbers its attempts from 1 again, with a window of its own,
// and its attempt is a new payment; under the same key the provider would
// refuse it as a reused key, and the order could not be paid.
func paymentKey(orderID int64, attempt int, expires time.Time) string {
	if expires.IsZero() {
		return fmt.Sprintf("order-%d-%d", orderID, attempt)
	}
	return fmt.Sprintf("order-%d-%d-%d", orderID, attempt, expires.UnixMilli())
}

// refundKey is the idempotency key of a payment's refund: one refund per
// payment, whole, so a retried or repeated refund is the same one.
func refundKey(paymentID string) string { return "refund-" + paymentID }

// StartPayment creates the order's payment attempt at its provider, for
// the order's amount in its sale's currency. The same attempt answers the
// same payment (the key), so a retry after a lost answer creates nothing.
// What the buyer's client needs to pay is answered sealed, for the
// order and the payment (payment.Sealer): the answer is kept in the
// order's history, which the buyer alone may not read.
func (a *Activities) StartPayment(ctx context.Context, in StartPaymentInput) (payment.Payment, error) {
	start := time.Now()
	p, err := a.startPayment(ctx, in)
	a.Metrics.observe("StartPayment", start, err)
	return p, err
}

func (a *Activities) startPayment(ctx context.Context, in StartPaymentInput) (payment.Payment, error) {
	prov, err := a.provider(in.Provider)
	if err != nil {
		return payment.Payment{}, err
	}
	sale, err := a.Store.Sale(ctx, in.Ref.SaleID)
	if err != nil {
		return payment.Payment{}, classify(err)
	}
	if sale.Currency == "" {
		// Sales made before sales had a currency get one from `seckill
		// migrate`; a payment in a guessed currency is worse than none.
		err := fmt.Errorf("sale %d has no currency: run seckill migrate: %w", in.Ref.SaleID, payment.ErrRejected)
		return payment.Payment{}, paymentError(err)
	}
	p, err := prov.Create(ctx, payment.CreateRequest{
		OrderID: in.Ref.OrderID, SaleID: in.Ref.SaleID, UserID: in.Ref.UserID,
		Amount:    payment.Money{Minor: in.Ref.AmountCents, Currency: sale.Currency},
		Key:       paymentKey(in.Ref.OrderID, in.Attempt, in.ExpiresAt),
		ReturnURL: in.ReturnURL, ExpiresAt: in.ExpiresAt,
	})
	if err != nil {
		return payment.Payment{}, paymentError(fmt.Errorf("start payment %d of order %d: %w", in.Attempt, in.Ref.OrderID, err))
	}
	if p, err = prov.Sealer().SealPayment(in.Ref.OrderID, p); err != nil {
		return payment.Payment{}, fmt.Errorf("start payment %d of order %d: %w", in.Attempt, in.Ref.OrderID, err)
	}
	a.Metrics.paymentStarted()
	activity.GetLogger(ctx).Info("payment started", "order_id", in.Ref.OrderID, "sale_id", in.Ref.SaleID, "user_id", in.Ref.UserID,
		"provider", prov.Name(), "payment_id", p.ID, "attempt", in.Attempt)
	return p, nil
}

// CancelPayment cancels a payment not captured. A payment captured
// meanwhile is no error: the answer says captured, and the workflow
// decides what that means for the order. The answer carries no client
// action: the workflow hands none out from a cancel, and its history
// keeps none.
func (a *Activities) CancelPayment(ctx context.Context, in PaymentRefIn) (payment.Payment, error) {
	start := time.Now()
	p, err := a.cancelPayment(ctx, in)
	a.Metrics.observe("CancelPayment", start, err)
	return p, err
}

func (a *Activities) cancelPayment(ctx context.Context, in PaymentRefIn) (payment.Payment, error) {
	prov, err := a.provider(in.Provider)
	if err != nil {
		return payment.Payment{}, err
	}
	p, err := prov.Cancel(ctx, in.PaymentID)
	if err != nil {
		return payment.Payment{}, paymentError(fmt.Errorf("cancel payment %s: %w", in.PaymentID, err))
	}
	return p.WithoutClientAction(), nil
}

// RefundPayment gives back, whole, a capture the order did not keep, once
// at the provider (the key is the payment's), then records the refund on
// the order's row. A capture for an order that expired, was cancelled or
// failed, a second capture, a wrong amount: each is refunded this way.
func (a *Activities) RefundPayment(ctx context.Context, in RefundInput) (payment.Refund, error) {
	start := time.Now()
	r, err := a.refundPayment(ctx, in)
	a.Metrics.observe("RefundPayment", start, err)
	return r, err
}

func (a *Activities) refundPayment(ctx context.Context, in RefundInput) (payment.Refund, error) {
	// The capture that paid the order stays, whoever asks: a run started
	// by a Reset hears the capture again before its re-delivered pay has
	// started the payment, takes it for one it did not start, and would
	// refund the money of an order the row says PAID by it.
	row, err := a.Store.Order(ctx, in.Ref.OrderID)
	switch {
	case err == nil && domain.Status(row.Status) == domain.StatusPaid && row.PaymentID == in.PaymentID:
		activity.GetLogger(ctx).Warn("refund refused: this capture paid the order", "order_id", in.Ref.OrderID,
			"payment_id", in.PaymentID, "reason", in.Reason)
		return payment.Refund{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("payment %s paid order %d: kept, not refunded", in.PaymentID, in.Ref.OrderID), ErrTypePaymentKept, nil)
	case err != nil && !errors.Is(err, domain.ErrNotFound):
		return payment.Refund{}, classify(err)
	}
	prov, r, err := a.refundAt(ctx, in)
	if err != nil {
		return payment.Refund{}, err
	}
	recorded, err := a.Store.RecordRefund(ctx, in.Ref.OrderID, prov.Name(), in.PaymentID, r.ID, in.Reason)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		// A capture of an order the database does not know (the
		// reconciliation found it): refunded, with no row to record it on.
		a.Metrics.refunded(in.Class)
		activity.GetLogger(ctx).Warn("payment of an unknown order refunded", "order_id", in.Ref.OrderID,
			"provider", prov.Name(), "payment_id", in.PaymentID, "refund_id", r.ID, "reason", in.Reason)
		return r, nil
	case err != nil:
		// The refund stands at the provider; its retry finds it by key.
		return payment.Refund{}, classify(err)
	}
	a.Metrics.refunded(in.Class)
	if recorded {
		activity.GetLogger(ctx).Info("payment refunded", "order_id", in.Ref.OrderID, "sale_id", in.Ref.SaleID, "user_id", in.Ref.UserID,
			"provider", prov.Name(), "payment_id", in.PaymentID, "refund_id", r.ID, "reason", in.Reason)
	}
	return r, nil
}

// refundAt refunds in's payment, whole, at its provider under the
// payment's key, refund-<payment id>, the key of every refund seckill
// asks for: whichever path reaches a payment first, the provider refunds
// it once and answers the others with that refund.
func (a *Activities) refundAt(ctx context.Context, in RefundInput) (payment.Provider, payment.Refund, error) {
	prov, err := a.provider(in.Provider)
	if err != nil {
		return nil, payment.Refund{}, err
	}
	r, err := prov.Refund(ctx, in.PaymentID, refundKey(in.PaymentID), in.Reason)
	if err != nil {
		return nil, payment.Refund{}, paymentError(fmt.Errorf("refund payment %s of order %d: %w", in.PaymentID, in.Ref.OrderID, err))
	}
	return prov, r, nil
}

// MarkPaidWith records the payment, with the provider's payment that paid
// the order: MarkPaid of workflows that run their payment at a provider
// (workflows.VersionPayments). MarkPaid keeps its input for the workflows
// of earlier versions, which call it by name. Like MarkPaid, it returns
// when the order was paid.
func (a *Activities) MarkPaidWith(ctx context.Context, in PaidInput) (time.Time, error) {
	start := time.Now()
	at, err := a.Store.RecordPaid(ctx, in.Ref.OrderID, in.Provider, in.PaymentID)
	err = classify(err)
	a.Metrics.observe("MarkPaid", start, err)
	if err == nil {
		a.Metrics.entered(domain.StatusPaid)
		a.Metrics.paymentCaptured()
	}
	return at, err
}

// provider returns the configured provider named name.
func (a *Activities) provider(name string) (payment.Provider, error) {
	if p, ok := a.Payments[name]; ok && p != nil {
		return p, nil
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no payment provider %q configured", name), ErrTypePaymentRejected, nil)
}

// paymentError turns a provider's answer into the activity's error: a rate
// limit is retried after the provider's Retry-After, an unreachable
// provider on the workflow's schedule, and a refusal (or an unknown
// payment) not at all.
func paymentError(err error) error {
	var limited *payment.RateLimitedError
	switch {
	case errors.As(err, &limited):
		return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypePaymentRateLimited,
			temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: limited.RetryAfter})
	case payment.Retryable(err):
		return err
	case errors.Is(err, payment.ErrRejected), errors.Is(err, payment.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePaymentRejected, err)
	}
	return err
}

// OrderPayment is what an order's row says of its payment: what
// PaymentSettleWorkflow decides a late event by.
type OrderPayment struct {
	Ref    domain.OrderRef
	Status domain.Status
	// Provider and PaymentID name the payment the row records (the one that
	// paid it, or the first refunded); RefundID is set once a refund is
	// recorded.
	Provider, PaymentID, RefundID string
}

// ReadOrderPayment reads an order's row for PaymentSettleWorkflow. An
// unknown order is a refusal (ErrTypeInvalidOrder): no retry creates it.
func (a *Activities) ReadOrderPayment(ctx context.Context, orderID int64) (OrderPayment, error) {
	start := time.Now()
	o, err := a.Store.Order(ctx, orderID)
	err = classify(err)
	a.Metrics.observe("ReadOrderPayment", start, err)
	if err != nil {
		return OrderPayment{}, err
	}
	return OrderPayment{
		Ref:    domain.OrderRef{OrderID: o.ID, SaleID: o.SaleID, UserID: o.UserID, AmountCents: o.AmountCents},
		Status: domain.Status(o.Status), Provider: o.PaymentProvider, PaymentID: o.PaymentID, RefundID: o.RefundID,
	}, nil
}

// RecordRefundInput records a refund the provider reported (one seckill
// did not ask for, or whose own record is missing).
type RecordRefundInput struct {
	OrderID   int64
	Provider  string
	PaymentID string
	RefundID  string
	Reason    string
}

// RecordRefund records on the order's row a refund its provider reported,
// unless the row records one already (store.RecordRefund).
func (a *Activities) RecordRefund(ctx context.Context, in RecordRefundInput) error {
	start := time.Now()
	recorded, err := a.Store.RecordRefund(ctx, in.OrderID, in.Provider, in.PaymentID, in.RefundID, in.Reason)
	err = classify(err)
	a.Metrics.observe("RecordRefund", start, err)
	if err == nil && recorded {
		activity.GetLogger(ctx).Info("refund recorded from the provider's notification", "order_id", in.OrderID,
			"provider", in.Provider, "payment_id", in.PaymentID, "refund_id", in.RefundID)
	}
	return err
}
