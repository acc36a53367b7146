package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/workflows"
)

// The reconciliation of the payment providers' records against the orders
// (docs/design.md §4.10, "Reconciliation"). A capture's notification can be
// lost for good (a webhook endpoint disabled at the provider, a provider
// that gives up), and then neither the order's workflow nor the api's
// notification endpoint ever hears of the money. Periodically the
// reconciler lists each provider's captures of the recent sales and hands
// every capture no order kept to the payment's PaymentSettleWorkflow,
// which refunds it once (the workflow's id is the payment's; the refund's
// key is too).

const (
	// DefaultPaymentInterval is how often Run reconciles the providers'
	// records: each pass lists every capture of the recent sales at the
	// provider (Stripe: a request per 100), so not every reconciler tick.
	DefaultPaymentInterval = 5 * time.Minute
	// DefaultSettleMargin is how old a capture must be before the
	// reconciliation acts on it. A capture just made is the order's
	// workflow's to decide: its notification is on its way, and the
	// workflow keeps it or refunds it within seconds; at the payment
	// deadline the workflow cancels at the provider and waits up to the
	// payment grace (workflows.DefaultPaymentGrace, 2 min) for an answer,
	// and a notification refused on the way is retried by the provider
	// with backoff. Ten minutes leaves all that the time to finish, so the
	// reconciliation takes over only the captures that path lost.
	DefaultSettleMargin = 10 * time.Minute
	// DefaultPaymentLookback is how long after its end a sale's captures
	// are still reconciled: as long as its keys stay in Redis by default
	// (RetireAfter), past Stripe's day of idempotency and well past a
	// notification's retries at the built-in provider.
	DefaultPaymentLookback = 24 * time.Hour
	// DefaultSettlesPerPass bounds the settle workflows one pass starts;
	// the rest are found again by the next pass.
	DefaultSettlesPerPass = 100
)

// The kinds of seckill_reconciler_payment_finds_total: why a capture was
// handed to its PaymentSettleWorkflow.
const (
	// FindUnknownOrder: the capture names an order the database does not
	// know.
	FindUnknownOrder = "unknown_order"
	// FindNotKept: the capture's order has ended without it (EXPIRED,
	// CANCELLED, FAILED, or PAID by another payment) and records no refund
	// of it.
	FindNotKept = "not_kept"
)

// findKinds are the kind labels of seckill_reconciler_payment_finds_total.
var findKinds = []string{FindUnknownOrder, FindNotKept}

// Find is a capture no order kept, handed to its PaymentSettleWorkflow.
type Find struct {
	Provider  string
	PaymentID string
	OrderID   int64
	SaleID    int64         // 0 for an unknown order
	Status    domain.Status // the order's; "" for an unknown order
	Kind      string        // FindUnknownOrder or FindNotKept
	Captured  payment.Money
}

// PaymentReport says what one pass found at one provider.
type PaymentReport struct {
	Provider string
	// From and To are the range of captures asked for: from the start of
	// the earliest recent sale to the settle margin ago.
	From, To time.Time
	Listed   int // payments the provider listed
	Kept     int // captures that paid their order: never touched
	Refunded int // refunded at the provider, or recorded on their order's row
	// Live counts captures whose order still awaits its payment (or its
	// saga): its workflow keeps or refunds them, at the latest when it
	// cancels the payment at its deadline and hears it was captured.
	Live int
	// Foreign counts captures that name no order: not made by seckill
	// (another use of the provider's account), never refunded by it.
	Foreign int
	// Recent counts captures younger than the settle margin, left to the
	// order's workflow.
	Recent int
	// Settling are the captures this pass handed to a PaymentSettleWorkflow
	// it started.
	Settling []Find
	// Settled counts captures whose PaymentSettleWorkflow had been started
	// before (by the notification endpoint or an earlier pass): done.
	Settled int
	// Deferred counts captures past the pass's bound, for the next pass.
	Deferred int
}

// Payments reconciles every configured provider's captures of the recent
// sales (not ended, or ended within PaymentLookback) against the orders: a
// capture older than SettleMargin that paid no order, whose order does not
// exist or ended without it, and that has no refund, is handed to its
// PaymentSettleWorkflow (started with the payment's id, RejectDuplicate:
// one started before means it is settled or being settled), which refunds
// it once. A capture that paid its order is never handed over. It needs
// Temporal and a provider; without them it does nothing.
func (rc *Reconciler) Payments(ctx context.Context) ([]PaymentReport, error) {
	if rc.Temporal == nil || len(rc.Providers) == 0 {
		return nil, nil
	}
	now := time.Now()
	to := now.Add(-defaulted(rc.SettleMargin, DefaultSettleMargin))
	sales, err := rc.Store.OpenSales(ctx, now.Add(-defaulted(rc.PaymentLookback, DefaultPaymentLookback)))
	if err != nil || len(sales) == 0 {
		return nil, err
	}
	from := sales[0].StartsAt
	for _, s := range sales {
		if s.StartsAt.Before(from) {
			from = s.StartsAt
		}
	}
	if !from.Before(to) {
		return nil, nil // every recent sale began inside the margin
	}
	names := make([]string, 0, len(rc.Providers))
	for name := range rc.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	budget := rc.SettlesPerPass
	if budget <= 0 {
		budget = DefaultSettlesPerPass
	}
	var reps []PaymentReport
	var errs error
	settled := map[string]bool{}
	for _, name := range names {
		rep, err := rc.providerPass(ctx, rc.Providers[name], from, to, &budget, settled)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("reconcile the captures at %s: %w", name, err))
		}
		reps = append(reps, rep)
	}
	rc.settledMu.Lock()
	rc.settled = settled
	rc.settledMu.Unlock()
	return reps, errs
}

// providerPass reconciles one provider's captures in [from, to). settled
// collects the payments whose settle workflow exists, so the next pass
// asks Temporal about none of them again.
func (rc *Reconciler) providerPass(ctx context.Context, prov payment.Provider, from, to time.Time, budget *int,
	settled map[string]bool) (PaymentReport, error) {
	rep := PaymentReport{Provider: prov.Name(), From: from, To: to}
	caps, err := prov.Captured(ctx, from, to)
	if err != nil {
		return rep, err
	}
	rep.Listed = len(caps)
	slices.SortFunc(caps, func(a, b payment.Payment) int { return a.Created.Compare(b.Created) })
	ids := make([]int64, 0, len(caps))
	for _, c := range caps {
		if c.OrderID > 0 {
			ids = append(ids, c.OrderID)
		}
	}
	rows, err := rc.Store.OrdersByID(ctx, ids)
	if err != nil {
		return rep, err
	}
	rc.settledMu.Lock()
	before := rc.settled
	rc.settledMu.Unlock()
	var errs error
	for _, c := range caps {
		f := Find{Provider: prov.Name(), PaymentID: c.ID, OrderID: c.OrderID, Captured: c.Captured, Kind: FindNotKept}
		row, known := rows[c.OrderID]
		switch {
		case c.State == payment.Refunded:
			rep.Refunded++
			continue
		case c.State != payment.Captured:
			continue
		case c.Created.After(to):
			// Listed by creation (Stripe) rather than capture: made
			// inside the margin.
			rep.Recent++
			continue
		case c.OrderID <= 0:
			rep.Foreign++
			continue
		case !known:
			f.Kind = FindUnknownOrder
		case domain.Status(row.Status) == domain.StatusPaid && row.PaymentID == c.ID:
			rep.Kept++
			continue
		case row.RefundID != "" && row.PaymentID == c.ID:
			rep.Refunded++
			continue
		case !domain.Status(row.Status).Final():
			rep.Live++
			continue
		}
		if known {
			f.SaleID, f.Status = row.SaleID, domain.Status(row.Status)
		}
		key := prov.Name() + "/" + c.ID
		if before[key] {
			settled[key] = true
			rep.Settled++
			continue
		}
		if *budget <= 0 {
			rep.Deferred++
			continue
		}
		started, err := rc.settle(ctx, prov.Name(), c)
		if err == nil {
			// Started, and the pass fails or stops: the workflow refunds
			// the capture, and the next pass finds it started.
			err = fault.Hit(fault.ReconcilePaymentSettle)
		}
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		settled[key] = true
		if !started {
			rep.Settled++
			continue
		}
		*budget--
		rep.Settling = append(rep.Settling, f)
		rc.logger().Warn("reconciliation found a capture no order kept: refunding it", "provider", f.Provider,
			"payment_id", f.PaymentID, "order_id", f.OrderID, "sale_id", f.SaleID, "order_status", f.Status, "kind", f.Kind,
			"captured", f.Captured.String())
		if rc.OnPaymentFind != nil {
			rc.OnPaymentFind(f)
		}
	}
	if rep.Deferred > 0 {
		rc.logger().Warn("reconciliation left captures no order kept to its next pass", "provider", rep.Provider, "deferred", rep.Deferred)
	}
	return rep, errs
}

// settle starts the capture's PaymentSettleWorkflow, as the notification
// endpoint does (workflows.StartSettle); started is false when one runs or
// completed before.
func (rc *Reconciler) settle(ctx context.Context, provider string, c payment.Payment) (started bool, _ error) {
	ev := workflows.PaymentEvent{EventID: "reconcile-" + c.ID, Provider: provider, Payment: c, At: time.Now()}
	// fault: providerPass hits reconcile.payments.settle once this returns.
	return workflows.StartSettle(ctx, rc.Temporal, ev)
}

// paymentsDue reports whether Run reconciles the providers' records now:
// a provider and Temporal are configured, and this reconciler claimed the
// deployment's pass of this interval (Stock.ClaimPaymentPass).
func (rc *Reconciler) paymentsDue(ctx context.Context) bool {
	every := defaulted(rc.PaymentInterval, DefaultPaymentInterval)
	if every < 0 || rc.Temporal == nil || len(rc.Providers) == 0 {
		return false
	}
	ok, err := rc.Stock.ClaimPaymentPass(ctx, every)
	if err != nil && ctx.Err() == nil {
		rc.logger().Warn("reconcile payments", "err", err)
	}
	return ok
}

// logPayments logs a pass's summary at INFO (each find has its WARN).
func (rc *Reconciler) logPayments(reps []PaymentReport) {
	for _, r := range reps {
		rc.logger().Info("reconciled the payment provider's captures", "provider", r.Provider,
			"from", r.From, "to", r.To, "listed", r.Listed, "kept", r.Kept, "refunded", r.Refunded, "live", r.Live,
			"foreign", r.Foreign, "settling", len(r.Settling), "settled", r.Settled, "deferred", r.Deferred)
	}
}

// defaulted is d, or def when d is zero.
func defaulted(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
