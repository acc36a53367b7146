package workflows

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

var testRef = domain.OrderRef{OrderID: 42, SaleID: 7, UserID: "u1", AmountCents: 1999}

// testPaidAt is when the fake MarkPaid says the row was paid.
var testPaidAt = time.Date(2026, 11, 27, 16, 0, 0, 123456000, time.UTC)

// saga records which steps ran, in order, and what was notified. A step
// is FinishOrder, RestoreStock or ReleaseReservation whether it ran as its
// own activity or inside EndOrder (VersionOneStepEnd); activities are the
// activities that ran.
type saga struct {
	mu         sync.Mutex
	calls      []string
	activities []string
	notified   []domain.Status
	notes      []activities.NotifyInput // what Notify was given
	finished   []domain.Status
	// rowStatus, if set, is the status FinishOrder finds the row in.
	rowStatus domain.Status
	// ref is the order the activities expect (testRef).
	ref domain.OrderRef
}

func (s *saga) record(ctx context.Context, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
	if activity.GetInfo(ctx).IsLocalActivity {
		name += " (local)"
	}
	s.activities = append(s.activities, name)
}

// step records a step that ran inside another activity.
func (s *saga) step(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
}

func (s *saga) ran(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c == name {
			n++
		}
	}
	return n
}

// step lets a test replace one activity's behaviour.
type step func(ctx context.Context) error

func ok(context.Context) error { return nil }

// newEnv returns a test environment whose activities succeed unless
// overridden in fail.
func newEnv(t *testing.T, fail map[string]step) (*testsuite.TestWorkflowEnvironment, *saga) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(OrderWorkflow)
	acts := &activities.Activities{}
	env.RegisterActivity(acts)
	s := &saga{ref: testRef}
	behaviour := func(name string) step {
		if f, ok2 := fail[name]; ok2 {
			return f
		}
		return ok
	}
	env.OnActivity("MarkPaid", mock.Anything, mock.Anything).Return(func(ctx context.Context, ref domain.OrderRef) (time.Time, error) {
		s.record(ctx, "MarkPaid")
		if ref != s.ref {
			return time.Time{}, errors.New("wrong order ref")
		}
		if err := behaviour("MarkPaid")(ctx); err != nil {
			return time.Time{}, err
		}
		return testPaidAt, nil
	})
	for _, name := range []string{"PlaceOrder", "DeductStock", "RestoreStock", "CreateOrder", "ReleaseReservation"} {
		env.OnActivity(name, mock.Anything, mock.Anything).Return(func(ctx context.Context, ref domain.OrderRef) error {
			s.record(ctx, name)
			if ref != s.ref {
				return errors.New("wrong order ref")
			}
			err := behaviour(name)(ctx)
			if err == nil && name == "PlaceOrder" {
				// The real PlaceOrder tells the buyer itself.
				s.mu.Lock()
				s.notified = append(s.notified, domain.StatusAwaitingPayment)
				s.mu.Unlock()
			}
			return err
		})
	}
	env.OnActivity("FinishOrder", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.FinishInput) (domain.Status, error) {
		s.record(ctx, "FinishOrder")
		if err := behaviour("FinishOrder")(ctx); err != nil {
			return "", err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.finished = append(s.finished, in.Status)
		return cmp.Or(s.rowStatus, in.Status), nil
	})
	// EndOrder's steps, each with the behaviour a test gives that step.
	env.OnActivity("EndOrder", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.FinishInput) (domain.Status, error) {
		name := "EndOrder"
		if activity.GetInfo(ctx).IsLocalActivity {
			name += " (local)"
		}
		s.mu.Lock()
		s.activities = append(s.activities, name)
		s.mu.Unlock()
		if err := behaviour("EndOrder")(ctx); err != nil {
			return "", err // before any step: the database refused it
		}
		s.step("FinishOrder")
		if err := behaviour("FinishOrder")(ctx); err != nil {
			return "", err
		}
		s.mu.Lock()
		s.finished = append(s.finished, in.Status)
		final := cmp.Or(s.rowStatus, in.Status)
		s.mu.Unlock()
		if final == domain.StatusPaid {
			return final, nil
		}
		for _, name := range []string{"RestoreStock", "ReleaseReservation"} {
			s.step(name)
			if err := behaviour(name)(ctx); err != nil {
				return "", err
			}
		}
		return final, nil
	})
	env.OnActivity("Notify", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.NotifyInput) error {
		s.mu.Lock()
		s.notified = append(s.notified, in.Status)
		s.notes = append(s.notes, in)
		s.mu.Unlock()
		return behaviour("Notify")(ctx)
	})
	return env, s
}

func run(t *testing.T, env *testsuite.TestWorkflowEnvironment, in OrderInput) OrderState {
	t.Helper()
	env.ExecuteWorkflow(OrderWorkflow, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var st OrderState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

func nonRetryable(kind string) step {
	return func(context.Context) error {
		return temporal.NewNonRetryableApplicationError("business failure", kind, nil)
	}
}

func TestOrderPaid(t *testing.T) {
	env, s := newEnv(t, nil)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		var st OrderState
		if err := v.Get(&st); err != nil || st.Status != domain.StatusAwaitingPayment {
			t.Errorf("status before paying = %+v, %v; want AWAITING_PAYMENT", st, err)
		}
		update(t, env, UpdatePay, wantState(t, domain.StatusPaid))
	}, time.Minute)
	st := run(t, env, OrderInput{Order: testRef})
	if st.Status != domain.StatusPaid {
		t.Fatalf("status = %s, want PAID", st.Status)
	}
	equal(t, "calls", s.calls, []string{"PlaceOrder", "MarkPaid"})
	equal(t, "notified", s.notified, []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid})
}

func TestOrderUnhappyEndings(t *testing.T) {
	cases := []struct {
		name     string
		fail     map[string]step
		update   string // sent one minute in, if set
		cancel   bool   // cancel the workflow one minute in
		want     domain.Status
		calls    []string
		notified []domain.Status
	}{
		{
			name:     "deduct stock fails",
			fail:     map[string]step{"PlaceOrder": nonRetryable(activities.ErrTypeOutOfStock)},
			want:     domain.StatusFailed,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusFailed},
		},
		{
			name:     "sale cancelled before the deduction",
			fail:     map[string]step{"PlaceOrder": nonRetryable(activities.ErrTypeSaleCancelled)},
			want:     domain.StatusCancelled,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusCancelled},
		},
		{
			name:     "create order fails",
			fail:     map[string]step{"PlaceOrder": nonRetryable(activities.ErrTypeInvalidOrder)},
			want:     domain.StatusFailed,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusFailed},
		},
		{
			name:     "payment timeout",
			want:     domain.StatusExpired,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusAwaitingPayment, domain.StatusExpired},
		},
		{
			name:     "buyer cancels",
			update:   UpdateCancel,
			want:     domain.StatusCancelled,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusAwaitingPayment, domain.StatusCancelled},
		},
		{
			name:     "workflow cancelled",
			cancel:   true,
			want:     domain.StatusCancelled,
			calls:    []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"},
			notified: []domain.Status{domain.StatusAwaitingPayment, domain.StatusCancelled},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, s := newEnv(t, tc.fail)
			if tc.update != "" {
				env.RegisterDelayedCallback(func() { update(t, env, tc.update, wantState(t, tc.want), CancelRequest{}) }, time.Minute)
			}
			if tc.cancel {
				env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
			}
			st := run(t, env, OrderInput{Order: testRef, PaymentTimeout: 10 * time.Minute})
			if st.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s", st.Status, st.Reason, tc.want)
			}
			if st.Reason == "" {
				t.Error("an unhappy ending must say why")
			}
			equal(t, "calls", s.calls, tc.calls)
			equal(t, "notified", s.notified, tc.notified)
			equal(t, "finished", s.finished, []domain.Status{tc.want})
		})
	}
}

func TestPaymentTimeoutDefault(t *testing.T) {
	var env *testsuite.TestWorkflowEnvironment
	var expiredAt time.Time
	env, _ = newEnv(t, map[string]step{"FinishOrder": func(context.Context) error {
		expiredAt = env.Now()
		return nil
	}})
	start := env.Now()
	st := run(t, env, OrderInput{Order: testRef})
	if st.Status != domain.StatusExpired {
		t.Fatalf("status = %s, want EXPIRED", st.Status)
	}
	if d := expiredAt.Sub(start); d < DefaultPaymentTimeout {
		t.Fatalf("expired after %s, want at least %s", d, DefaultPaymentTimeout)
	}
}

func TestCompensationRetriesUntilItSucceeds(t *testing.T) {
	failures := 0
	env, s := newEnv(t, map[string]step{"RestoreStock": func(context.Context) error {
		if failures < 2 {
			failures++
			return errors.New("postgres is down")
		}
		return nil
	}})
	env.RegisterDelayedCallback(func() {
		update(t, env, UpdateCancel, wantState(t, domain.StatusCancelled), CancelRequest{Reason: "changed my mind"})
	}, time.Minute)
	st := run(t, env, OrderInput{Order: testRef})
	if st.Status != domain.StatusCancelled || st.Reason != "changed my mind" {
		t.Fatalf("state = %+v, want CANCELLED with the buyer's reason", st)
	}
	if n := s.ran("RestoreStock"); n != 3 {
		t.Fatalf("RestoreStock ran %d times, want 3 (two failures, one success)", n)
	}
	if n := s.ran("ReleaseReservation"); n != 1 {
		t.Fatalf("ReleaseReservation ran %d times, want 1", n)
	}
}

func TestInfrastructureErrorsAreRetried(t *testing.T) {
	failures := 0
	env, s := newEnv(t, map[string]step{"PlaceOrder": func(context.Context) error {
		if failures < 3 {
			failures++
			return errors.New("connection refused")
		}
		return nil
	}})
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
	st := run(t, env, OrderInput{Order: testRef})
	if st.Status != domain.StatusPaid {
		t.Fatalf("status = %s (%s), want PAID", st.Status, st.Reason)
	}
	if n := s.ran("PlaceOrder"); n != 4 {
		t.Fatalf("PlaceOrder ran %d times, want 4", n)
	}
	if n := s.ran("RestoreStock"); n != 0 {
		t.Fatalf("RestoreStock ran %d times on a paid order", n)
	}
}

func TestNotifyFailureDoesNotFailTheOrder(t *testing.T) {
	env, _ := newEnv(t, map[string]step{"Notify": func(context.Context) error { return errors.New("redis down") }})
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
	if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusPaid {
		t.Fatalf("status = %s, want PAID", st.Status)
	}
}

// Workflows started before VersionLeanSaga keep their two forward steps,
// their memo upserts and their Notify at AWAITING_PAYMENT (their recorded
// histories replay in replay_test.go).
func TestOrderBeforeLeanSaga(t *testing.T) {
	env, s := newEnv(t, nil)
	env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(workflow.Version(1))
	env.RegisterDelayedCallback(func() { update(t, env, UpdatePay, wantState(t, domain.StatusPaid)) }, time.Minute)
	if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusPaid {
		t.Fatalf("status = %s, want PAID", st.Status)
	}
	equal(t, "calls", s.calls, []string{"DeductStock", "CreateOrder", "MarkPaid"})
	equal(t, "notified", s.notified, []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid})
}

// A run reset to before its order's end meets the ended row: PlaceOrder is
// refused (store.PlaceOrder's StateError) and the run ends with the row's
// status, not the FAILED it would have chosen, and never awaits payment.
func TestResetRunOfAnEndedOrderEndsAsTheRow(t *testing.T) {
	for _, row := range []domain.Status{domain.StatusCancelled, domain.StatusExpired, domain.StatusPaid} {
		t.Run(string(row), func(t *testing.T) {
			env, s := newEnv(t, map[string]step{"PlaceOrder": nonRetryable(activities.ErrTypeInvalidOrder)})
			s.rowStatus = row
			st := run(t, env, OrderInput{Order: testRef})
			if st.Status != row {
				t.Fatalf("status = %s (%s), want the row's %s", st.Status, st.Reason, row)
			}
			equal(t, "notified", s.notified, []domain.Status{row})
			if row == domain.StatusPaid {
				equal(t, "calls", s.calls, []string{"PlaceOrder", "FinishOrder"})
			}
		})
	}
}

// failOnce is a step that fails its first run, as a database that refuses
// one transaction does, and succeeds after.
func failOnce() step {
	var failed atomic.Bool
	return func(context.Context) error {
		if failed.CompareAndSwap(false, true) {
			return errors.New("the database is down")
		}
		return nil
	}
}

// From VersionOneStepEnd an ending is one activity, EndOrder, where it
// was three; workflows started before keep the three. From VersionLocalEnd
// EndOrder runs first as a local activity in the deciding workflow task;
// if that attempt fails, the ordinary activity of version 5 ends the
// order, and the steps still run once.
func TestEndingActivitiesByVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    workflow.Version
		fail map[string]step
		want []string
	}{
		{"version 4", VersionPaidWhilePlacing, nil, []string{"PlaceOrder (local)", "FinishOrder", "RestoreStock", "ReleaseReservation"}},
		{"version 5", VersionOneStepEnd, nil, []string{"PlaceOrder (local)", "EndOrder"}},
		{"version 7", VersionPayments, nil, []string{"PlaceOrder (local)", "EndOrder"}},
		{"version 8", VersionLocalEnd, nil, []string{"PlaceOrder (local)", "EndOrder (local)"}},
		{"version 8, the local attempt fails", VersionLocalEnd, map[string]step{"EndOrder": failOnce()},
			[]string{"PlaceOrder (local)", "EndOrder (local)", "EndOrder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, s := newEnv(t, tc.fail)
			env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(tc.v)
			env.RegisterDelayedCallback(func() { update(t, env, UpdateCancel, wantState(t, domain.StatusCancelled), CancelRequest{}) }, time.Minute)
			if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusCancelled {
				t.Fatalf("status = %s, want CANCELLED", st.Status)
			}
			equal(t, "activities", s.activities, tc.want)
			equal(t, "steps", s.calls, []string{"PlaceOrder", "FinishOrder", "RestoreStock", "ReleaseReservation"})
		})
	}
}

// Version 6 records a payment with one local MarkPaid in the deciding
// workflow task; if that attempt fails, the ordinary activity of earlier
// versions records it. Version 5 runs the ordinary activity only. Either
// way the pay's answer says when the row was paid, as MarkPaid said.
func TestPayActivitiesByVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    workflow.Version
		fail map[string]step
		want []string
	}{
		{"version 5", VersionOneStepEnd, nil, []string{"PlaceOrder (local)", "MarkPaid"}},
		{"version 6", VersionLocalPay, nil, []string{"PlaceOrder (local)", "MarkPaid (local)"}},
		{"version 6, the local attempt fails", VersionLocalPay, map[string]step{"MarkPaid": failOnce()}, []string{"PlaceOrder (local)", "MarkPaid (local)", "MarkPaid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, s := newEnv(t, tc.fail)
			env.OnGetVersion(VersionUpdates, workflow.DefaultVersion, latestVersion).Return(tc.v)
			var answer OrderState
			env.RegisterDelayedCallback(func() {
				update(t, env, UpdatePay, func(t *testing.T, o outcome) { wantState(t, domain.StatusPaid)(t, o); answer = o.state })
			}, time.Minute)
			if st := run(t, env, OrderInput{Order: testRef}); st.Status != domain.StatusPaid {
				t.Fatalf("status = %s, want PAID", st.Status)
			}
			if answer.PaidAt == nil || !answer.PaidAt.Equal(testPaidAt) {
				t.Errorf("the pay's answer says paid at %v, want MarkPaid's %v", answer.PaidAt, testPaidAt)
			}
			equal(t, "activities", s.activities, tc.want)
			equal(t, "notified", s.notified, []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid})
		})
	}
}
