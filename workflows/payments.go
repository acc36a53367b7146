package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
)

// The payment of an order at its provider (VersionPayments, an order
// started with OrderInput.Provider; docs/design.md §4.3): pay starts a
// payment, the provider finishes it, the deadline is decided once, and a
// capture the order does not keep goes back, once.

// SignalPayment carries a PaymentEvent: what the provider says happened
// to one of the order's payments. The api sends it once the provider's
// notification is verified; repeats and events older than what the
// workflow knows change nothing.
const SignalPayment = "payment"

// ErrTypePaymentUnavailable is the ApplicationError type with which the
// pay update fails when the provider could not be reached to start a
// payment (the caller may retry; nothing was decided). A refusal by the
// provider fails it with activities.ErrTypePaymentRejected.
const ErrTypePaymentUnavailable = "PaymentUnavailable"

// MetricPaymentsDeclined is the counter an order's workflow counts a
// declined payment attempt on, through workflow.GetMetricsHandler; the
// worker's metrics handler exports it as a Prometheus counter of that
// name (worker.MetricsHandler). A decline runs no activity, so only the
// workflow knows of it.
const MetricPaymentsDeclined = "seckill_payments_declined_total"

// DefaultPaymentGrace is how long, past the deadline, an order holds its
// unit while its provider cannot be reached to cancel a pending payment.
const DefaultPaymentGrace = 2 * time.Minute

// PaymentEvent is a payment's state as its provider reported it, at At
// (the provider's time of the event). EventID identifies the provider's
// event ("" for a read of the payment the workflow made itself).
type PaymentEvent struct {
	EventID  string
	Provider string
	Payment  payment.Payment
	At       time.Time
	// Refund is set for a refund's event (the order's workflow reads the
	// payment's state; PaymentSettleWorkflow records the refund).
	Refund *payment.Refund `json:",omitempty"`
}

// PayRequest is the optional payload of the pay update.
type PayRequest struct {
	// ReturnURL is where a provider's hosted page sends the buyer back.
	ReturnURL string `json:",omitempty"`
}

// PaymentAction is what the buyer's client needs to complete a payment at
// its provider: a hosted page to send the buyer to, or a client secret for
// the provider's own client library. A payment started since the client
// action is sealed carries it in Sealed only, as StartPayment answered
// it (the api opens it for the buyer); one started before carries the
// plain fields.
type PaymentAction struct {
	Provider     string `json:"provider"`
	ID           string `json:"id"`
	RedirectURL  string `json:"redirect_url,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Sealed       string `json:"sealed,omitempty"`
}

// attempt is one payment the order started at its provider (or, n 0, one
// the provider reported that it did not start), as last known.
type attempt struct {
	n  int
	p  payment.Payment
	at time.Time // when p's state was reported
	// cancelled: the workflow has asked the provider to cancel it.
	cancelled bool
}

// payments is the state of an order's payment at its provider.
type payments struct {
	name     string // the provider's
	grace    time.Duration
	attempts []*attempt
	// seen holds the event ids acted on, captured the payments whose
	// capture was acted on (kept or refunded): each once.
	seen, captured map[string]bool
	// paidBy is the attempt whose capture the order was decided PAID by.
	paidBy *attempt
	// starting: a pay is starting an attempt at the provider; cancelling:
	// a cancel is cancelling one there. Each waits for the other.
	starting, cancelling bool
	// refunding counts refunds under way; the workflow returns only once
	// they are done.
	refunding int
	signals   workflow.ReceiveChannel
	// refundedInBatch holds the payments that an event of the batch being
	// acted on says were refunded (earlierRuns).
	refundedInBatch map[string]bool
	// ctx is the workflow's context disconnected from its cancellation:
	// a capture is kept or refunded whatever ends the order.
	ctx workflow.Context
}

// pending returns the attempt a buyer may still be paying, if any.
func (p *payments) pending() *attempt {
	if p == nil {
		return nil
	}
	for i := len(p.attempts) - 1; i >= 0; i-- {
		if at := p.attempts[i]; at.n > 0 {
			if at.p.State == payment.Pending {
				return at
			}
			return nil
		}
	}
	return nil
}

// paid returns the attempt that paid the order, if any.
func (p *payments) paid() *attempt {
	if p == nil {
		return nil
	}
	return p.paidBy
}

// searchID is the PaymentId search attribute of an order reaching status:
// the payment that paid it, or its last attempt once it ended otherwise.
func (p *payments) searchID(status domain.Status) string {
	switch {
	case p == nil || !status.Final():
		return ""
	case p.paidBy != nil:
		return p.paidBy.p.ID
	}
	for i := len(p.attempts) - 1; i >= 0; i-- {
		if p.attempts[i].n > 0 {
			return p.attempts[i].p.ID
		}
	}
	return ""
}

func (p *payments) find(id string) *attempt {
	for _, at := range p.attempts {
		if at.p.ID == id {
			return at
		}
	}
	return nil
}

// changeFree marks the orders of a sale priced 0 that pay without their
// provider (a marker in those orders' histories only).
const changeFree = "free-order-without-provider"

// freeOrder reports whether an order with a provider pays without it: a
// sale priced 0 asks for no money, and providers refuse a payment of 0,
// so its pay decides PAID at once, as without a provider (docs/design.md
// §4.3). Orders of such sales started before this rule, whose pay asked
// the provider, keep asking it.
func freeOrder(ctx workflow.Context, ref domain.OrderRef) bool {
	return ref.AmountCents == 0 && workflow.GetVersion(ctx, changeFree, workflow.DefaultVersion, 1) == 1
}

// listenPayments sets the order up to pay at in.Provider and acts on
// every payment signal as it arrives, for as long as the workflow runs.
func (o *order) listenPayments(ctx workflow.Context, in OrderInput) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	o.provider = &payments{name: in.Provider, grace: in.PaymentGrace, seen: map[string]bool{}, captured: map[string]bool{},
		signals: workflow.GetSignalChannel(dctx, SignalPayment), ctx: dctx}
	if o.provider.grace <= 0 {
		o.provider.grace = DefaultPaymentGrace
	}
	workflow.Go(dctx, func(ctx workflow.Context) {
		for {
			// Await, not Receive: a value handed to a blocked receiver
			// could be in flight here while settlePayments finds the
			// channel empty; taken with ReceiveAsync, it is acted on
			// without yielding.
			if err := workflow.Await(ctx, func() bool { return o.provider.signals.Len() > 0 }); err != nil {
				return
			}
			if o.state.Status == domain.StatusPending && workflow.GetVersion(ctx, changeEarlierRuns, workflow.DefaultVersion, earlierRunsRefunded) >= 1 {
				// Heard while the order is being placed: only a run a Reset
				// started hears a payment this early (its earlier run's
				// signals come first). Acted on once the order is placed,
				// when its capture can pay it (earlierRuns).
				if err := workflow.Await(ctx, func() bool { return o.state.Status != domain.StatusPending || o.done }); err != nil {
					return
				}
			}
			// Every signal received so far, acted on in order: nothing
			// yields in between, so the commands are those of acting on
			// each as it is taken. A reset run gets its earlier run's
			// signals together, a capture with its refund after it.
			var batch []PaymentEvent
			for {
				var ev PaymentEvent
				if !o.provider.signals.ReceiveAsync(&ev) {
					break
				}
				batch = append(batch, ev)
			}
			o.provider.refundedInBatch = refundedIn(batch)
			for _, ev := range batch {
				o.onPayment(ctx, ev)
			}
			o.provider.refundedInBatch = nil
		}
	})
}

// onPayment acts on what the provider says of a payment. It never blocks
// (refunds run on their own), so a signal taken from the channel is acted
// on in the same step.
func (o *order) onPayment(ctx workflow.Context, ev PaymentEvent) {
	p := o.provider
	logger := workflow.GetLogger(ctx)
	if ev.Provider != "" && ev.Provider != p.name {
		logger.Warn("payment event of another provider ignored", "order_id", o.ref.OrderID, "provider", ev.Provider)
		return
	}
	if ev.Payment.OrderID != 0 && ev.Payment.OrderID != o.ref.OrderID {
		logger.Warn("payment event of another order ignored", "order_id", o.ref.OrderID, "payment_order_id", ev.Payment.OrderID)
		return
	}
	if ev.EventID != "" {
		if p.seen[ev.EventID] {
			return // a repeat
		}
		p.seen[ev.EventID] = true
	}
	// A read the workflow made itself (a cancel's answer) is the payment's
	// state now; its time is the workflow's clock, not the provider's, so
	// it orders nothing.
	read := ev.EventID == ""
	state := ev.Payment.State
	at := p.find(ev.Payment.ID)
	if at == nil {
		// A payment this order did not start (or not in this run): kept
		// only as a record; its capture is refunded below.
		at = &attempt{p: ev.Payment, at: ev.At}
		p.attempts = append(p.attempts, at)
	} else if state != payment.Captured {
		// Events arrive out of order: one older than what is known, or
		// one that would take a final state back to pending, or a
		// captured payment anywhere but to its refund, changes nothing.
		// A capture is acted on whenever it arrives (money moved: it is
		// kept or refunded), once.
		if (!read && ev.At.Before(at.at)) || (at.p.State.Final() && state == payment.Pending) ||
			(at.p.State == payment.Captured && state != payment.Refunded) {
			return
		}
		if state == payment.Declined && at.p.State != payment.Declined && at.n > 0 {
			// Counted through the SDK's handler, which counts nothing
			// while a history is replayed: once per decline the order
			// acts on.
			workflow.GetMetricsHandler(ctx).Counter(MetricPaymentsDeclined).Inc(1)
		}
		at.p.State = state
		if !read {
			at.at = ev.At
		}
		return
	} else {
		at.p.State, at.p.Captured = state, ev.Payment.Captured
		if !read && ev.At.After(at.at) {
			at.at = ev.At
		}
	}
	if state == payment.Captured {
		o.onCapture(ctx, at, ev.Payment)
	}
}

// onCapture decides what a capture means for the order, once per payment:
// the order's money, in time, pays it; anything else goes back.
func (o *order) onCapture(ctx workflow.Context, at *attempt, pay payment.Payment) {
	p := o.provider
	if p.captured[pay.ID] {
		return
	}
	p.captured[pay.ID] = true
	want := payment.Money{Minor: o.ref.AmountCents, Currency: at.p.Amount.Currency}
	switch {
	case at.n == 0 && !o.earlierRuns(ctx, pay, want):
		o.refund(pay, activities.RefundNotStarted, "a payment this order did not start")
	case pay.Captured != want || want.Currency == "":
		o.refund(pay, activities.RefundWrongAmount, fmt.Sprintf("captured %s, the order's amount is %s", pay.Captured, want))
	case o.decided == "" && o.state.Status == domain.StatusAwaitingPayment:
		// The decision, taken once against cancel and the timer; a Reset
		// re-delivers the signal, so it counts as an update's.
		p.paidBy = at
		o.byUpdate = true
		o.choose(domain.StatusPaid, "")
		o.decisions.SendAsync(true)
	case o.decided == domain.StatusPaid && p.paidBy != nil:
		o.refund(pay, activities.RefundSecondCapture, "a second capture: the order was paid by payment "+p.paidBy.p.ID)
	default:
		o.refund(pay, activities.RefundLate, "captured after the order ended "+string(o.ending()))
	}
}

// changeEarlierRuns marks the orders whose run heard of a payment while
// the order was being placed, or kept a capture of a payment an earlier
// run of the same order started (a marker in those histories only).
const changeEarlierRuns = "capture-of-an-earlier-run"

// earlierRunsRefunded is the change's version 2: an earlier run's capture
// that a signal heard with it says was refunded (after it, or before it
// when the notifications came out of order) does not pay the order. A
// reset run hears its earlier run's signals together, while it places the
// order; when the earlier run had refunded the capture, version 1 acted on
// the capture before it reached the refund and made the order PAID by
// money the buyer had got back (TestInterleavings, seed 8086).
const earlierRunsRefunded workflow.Version = 2

// refundedIn returns the payments that events say were refunded.
func refundedIn(events []PaymentEvent) map[string]bool {
	var out map[string]bool
	for _, ev := range events {
		if ev.Payment.State == payment.Refunded {
			if out == nil {
				out = map[string]bool{}
			}
			out[ev.Payment.ID] = true
		}
	}
	return out
}

// earlierRuns reports whether a capture this run did not start pays the
// order all the same: it names this order, for the order's amount, and
// comes while the order awaits payment with nothing decided and before
// this run has handed out a payment of its own. Seckill starts a payment
// only for an order's workflow, so such a payment is one an earlier run
// started: a Web UI Reset starts a new run, which hears the capture
// again (the signal is re-delivered) while its re-delivered pay is still
// starting a payment. The buyer paid in time; refunding the money and
// expiring the order would punish them for the operator's Reset. Once
// this run has handed out a payment of its own, that is the one the buyer
// pays, and an earlier run's capture goes back (TestInterleavings, seed
// 1795746173716204879). Nor does one the earlier run refunded, as a
// signal of the same batch says (version 2). Runs before this rule
// refunded it.
func (o *order) earlierRuns(ctx workflow.Context, pay payment.Payment, want payment.Money) bool {
	// An attempt of this run's is handed out as soon as it is known (one
	// being started is not yet).
	if slices.ContainsFunc(o.provider.attempts, func(at *attempt) bool { return at.n > 0 }) {
		return false
	}
	if pay.OrderID != o.ref.OrderID || pay.Captured != want || want.Currency == "" ||
		o.decided != "" || o.state.Status != domain.StatusAwaitingPayment {
		return false
	}
	v := workflow.GetVersion(ctx, changeEarlierRuns, workflow.DefaultVersion, earlierRunsRefunded)
	return v >= 1 && !(v >= earlierRunsRefunded && o.provider.refundedInBatch[pay.ID])
}

// ending is how the order ended or is ending.
func (o *order) ending() domain.Status {
	if o.decided != "" {
		return o.decided
	}
	return o.state.Status
}

// refund gives a capture the order does not keep back to the buyer, on
// its own coroutine (the caller does not wait) and a context no
// cancellation ends, and tells the buyer. RefundPayment retries until the
// provider takes it; its key makes it one refund per payment. class is
// the reason's class (activities.RefundLate, ...).
func (o *order) refund(pay payment.Payment, class, reason string) {
	p := o.provider
	p.refunding++
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.refunding-- }()
		logger := workflow.GetLogger(ctx)
		logger.Warn("refunding a capture the order does not keep", "order_id", o.ref.OrderID, "payment_id", pay.ID, "reason", reason)
		rctx := workflow.WithActivityOptions(ctx, refundOptions)
		in := activities.RefundInput{Ref: o.ref, Provider: p.name, PaymentID: pay.ID, Reason: reason, Class: class}
		if err := workflow.ExecuteActivity(rctx, a.RefundPayment, in).Get(ctx, nil); err != nil {
			// Refused by the provider: a retry would not change it. The
			// reconciliation of the provider's records finds the capture.
			logger.Error("refund refused by the payment provider", "order_id", o.ref.OrderID, "payment_id", pay.ID, "err", err)
			return
		}
		// The status the order has, or is being ended with: a refund told
		// while the ending is carried out must not say the order still
		// awaits payment.
		status := o.state.Status
		if o.decided != "" && !status.Final() {
			status = o.decided
		}
		nctx := workflow.WithLocalActivityOptions(ctx, notifyOptions)
		note := activities.NotifyInput{Ref: o.ref, Status: status, Reason: "payment " + pay.ID + " refunded: " + reason,
			RefundedPayment: pay.ID}
		if err := workflow.ExecuteLocalActivity(nctx, notify, note).Get(ctx, nil); err != nil {
			logger.Warn("notify buyer of a refund", "order_id", o.ref.OrderID, "payment_id", pay.ID, "err", err)
		}
	})
}

// startPayment is the pay update of an order paid at a provider. It does
// not decide the order: it starts a payment attempt (or answers the one
// the buyer is paying) and returns what the buyer's client needs to
// complete it. The provider's capture decides (onCapture).
func (o *order) startPayment(ctx workflow.Context, req PayRequest) (OrderState, error) {
	p := o.provider
	// A pay accepted while the order is being placed takes effect once it
	// awaits payment; one that meets another pay starting an attempt, or a
	// cancel at the provider, waits for it.
	err := workflow.Await(ctx, func() bool {
		return o.decided != "" || o.state.Status.Final() ||
			(o.state.Status == domain.StatusAwaitingPayment && !p.starting && !p.cancelling)
	})
	if err != nil {
		return o.state, err
	}
	if o.decided != "" || o.state.Status != domain.StatusAwaitingPayment || o.pastDeadline(workflow.Now(ctx)) {
		return o.outcome(ctx)
	}
	if at := p.pending(); at != nil {
		return o.awaiting(at), nil
	}
	n := 1
	for _, at := range p.attempts {
		n = max(n, at.n+1)
	}
	p.starting = true
	var pay payment.Payment
	// On a context the workflow's cancellation does not end: a payment
	// created at the provider is known, so the ending can cancel it there.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	actx := workflow.WithActivityOptions(dctx, providerCallOptions)
	err = workflow.ExecuteActivity(actx, a.StartPayment, activities.StartPaymentInput{
		Ref: o.ref, Provider: p.name, Attempt: n, ReturnURL: req.ReturnURL, ExpiresAt: o.deadline,
	}).Get(dctx, &pay)
	p.starting = false
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrTypePaymentRejected {
			return o.state, temporal.NewNonRetryableApplicationError("cannot pay: the payment provider refused the payment", activities.ErrTypePaymentRejected, err)
		}
		return o.state, temporal.NewApplicationError("cannot pay now: the payment provider did not answer; try again", ErrTypePaymentUnavailable, err)
	}
	// The provider's time of the payment orders its events (not the
	// workflow's clock: a decline may be notified at once).
	at := &attempt{n: n, p: pay, at: pay.Created}
	p.attempts = append(p.attempts, at)
	if pay.State == payment.Captured {
		o.onCapture(ctx, at, pay) // an attempt paid already (a Reset run's)
	}
	if o.decided != "" {
		// Decided while the attempt was being started: it is cancelled at
		// the provider before the workflow ends (settlePayments).
		return o.outcome(ctx)
	}
	return o.awaiting(at), nil
}

// awaiting is the pay update's answer while the buyer pays attempt at.
func (o *order) awaiting(at *attempt) OrderState {
	st := o.state
	st.Payment = &PaymentAction{Provider: o.provider.name, ID: at.p.ID, RedirectURL: at.p.RedirectURL, ClientSecret: at.p.ClientSecret,
		Sealed: at.p.SealedAction}
	return st
}

// outcome waits until the order's decision has been carried out and
// answers its state, on a context an operator's cancel does not end.
func (o *order) outcome(ctx workflow.Context) (OrderState, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(dctx, func() bool { return o.done }); err != nil {
		return o.state, err
	}
	return o.state, nil
}

// cancelPayment is the cancel update of an order paid at a provider: a
// payment the buyer may be paying is cancelled there first. If the
// provider answers that it was captured, the payment won: the order is
// PAID and the cancel refused. Otherwise (cancelled, declined, or the
// provider unreachable) the cancel decides as before, and a capture
// arriving later is refunded.
func (o *order) cancelPayment(ctx workflow.Context, reason string) (OrderState, error) {
	p := o.provider
	err := workflow.Await(ctx, func() bool { return o.decided != "" || (!p.starting && !p.cancelling) })
	if err != nil {
		return o.state, err
	}
	if at := p.pending(); at != nil && o.decided == "" && !o.pastDeadline(workflow.Now(ctx)) {
		p.cancelling = true
		o.cancelAt(ctx, at, providerCallOptions)
		p.cancelling = false
	}
	st, err := o.decide(ctx, domain.StatusCancelled, reason)
	if err == nil && st.Status == domain.StatusPaid {
		return st, temporal.NewApplicationError("cannot cancel: the order is PAID", ErrTypeInvalidState, domain.StatusPaid)
	}
	return st, err
}

// cancelAt asks the provider to cancel attempt at and acts on its answer
// (a capture decides or is refunded). It reports whether the provider
// answered.
func (o *order) cancelAt(ctx workflow.Context, at *attempt, opts workflow.ActivityOptions) bool {
	var pay payment.Payment
	actx := workflow.WithActivityOptions(ctx, opts)
	in := activities.PaymentRefIn{Provider: o.provider.name, PaymentID: at.p.ID}
	if err := workflow.ExecuteActivity(actx, a.CancelPayment, in).Get(ctx, &pay); err != nil {
		workflow.GetLogger(ctx).Warn("cancel payment", "order_id", o.ref.OrderID, "payment_id", at.p.ID, "err", err)
		return false
	}
	at.cancelled = true
	o.onPayment(ctx, PaymentEvent{Provider: o.provider.name, Payment: pay, At: workflow.Now(ctx)})
	return true
}

// settleDeadline decides an order whose payment timer fired while a
// payment was pending at its provider. The payment is cancelled there; an
// answer that it was captured means the money came in time: the payment
// wins, PAID. Cancelled or declined: EXPIRED. A provider that cannot be
// reached holds the unit for the grace (a timer, not the retries, bounds
// it), then the order expires, and a capture arriving later is refunded.
// A capture notified meanwhile decides PAID as before the deadline.
func (o *order) settleDeadline(ctx workflow.Context) {
	at := o.provider.pending()
	cctx, stopCancel := workflow.WithCancel(ctx)
	gctx, stopGrace := workflow.WithCancel(ctx)
	defer stopCancel()
	defer stopGrace()
	at.cancelled = true
	in := activities.PaymentRefIn{Provider: o.provider.name, PaymentID: at.p.ID}
	answer := workflow.ExecuteActivity(workflow.WithActivityOptions(cctx, deadlineCancelOptions), a.CancelPayment, in)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(o.decisions, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.AddFuture(answer, func(f workflow.Future) {
		var pay payment.Payment
		switch err := f.Get(ctx, &pay); {
		case err == nil:
			o.onPayment(ctx, PaymentEvent{Provider: o.provider.name, Payment: pay, At: workflow.Now(ctx)})
			o.choose(domain.StatusExpired, "payment timeout") // unless the capture decided
		case ctx.Err() != nil:
			o.choose(domain.StatusCancelled, "order workflow cancelled")
		default:
			// Refused, or unknown at the provider: nothing more to wait for.
			o.choose(domain.StatusExpired, "payment timeout")
		}
	})
	sel.AddFuture(workflow.NewTimer(gctx, o.provider.grace), func(f workflow.Future) {
		if f.Get(ctx, nil) != nil {
			o.choose(domain.StatusCancelled, "order workflow cancelled")
			return
		}
		o.choose(domain.StatusExpired, "payment timeout; the payment provider could not be reached to cancel the payment")
	})
	for o.decided == "" {
		sel.Select(ctx)
	}
}

// settlePayments runs before the workflow returns, whatever ended the
// order: a payment still pending at the provider (the workflow was
// cancelled, or a pay's attempt started after the decision) is cancelled
// there, and every payment signal delivered up to now is acted on and its
// refund done, so a capture in the last workflow task is refunded, not
// lost.
func (o *order) settlePayments(ctx workflow.Context) {
	p := o.provider
	for _, at := range p.attempts {
		if at.n > 0 && at.p.State == payment.Pending && !at.cancelled && at != p.paidBy {
			o.cancelAt(ctx, at, providerCallOptions)
		}
	}
	for {
		if err := workflow.Await(ctx, func() bool { return p.refunding == 0 }); err != nil {
			return
		}
		var ev PaymentEvent
		if !p.signals.ReceiveAsync(&ev) {
			return
		}
		o.onPayment(ctx, ev)
	}
}
