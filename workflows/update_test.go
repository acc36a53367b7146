package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/domain"
)

// outcome is what one update's caller was told.
type outcome struct {
	accepted, completed bool
	rejected            error
	state               OrderState
	err                 error
}

// expect checks an update's outcome once it has one.
type expect func(t *testing.T, o outcome)

var updateSeq atomic.Int64

// update sends a pay or cancel update and checks its outcome.
func update(t *testing.T, env *testsuite.TestWorkflowEnvironment, name string, check expect, args ...any) {
	t.Helper()
	var o outcome
	id := name + "-" + time.Duration(updateSeq.Add(1)).String()
	env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { o.accepted = true },
		OnReject: func(err error) { o.rejected = err; check(t, o) },
		OnComplete: func(v any, err error) {
			o.completed, o.err = true, err
			if err == nil {
				if dv, ok := v.(converter.EncodedValue); ok {
					o.err = dv.Get(&o.state)
				} else if st, ok := v.(OrderState); ok {
					o.state = st
				}
			}
			check(t, o)
		},
	}, args...)
}

// seen records that an outcome arrived before checking it, so a test can
// tell a check that passed from one that never ran.
func seen(flag *bool, check expect) expect {
	return func(t *testing.T, o outcome) { *flag = true; check(t, o) }
}

// wantState expects the update to be accepted and to answer status.
func wantState(t *testing.T, status domain.Status) expect {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if o.rejected != nil || o.err != nil || !o.accepted || o.state.Status != status {
			t.Errorf("update outcome = %+v, want accepted and %s", o, status)
		}
	}
}

// wantRejected expects the validator to refuse the update, naming status.
func wantRejected(t *testing.T, status domain.Status) expect {
	return func(t *testing.T, o outcome) {
		t.Helper()
		var app *temporal.ApplicationError
		if o.accepted || !errors.As(o.rejected, &app) || app.Type() != ErrTypeInvalidState {
			t.Errorf("update outcome = %+v, want rejected as %s", o, ErrTypeInvalidState)
			return
		}
		var got domain.Status
		if err := app.Details(&got); err != nil || got != status {
			t.Errorf("rejection names %q (%v), want %s", got, err, status)
		}
	}
}

// A pay that arrives after the payment timer fired and the expiry is
// written, while the ending is still carried out, is refused with EXPIRED,
// not answered with success. Only workflows before VersionOneStepEnd have
// that moment between two activities (the pay arrives while RestoreStock
// runs, after FinishOrder wrote the row); from it on, the row's end and
// the rest are one activity, and a pay that arrives while it runs names
// the row's status, as TestPayAtTheDeadlineLosesToTheTimer checks.
func TestPayAfterExpiryIsRejected(t *testing.T) {
	var env *testsuite.TestWorkflowEnvironment
	var sent, answered bool
	env, s := newEnv(t, map[string]step{"RestoreStock": func(context.Context) error {
		if !sent {
			sent = true
			env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, seen(&answered, wantRejected(t, domain.StatusExpired))) }, 0)
		}
		return nil
	}})
	env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(VersionPaidWhilePlacing)
	st := run(t, env, OrderInput{Order: testRef, PaymentTimeout: 10 * time.Minute})
	if st.Status != domain.StatusExpired || s.ran("MarkPaid") != 0 {
		t.Fatalf("status = %s, MarkPaid ran %d times; want EXPIRED, 0", st.Status, s.ran("MarkPaid"))
	}
	if !answered {
		t.Fatal("the pay was never answered")
	}
}

func TestCancelAfterPayIsRejected(t *testing.T) {
	env, s := newEnv(t, nil)
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, wantState(t, domain.StatusPaid))
		update(t, env, UpdateCancel, wantRejected(t, domain.StatusPaid), CancelRequest{})
	}, time.Minute)
	if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusPaid {
		t.Fatalf("status = %s, want PAID", st.Status)
	}
	if n := s.ran("RestoreStock") + s.ran("ReleaseReservation"); n != 0 {
		t.Fatalf("a paid order ran %d compensations", n)
	}
}

func TestPayAfterCancelIsRejected(t *testing.T) {
	env, s := newEnv(t, nil)
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdateCancel, wantState(t, domain.StatusCancelled), CancelRequest{})
		update(t, env, UpdatePay, wantRejected(t, domain.StatusCancelled))
	}, time.Minute)
	if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusCancelled {
		t.Fatalf("status = %s, want CANCELLED", st.Status)
	}
	if s.ran("MarkPaid") != 0 {
		t.Fatal("a rejected pay was recorded")
	}
}

// Before VersionDeadline a pay that arrives while the order is being
// placed is refused as PENDING; from it on, it is accepted and takes effect
// once the order awaits payment (a Reset re-delivers accepted updates to a
// run that starts by placing the order).
func TestPayBeforeTheOrderIsPlaced(t *testing.T) {
	for _, v := range []workflow.Version{VersionLeanSaga, VersionDeadline} {
		t.Run(fmt.Sprint("version ", v), func(t *testing.T) {
			var env *testsuite.TestWorkflowEnvironment
			var sent, answered bool
			early := wantRejected(t, domain.StatusPending)
			if v >= VersionDeadline {
				early = wantState(t, domain.StatusPaid)
			}
			env, s := newEnv(t, map[string]step{"PlaceOrder": func(context.Context) error {
				if !sent {
					// Fail once: the pay arrives while the retry waits.
					sent = true
					env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, seen(&answered, early)) }, 0)
					return errors.New("connection reset")
				}
				return nil
			}})
			env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(v)
			if v < VersionDeadline {
				env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
			}
			if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusPaid {
				t.Fatalf("status = %s, want PAID", st.Status)
			}
			if !answered {
				t.Fatal("the early pay was never answered")
			}
			if n := s.ran("MarkPaid"); n != 1 {
				t.Fatalf("MarkPaid ran %d times, want 1", n)
			}
		})
	}
}

// A pay decided while the order is being placed (a Reset re-delivers an
// accepted pay to a run that places the order again), then the Web UI's
// Cancel while the placing still retries: the payment stands, the order is
// placed and paid, nothing compensated (VersionPaidWhilePlacing; before
// it, the order ended CANCELLED).
func TestCancelWhilePlacingKeepsADecidedPayment(t *testing.T) {
	for _, v := range []workflow.Version{VersionDeadline, VersionPaidWhilePlacing} {
		t.Run(fmt.Sprint("version ", v), func(t *testing.T) {
			var env *testsuite.TestWorkflowEnvironment
			// Atomic: the cancelled attempt and the one on the disconnected
			// context can run at once.
			var attempts atomic.Int32
			env, s := newEnv(t, map[string]step{"PlaceOrder": func(context.Context) error {
				n := attempts.Add(1)
				if n == 1 {
					env.RegisterDelayedCallback(func() {
						update(t, env, UpdatePay, func(*testing.T, outcome) {})
						env.RegisterDelayedCallback(env.CancelWorkflow, 0)
					}, 0)
				}
				if n < 3 {
					return errors.New("connection reset")
				}
				return nil
			}})
			env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(v)
			env.ExecuteWorkflow(OrderWorkflow, OrderInput{Order: testRef})
			var st OrderState
			_ = env.GetWorkflowResult(&st)
			want := domain.StatusPaid
			if v < VersionPaidWhilePlacing {
				want = domain.StatusCancelled // as workflows started before it still end
			}
			if st.Status != want {
				t.Fatalf("status = %s, want %s", st.Status, want)
			}
			if want == domain.StatusPaid && (s.ran("MarkPaid") != 1 || s.ran("RestoreStock")+s.ran("ReleaseReservation") != 0) {
				t.Fatalf("MarkPaid ran %d times, compensations %d; want 1 and 0", s.ran("MarkPaid"), s.ran("RestoreStock")+s.ran("ReleaseReservation"))
			}
		})
	}
}

// An operator cancelling the workflow right after a payment was accepted
// does not undo it: the payment is recorded and nothing is compensated.
func TestOperatorCancelAfterPayKeepsThePayment(t *testing.T) {
	var env *testsuite.TestWorkflowEnvironment
	env, s := newEnv(t, map[string]step{"MarkPaid": func(context.Context) error {
		env.CancelWorkflow()
		return nil
	}})
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
	env.ExecuteWorkflow(OrderWorkflow, OrderInput{Order: testRef})
	var st OrderState
	if err := env.GetWorkflowResult(&st); err != nil || st.Status != domain.StatusPaid {
		t.Fatalf("result = %+v, %v; want PAID", st, err)
	}
	if n := s.ran("RestoreStock") + s.ran("ReleaseReservation") + s.ran("FinishOrder"); n != 0 {
		t.Fatalf("a paid order ran %d compensation steps", n)
	}
	equal(t, "notified", s.notified, []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid})
}

// An ending that finds the row already PAID keeps the sale: no restore, no
// release, and the buyer is told PAID.
func TestEndingNeverCompensatesAPaidRow(t *testing.T) {
	env, s := newEnv(t, nil)
	s.rowStatus = domain.StatusPaid
	st := run(t, env, OrderInput{Order: testRef, PaymentTimeout: time.Minute})
	if st.Status != domain.StatusPaid {
		t.Fatalf("status = %s, want PAID", st.Status)
	}
	equal(t, "calls", s.calls, []string{"PlaceOrder", "FinishOrder"})
}

// A deduction cancelled in flight may still commit, so its restore runs
// in the ending even though PlaceOrder never reported success.
func TestCancelledDeductionIsStillRestored(t *testing.T) {
	env, s := newEnv(t, map[string]step{"PlaceOrder": func(context.Context) error { return temporal.NewCanceledError() }})
	st := run(t, env, OrderInput{Order: testRef})
	if st.Status != domain.StatusCancelled {
		t.Fatalf("status = %s (%s), want CANCELLED", st.Status, st.Reason)
	}
	equal(t, "calls", s.calls, []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"})
}

// Pay and cancel sent together: exactly one decides, the other is refused
// with the status the first chose.
func TestPayAndCancelTogetherDecideOnce(t *testing.T) {
	env, s := newEnv(t, nil)
	var payOK, cancelOK, refused int
	count := func(ok *int) expect {
		return func(t *testing.T, o outcome) {
			switch {
			case o.accepted && o.err == nil:
				*ok++
			case o.rejected != nil:
				refused++
			default:
				t.Errorf("unexpected outcome %+v", o)
			}
		}
	}
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, count(&payOK))
		update(t, env, UpdateCancel, count(&cancelOK), CancelRequest{})
	}, time.Minute)
	st := run(t, env, OrderInput{Order: testRef})
	if payOK+cancelOK != 1 || refused != 1 {
		t.Fatalf("pay ok %d, cancel ok %d, refused %d; want one decision and one refusal", payOK, cancelOK, refused)
	}
	if (payOK == 1) != (st.Status == domain.StatusPaid) || (s.ran("MarkPaid") == 1) != (payOK == 1) {
		t.Fatalf("final %s does not match the accepted update (pay ok %d)", st.Status, payOK)
	}
}

// A pay that reaches the workflow at the payment deadline, in the same
// workflow task as the timer's firing, decides nothing: the deadline has
// passed, so the timer decides (VersionDeadline). The test suite fires the
// timer first, so the rule itself is checked here; the interleaving test
// meets the server's ordering.
func TestPastTheDeadlineNothingIsDecidedByAnUpdate(t *testing.T) {
	deadline := time.Date(2026, 11, 25, 0, 15, 0, 0, time.UTC)
	o := &order{deadline: deadline}
	for _, c := range []struct {
		strict bool
		now    time.Time
		past   bool
	}{
		{true, deadline.Add(-time.Millisecond), false},
		{true, deadline, true},
		{true, deadline.Add(time.Second), true},
		{false, deadline.Add(time.Second), false}, // started before VersionDeadline: as it was
	} {
		o.strictDeadline = c.strict
		if got := o.pastDeadline(c.now); got != c.past {
			t.Errorf("past the deadline at %s (strict %v) = %v, want %v", c.now.Sub(deadline), c.strict, got, c.past)
		}
	}
	if (&order{era: era{strictDeadline: true}}).pastDeadline(deadline) {
		t.Error("an order that awaits no payment yet has no deadline")
	}
}

// A pay that reaches the workflow at the payment deadline, in the same
// workflow task as the timer's firing, loses to the timer: the deadline
// has passed when the pay is looked at (VersionDeadline).
// A pay in the workflow task where the payment timer fires loses to it. It
// is refused before the expiry is written, so the refusal names the row's
// status, AWAITING_PAYMENT, not EXPIRED (a Reset now would give the order a
// new payment window: nothing re-delivers a fired timer); the api then
// reads the row for the ending.
func TestPayAtTheDeadlineLosesToTheTimer(t *testing.T) {
	env, s := newEnv(t, nil)
	var answered bool
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdatePay, seen(&answered, wantRejected(t, domain.StatusAwaitingPayment)))
	}, 10*time.Minute)
	st := run(t, env, OrderInput{Order: testRef, PaymentTimeout: 10 * time.Minute})
	if st.Status != domain.StatusExpired || s.ran("MarkPaid") != 0 {
		t.Fatalf("status = %s, MarkPaid ran %d times; want EXPIRED, 0", st.Status, s.ran("MarkPaid"))
	}
	if !answered {
		t.Fatal("the pay was never answered")
	}
}
