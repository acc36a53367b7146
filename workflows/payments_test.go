package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
)

var orderMoney = payment.Money{Minor: testRef.AmountCents, Currency: "EUR"}

// provider stands in for the payment activities: it records what the
// workflow asked and answers a cancel with cancel (by default: cancelled).
type provider struct {
	mu       sync.Mutex
	starts   []activities.StartPaymentInput
	cancels  []string
	refunds  []activities.RefundInput
	paidWith []activities.PaidInput
	// upserts are the search attribute upserts, one string per call.
	upserts []string
	start   func(in activities.StartPaymentInput) error
	cancel  func(id string) (payment.Payment, error)
}

func (p *provider) refunded() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, r := range p.refunds {
		ids = append(ids, r.PaymentID)
	}
	return ids
}

// newPayEnv is newEnv with the payment activities of prov (at
// latestVersion, VersionPayments, unless a test says otherwise).
func newPayEnv(t *testing.T, fail map[string]step) (*testsuite.TestWorkflowEnvironment, *saga, *provider) {
	t.Helper()
	env, s := newEnv(t, fail)
	prov := &provider{}
	env.OnActivity("StartPayment", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StartPaymentInput) (payment.Payment, error) {
		s.record(ctx, "StartPayment")
		prov.mu.Lock()
		prov.starts = append(prov.starts, in)
		start := prov.start
		prov.mu.Unlock()
		if start != nil {
			if err := start(in); err != nil {
				return payment.Payment{}, err
			}
		}
		// As the activity answers: the hosted page sealed, never plain.
		id := fmt.Sprintf("pay-%d", in.Attempt)
		return payment.Payment{Provider: in.Provider, ID: id, OrderID: in.Ref.OrderID, Amount: orderMoney, State: payment.Pending,
			SealedAction: sealedPage(id)}, nil
	})
	env.OnActivity("CancelPayment", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.PaymentRefIn) (payment.Payment, error) {
		s.record(ctx, "CancelPayment")
		prov.mu.Lock()
		prov.cancels = append(prov.cancels, in.PaymentID)
		cancel := prov.cancel
		prov.mu.Unlock()
		if cancel != nil {
			return cancel(in.PaymentID)
		}
		return payment.Payment{Provider: in.Provider, ID: in.PaymentID, Amount: orderMoney, State: payment.Canceled}, nil
	})
	env.OnActivity("RefundPayment", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.RefundInput) (payment.Refund, error) {
		s.record(ctx, "RefundPayment")
		prov.mu.Lock()
		defer prov.mu.Unlock()
		prov.refunds = append(prov.refunds, in)
		return payment.Refund{Provider: in.Provider, ID: "re-" + in.PaymentID, PaymentID: in.PaymentID, State: payment.RefundSucceeded}, nil
	})
	env.OnActivity("MarkPaidWith", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.PaidInput) (time.Time, error) {
		s.record(ctx, "MarkPaidWith")
		prov.mu.Lock()
		defer prov.mu.Unlock()
		prov.paidWith = append(prov.paidWith, in)
		return testPaidAt, nil
	})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		status, _ := sa.GetKeyword(OrderStatusKey)
		up := status
		if id, ok := sa.GetKeyword(PaymentIDKey); ok {
			up += " " + id
		}
		prov.mu.Lock()
		prov.upserts = append(prov.upserts, up)
		prov.mu.Unlock()
	}).Return(nil)
	return env, s, prov
}

// payIn is the input of an order paid at the fake provider.
var payIn = OrderInput{Order: testRef, PaymentTimeout: 10 * time.Minute, Provider: "fake", PaymentGrace: 2 * time.Minute}

// sealedPage stands for the sealed client action of payment id: the
// workflow passes it on as it is, and never opens it.
func sealedPage(id string) string { return "v1.sealed-page-of-" + id }

// wantPayment expects the pay update to answer the order still awaiting
// payment, with the payment attempt id to complete, its client action
// sealed as StartPayment answered it.
func wantPayment(t *testing.T, id string) expect {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if o.rejected != nil || o.err != nil || !o.accepted || o.state.Status != domain.StatusAwaitingPayment ||
			o.state.Payment == nil || o.state.Payment.ID != id || o.state.Payment.Provider != "fake" ||
			o.state.Payment.Sealed != sealedPage(id) || o.state.Payment.RedirectURL != "" {
			t.Errorf("pay outcome = %+v (payment %+v), want AWAITING_PAYMENT with payment %s", o, o.state.Payment, id)
		}
	}
}

// event is a provider's event about payment id.
func event(eventID, id string, state payment.State, at time.Time, captured payment.Money) PaymentEvent {
	return PaymentEvent{EventID: eventID, Provider: "fake", At: at,
		Payment: payment.Payment{Provider: "fake", ID: id, OrderID: testRef.OrderID, Amount: orderMoney, Captured: captured, State: state}}
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) domain.Status {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	var st OrderState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st.Status
}

// Pay starts a payment and does not decide the order; the provider's
// capture for the order's amount does. A repeat of the capture's event and
// an older event of the same payment change nothing. The payment id is
// recorded with the row and upserted with PAID, in one upsert.
func TestPaymentCapturedPaysTheOrder(t *testing.T) {
	env, s, prov := newPayEnv(t, nil)
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, wantPayment(t, "pay-1"), PayRequest{ReturnURL: "https://shop.example/o/42"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, wantPayment(t, "pay-1")) // a pay while the attempt is pending: the same attempt
		if st := queryStatus(t, env); st != domain.StatusAwaitingPayment {
			t.Errorf("status after pay = %s, want AWAITING_PAYMENT until the provider says captured", st)
		}
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		captured := event("ev-2", "pay-1", payment.Captured, start.Add(3*time.Minute), orderMoney)
		env.SignalWorkflow(SignalPayment, captured)
		env.SignalWorkflow(SignalPayment, captured)                                                                         // a repeat
		env.SignalWorkflow(SignalPayment, event("ev-1", "pay-1", payment.Pending, start.Add(time.Minute), payment.Money{})) // older
	}, 3*time.Minute)
	st := run(t, env, payIn)
	if st.Status != domain.StatusPaid {
		t.Fatalf("status = %s (%s), want PAID", st.Status, st.Reason)
	}
	if len(prov.starts) != 1 || prov.starts[0].Attempt != 1 || prov.starts[0].ReturnURL != "https://shop.example/o/42" ||
		!prov.starts[0].ExpiresAt.Equal(start.Add(payIn.PaymentTimeout)) {
		t.Fatalf("payments started = %+v, want attempt 1 with the return URL, expiring at the deadline", prov.starts)
	}
	if len(prov.paidWith) != 1 || prov.paidWith[0].PaymentID != "pay-1" || prov.paidWith[0].Provider != "fake" {
		t.Fatalf("recorded paid with %+v, want pay-1", prov.paidWith)
	}
	if st.PaidAt != nil {
		t.Errorf("an order paid at a provider answers paid at %v; want none (its row names the payment, which the api reads)", st.PaidAt)
	}
	equal(t, "activities", s.activities, []string{"PlaceOrder (local)", "StartPayment", "MarkPaidWith (local)"})
	equal(t, "refunds", prov.refunded(), nil)
	equal(t, "upserts", prov.upserts, []string{"AWAITING_PAYMENT", "PAID pay-1"})
	equal(t, "notified", s.notified, []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid})
}

// A declined payment leaves the order awaiting payment; the buyer's next
// pay starts attempt 2 (an out-of-order pending event of attempt 1 does not
// revive it), whose capture pays the order.
func TestDeclinedPaymentThenPayAgain(t *testing.T) {
	env, _, prov := newPayEnv(t, nil)
	start := env.Now()
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-2", "pay-1", payment.Declined, start.Add(2*time.Minute), payment.Money{}))
		env.SignalWorkflow(SignalPayment, event("ev-1", "pay-1", payment.Pending, start.Add(time.Minute), payment.Money{}))
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-2")) }, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-3", "pay-2", payment.Captured, start.Add(4*time.Minute), orderMoney))
	}, 4*time.Minute)
	if st := run(t, env, payIn); st.Status != domain.StatusPaid {
		t.Fatalf("status = %s (%s), want PAID", st.Status, st.Reason)
	}
	if len(prov.starts) != 2 || prov.starts[1].Attempt != 2 {
		t.Fatalf("payments started = %+v, want attempts 1 and 2", prov.starts)
	}
	if len(prov.paidWith) != 1 || prov.paidWith[0].PaymentID != "pay-2" {
		t.Fatalf("recorded paid with %+v, want pay-2", prov.paidWith)
	}
	equal(t, "refunds", prov.refunded(), nil)
}

// At the deadline a pending payment is cancelled at the provider, and its
// answer decides: cancelled or declined, EXPIRED; captured, the money came
// in time: PAID. The payment id goes with the status in one upsert.
func TestDeadlineCancelsThePendingPayment(t *testing.T) {
	for _, tc := range []struct {
		answer payment.State
		want   domain.Status
	}{
		{payment.Canceled, domain.StatusExpired},
		{payment.Declined, domain.StatusExpired},
		{payment.Captured, domain.StatusPaid},
	} {
		t.Run(string(tc.answer), func(t *testing.T) {
			env, s, prov := newPayEnv(t, nil)
			prov.cancel = func(id string) (payment.Payment, error) {
				p := payment.Payment{Provider: "fake", ID: id, OrderID: testRef.OrderID, Amount: orderMoney, State: tc.answer}
				if tc.answer == payment.Captured {
					p.Captured = orderMoney
				}
				return p, nil
			}
			env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
			st := run(t, env, payIn)
			if st.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s", st.Status, st.Reason, tc.want)
			}
			equal(t, "cancels", prov.cancels, []string{"pay-1"})
			equal(t, "refunds", prov.refunded(), nil)
			equal(t, "upserts", prov.upserts, []string{"AWAITING_PAYMENT", string(tc.want) + " pay-1"})
			if tc.want == domain.StatusPaid {
				equal(t, "activities", s.activities, []string{"PlaceOrder (local)", "StartPayment", "CancelPayment", "MarkPaidWith (local)"})
			} else {
				equal(t, "activities", s.activities, []string{"PlaceOrder (local)", "StartPayment", "CancelPayment", "EndOrder (local)"})
			}
		})
	}
}

// A provider that cannot be reached at the deadline holds the unit for the
// grace, then the order expires; a capture that arrives after (here, while
// the order is being ended, notified twice) is refunded once, and the
// buyer told.
func TestDeadlineProviderUnreachablePastTheGrace(t *testing.T) {
	var env *testsuite.TestWorkflowEnvironment
	var endedAt time.Time
	env, s, prov := newPayEnv(t, map[string]step{"FinishOrder": func(context.Context) error {
		endedAt = env.Now()
		env.RegisterDelayedCallback(func() {
			captured := event("ev-9", "pay-1", payment.Captured, env.Now(), orderMoney)
			env.SignalWorkflow(SignalPayment, captured)
			env.SignalWorkflow(SignalPayment, captured)
			captured.EventID = "ev-10" // the same capture, notified again under another event id
			env.SignalWorkflow(SignalPayment, captured)
		}, 0)
		return nil
	}})
	// Rate limited, after 20 s each time: the test suite gives an activity
	// 10 attempts at most (the server: unlimited), which then outlast the
	// grace, as an unreachable provider does.
	prov.cancel = func(string) (payment.Payment, error) {
		return payment.Payment{}, temporal.NewApplicationErrorWithOptions("fake: rate limited", activities.ErrTypePaymentRateLimited,
			temporal.ApplicationErrorOptions{NextRetryDelay: 20 * time.Second})
	}
	start := env.Now()
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
	st := run(t, env, payIn)
	if st.Status != domain.StatusExpired {
		t.Fatalf("status = %s (%s), want EXPIRED", st.Status, st.Reason)
	}
	if held := endedAt.Sub(start); held < payIn.PaymentTimeout+payIn.PaymentGrace {
		t.Fatalf("ended %s after the start (%s, %d cancels), want the timeout plus the grace (%s)", held, st.Reason, len(prov.cancels), payIn.PaymentTimeout+payIn.PaymentGrace)
	}
	if len(prov.cancels) < 2 {
		t.Fatalf("the cancel was tried %d times, want it retried through the grace", len(prov.cancels))
	}
	equal(t, "refunds", prov.refunded(), []string{"pay-1"})
	if r := prov.refunds[0]; !strings.Contains(r.Reason, "EXPIRED") {
		t.Fatalf("refund reason = %q, want it to say the order expired", r.Reason)
	}
	// The buyer is told of the refund, once; after the ending or before
	// it, as the refund's activity and the ending's notice fall.
	told := 0
	for _, n := range s.notes {
		if n.RefundedPayment == "pay-1" && n.Status == domain.StatusExpired {
			told++
		}
	}
	if told != 1 {
		t.Fatalf("notifications %+v, want the refund of pay-1 told to the buyer once", s.notes)
	}
	equal(t, "upserts", prov.upserts, []string{"AWAITING_PAYMENT", "EXPIRED pay-1"})
}

// A cancel while a payment is pending cancels it at the provider first. If
// the provider answers captured, the payment won: the cancel is refused as
// PAID and the order is PAID. If it answers cancelled, the cancel decides.
func TestCancelWithAPendingPayment(t *testing.T) {
	for _, tc := range []struct {
		answer payment.State
		want   domain.Status
	}{
		{payment.Captured, domain.StatusPaid},
		{payment.Canceled, domain.StatusCancelled},
	} {
		t.Run(string(tc.answer), func(t *testing.T) {
			env, _, prov := newPayEnv(t, nil)
			prov.cancel = func(id string) (payment.Payment, error) {
				p := payment.Payment{Provider: "fake", ID: id, OrderID: testRef.OrderID, Amount: orderMoney, State: tc.answer}
				if tc.answer == payment.Captured {
					p.Captured = orderMoney
				}
				return p, nil
			}
			var answered bool
			check := wantState(t, domain.StatusCancelled)
			if tc.want == domain.StatusPaid {
				check = func(t *testing.T, o outcome) {
					var app *temporal.ApplicationError
					var detail domain.Status
					if !o.accepted || !errors.As(o.err, &app) || app.Type() != ErrTypeInvalidState || app.Details(&detail) != nil || detail != domain.StatusPaid {
						t.Errorf("cancel outcome = %+v, want refused as %s with PAID", o, ErrTypeInvalidState)
					}
				}
			}
			env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
			env.RegisterDelayedCallback(func() { update(t, env, UpdateCancel, seen(&answered, check), CancelRequest{}) }, 2*time.Minute)
			st := run(t, env, payIn)
			if st.Status != tc.want || !answered {
				t.Fatalf("status = %s (%s), cancel answered %v; want %s and an answer", st.Status, st.Reason, answered, tc.want)
			}
			equal(t, "cancels", prov.cancels, []string{"pay-1"})
			equal(t, "refunds", prov.refunded(), nil)
			if tc.want == domain.StatusPaid && (len(prov.paidWith) != 1 || prov.paidWith[0].PaymentID != "pay-1") {
				t.Fatalf("recorded paid with %+v, want pay-1", prov.paidWith)
			}
		})
	}
}

// A second capture while the order is PAID (an earlier, declined attempt
// captured after all) is refunded; the first keeps the order.
func TestSecondCaptureWhilePaidIsRefunded(t *testing.T) {
	env, _, prov := newPayEnv(t, nil)
	start := env.Now()
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-1", "pay-1", payment.Declined, start.Add(2*time.Minute), payment.Money{}))
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-2")) }, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-2", "pay-2", payment.Captured, start.Add(4*time.Minute), orderMoney))
		env.SignalWorkflow(SignalPayment, event("ev-3", "pay-1", payment.Captured, start.Add(4*time.Minute), orderMoney))
	}, 4*time.Minute)
	if st := run(t, env, payIn); st.Status != domain.StatusPaid {
		t.Fatalf("status = %s (%s), want PAID", st.Status, st.Reason)
	}
	if len(prov.paidWith) != 1 || prov.paidWith[0].PaymentID != "pay-2" {
		t.Fatalf("recorded paid with %+v, want pay-2", prov.paidWith)
	}
	equal(t, "refunds", prov.refunded(), []string{"pay-1"})
	if r := prov.refunds[0]; !strings.Contains(r.Reason, "second capture") {
		t.Fatalf("refund reason = %q, want a second capture", r.Reason)
	}
}

// A capture of another amount (or currency) than the order's is refunded;
// the order is not paid by it and expires at its deadline, with nothing
// left to cancel at the provider.
func TestWrongAmountIsRefunded(t *testing.T) {
	env, _, prov := newPayEnv(t, nil)
	start := env.Now()
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-1", "pay-1", payment.Captured, start.Add(2*time.Minute), payment.Money{Minor: 999, Currency: "EUR"}))
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		if st := queryStatus(t, env); st != domain.StatusAwaitingPayment {
			t.Errorf("status after a wrong capture = %s, want AWAITING_PAYMENT", st)
		}
	}, 3*time.Minute)
	st := run(t, env, payIn)
	if st.Status != domain.StatusExpired {
		t.Fatalf("status = %s (%s), want EXPIRED", st.Status, st.Reason)
	}
	equal(t, "refunds", prov.refunded(), []string{"pay-1"})
	if r := prov.refunds[0]; !strings.Contains(r.Reason, "999 EUR") {
		t.Fatalf("refund reason = %q, want the amount captured", r.Reason)
	}
	equal(t, "cancels", prov.cancels, nil)
	if len(prov.paidWith) != 0 {
		t.Fatalf("a wrong capture was recorded as the payment: %+v", prov.paidWith)
	}
}

// A provider that cannot start a payment fails the pay with
// ErrTypePaymentUnavailable and decides nothing: the next pay starts it.
func TestPayWhileTheProviderIsDown(t *testing.T) {
	env, _, prov := newPayEnv(t, nil)
	down := true
	prov.start = func(activities.StartPaymentInput) error {
		if down {
			return fmt.Errorf("fake: 503: %w", payment.ErrUnavailable)
		}
		return nil
	}
	var answered bool
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, seen(&answered, func(t *testing.T, o outcome) {
			var app *temporal.ApplicationError
			if !o.accepted || !errors.As(o.err, &app) || app.Type() != ErrTypePaymentUnavailable {
				t.Errorf("pay outcome = %+v, want failed as %s", o, ErrTypePaymentUnavailable)
			}
		}))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		down = false
		update(t, env, UpdatePay, wantPayment(t, "pay-1"))
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, event("ev-1", "pay-1", payment.Captured, env.Now(), orderMoney))
	}, 4*time.Minute)
	if st := run(t, env, payIn); st.Status != domain.StatusPaid || !answered {
		t.Fatalf("status = %s (%s), first pay answered %v; want PAID", st.Status, st.Reason, answered)
	}
}

// Without a provider, and for an order started before VersionPayments
// with one, pay decides PAID itself, as in version 6: no payment is
// started and no payment id upserted.
//
// So does an order of a sale priced 0: it asks for no money, and a
// provider refuses a payment of 0. Its history carries the change's
// marker; one of such an order started before the rule asks the provider.
func TestPayWithoutAProvider(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        workflow.Version
		provider string
		free     bool
	}{
		{"version 7 without a provider", VersionPayments, "", false},
		{"version 6 with a provider", VersionLocalPay, "fake", false},
		{"version 7, a sale priced 0, with a provider", VersionPayments, "fake", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, s, prov := newPayEnv(t, nil)
			env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(tc.v)
			env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
			in := payIn
			in.Provider = tc.provider
			if tc.free {
				in.Order.AmountCents, s.ref.AmountCents = 0, 0
			}
			if st := run(t, env, in); st.Status != domain.StatusPaid {
				t.Fatalf("status = %s, want PAID", st.Status)
			}
			equal(t, "activities", s.activities, []string{"PlaceOrder (local)", "MarkPaid (local)"})
			equal(t, "upserts", prov.upserts, []string{"AWAITING_PAYMENT", "PAID"})
			if len(prov.starts) != 0 {
				t.Errorf("payments started: %+v, want none", prov.starts)
			}
		})
	}
	t.Run("a sale priced 0, its order started before the rule", func(t *testing.T) {
		env, s, prov := newPayEnv(t, nil)
		s.ref.AmountCents = 0
		env.OnGetVersion(changeFree, workflow.DefaultVersion, workflow.Version(1)).Return(workflow.DefaultVersion)
		env.RegisterDelayedCallback(func() {
			update(t, env, UpdatePay, func(t *testing.T, o outcome) {
				if o.state.Payment == nil || o.state.Status != domain.StatusAwaitingPayment {
					t.Errorf("pay outcome = %+v, want a payment at the provider", o)
				}
			})
		}, time.Minute)
		in := payIn
		in.Order.AmountCents = 0
		run(t, env, in)
		if len(prov.starts) != 1 {
			t.Errorf("payments started: %+v, want one", prov.starts)
		}
	})
}

// An operator's cancel of the workflow while a payment is pending ends the
// order CANCELLED and cancels the payment at the provider before the
// workflow closes; if the provider answers that it was captured meanwhile,
// that money goes back.
func TestWorkflowCancelledWithAPendingPayment(t *testing.T) {
	for _, answer := range []payment.State{payment.Canceled, payment.Captured} {
		t.Run(string(answer), func(t *testing.T) {
			env, _, prov := newPayEnv(t, nil)
			prov.cancel = func(id string) (payment.Payment, error) {
				p := payment.Payment{Provider: "fake", ID: id, OrderID: testRef.OrderID, Amount: orderMoney, State: answer}
				if answer == payment.Captured {
					p.Captured = orderMoney
				}
				return p, nil
			}
			env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, time.Minute)
			env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Minute)
			env.ExecuteWorkflow(OrderWorkflow, payIn)
			var st OrderState
			if err := env.GetWorkflowResult(&st); err != nil || st.Status != domain.StatusCancelled {
				t.Fatalf("result = %+v, %v; want CANCELLED", st, err)
			}
			equal(t, "cancels", prov.cancels, []string{"pay-1"})
			var want []string
			if answer == payment.Captured {
				want = []string{"pay-1"}
			}
			equal(t, "refunds", prov.refunded(), want)
		})
	}
}

// A capture of a payment this run did not start, naming this order, for
// its amount, while it awaits payment: one an earlier run of the order
// started (a Web UI Reset re-delivers the capture's signal before the
// re-delivered pay starts a payment of its own). It pays the order, marked
// in the history; before the rule (the marker absent) it was refunded as a
// payment the order did not start, and so is one of another amount, or
// one that comes after this run handed out a payment of its own (the page
// the buyer now holds).
func TestCaptureOfAnEarlierRunPaysTheOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        workflow.Version
		captured payment.Money
		ownFirst bool
		// refund: the earlier run had refunded the capture, and its
		// refund's signal comes with the capture's, as a Reset re-delivers
		// them: after it, or before it (refundFirst).
		refund, refundFirst bool
		want                domain.Status
		refunded            []string
	}{
		{"kept", earlierRunsRefunded, orderMoney, false, false, false, domain.StatusPaid, nil},
		{"kept, version 1", 1, orderMoney, false, false, false, domain.StatusPaid, nil},
		{"before the rule", workflow.DefaultVersion, orderMoney, false, false, false, domain.StatusExpired, []string{"pay-earlier"}},
		{"another amount", earlierRunsRefunded, payment.Money{Minor: 1, Currency: "EUR"}, false, false, false, domain.StatusExpired, []string{"pay-earlier"}},
		{"after this run's own payment", earlierRunsRefunded, orderMoney, true, false, false, domain.StatusExpired, []string{"pay-earlier"}},
		// The refund under the shop's key again: the provider answers the
		// refund it made, and the order's row records it.
		{"refunded by the earlier run", earlierRunsRefunded, orderMoney, false, true, false, domain.StatusExpired, []string{"pay-earlier"}},
		// The refund's notification overtook the capture's: the same.
		{"refunded by the earlier run, notified first", earlierRunsRefunded, orderMoney, false, true, true, domain.StatusExpired, []string{"pay-earlier"}},
		// Version 1 made the order PAID by money its buyer had got back.
		{"refunded by the earlier run, version 1", 1, orderMoney, false, true, false, domain.StatusPaid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, prov := newPayEnv(t, nil)
			env.OnGetVersion(changeEarlierRuns, workflow.DefaultVersion, earlierRunsRefunded).Return(tc.v)
			start := env.Now()
			if tc.ownFirst {
				env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantPayment(t, "pay-1")) }, 30*time.Second)
			}
			signalAt := time.Minute
			if tc.refund {
				// While the order is being placed, as a reset run hears
				// its earlier run's signals: together.
				signalAt = 0
			}
			env.RegisterDelayedCallback(func() {
				capture := event("ev-1", "pay-earlier", payment.Captured, start.Add(time.Minute), tc.captured)
				refund := event("ev-2", "pay-earlier", payment.Refunded, start.Add(time.Minute), tc.captured)
				switch {
				case !tc.refund:
					env.SignalWorkflow(SignalPayment, capture)
				case tc.refundFirst:
					env.SignalWorkflow(SignalPayment, refund)
					env.SignalWorkflow(SignalPayment, capture)
				default:
					env.SignalWorkflow(SignalPayment, capture)
					env.SignalWorkflow(SignalPayment, refund)
				}
			}, signalAt)
			st := run(t, env, payIn)
			if st.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s", st.Status, st.Reason, tc.want)
			}
			equal(t, "refunds", prov.refunded(), tc.refunded)
			if tc.want == domain.StatusPaid && (len(prov.paidWith) != 1 || prov.paidWith[0].PaymentID != "pay-earlier") {
				t.Errorf("recorded paid with %+v, want pay-earlier", prov.paidWith)
			}
		})
	}
}
