package workflows

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/store"
)

// refundCalls records what an OrderRefundWorkflow asked of its activities.
type refundCalls struct {
	mu       sync.Mutex
	refunds  []activities.RefundInput
	recorded []activities.RefundOrderInput
	notified []activities.NotifyInput
	upserts  []string
}

// newRefundEnv runs OrderRefundWorkflow against fake activities: the row
// reads as row, the provider answers its refunds with refund (failing the
// first failures calls with payment.ErrUnavailable), and the row records
// the refund as record says.
func newRefundEnv(t *testing.T, row activities.OrderPayment, refund func(n int) error, record func(in activities.RefundOrderInput) store.RefundRecord) (*testsuite.TestWorkflowEnvironment, *refundCalls) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(OrderRefundWorkflow)
	env.RegisterActivity(&activities.Activities{})
	c := &refundCalls{}
	env.OnActivity("ReadOrderPayment", mock.Anything, mock.Anything).Return(func(ctx context.Context, id int64) (activities.OrderPayment, error) {
		return row, nil
	})
	env.OnActivity("RefundPaidPayment", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.RefundInput) (payment.Refund, error) {
		c.mu.Lock()
		c.refunds = append(c.refunds, in)
		n := len(c.refunds)
		c.mu.Unlock()
		if err := refund(n); err != nil {
			return payment.Refund{}, err
		}
		return payment.Refund{Provider: in.Provider, ID: "re-" + in.PaymentID, PaymentID: in.PaymentID, State: payment.RefundSucceeded}, nil
	})
	env.OnActivity("RefundOrder", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.RefundOrderInput) (store.RefundRecord, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.recorded = append(c.recorded, in)
		return record(in), nil
	})
	env.OnActivity("Notify", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.NotifyInput) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.notified = append(c.notified, in)
		return nil
	})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		status, _ := args.Get(0).(temporal.SearchAttributes).GetKeyword(OrderStatusKey)
		c.mu.Lock()
		c.upserts = append(c.upserts, status)
		c.mu.Unlock()
	}).Return(nil)
	return env, c
}

// restocks records the refund as the store does on an open sale: restocked
// when asked.
func restocks(in activities.RefundOrderInput) store.RefundRecord {
	if in.Restock {
		return store.RefundRecord{Status: domain.StatusRefundedRestocked, Reason: store.RefundRestockedReason, Recorded: true, Restored: true}
	}
	return store.RefundRecord{Status: domain.StatusRefunded, Reason: store.RefundNotAskedReason, Recorded: true}
}

func noFailure(int) error { return nil }

var paidRow = activities.OrderPayment{Ref: testRef, Status: domain.StatusPaid, Provider: "fake", PaymentID: "pay-1"}

// An operator's refund of an order paid at a provider: the payment that
// paid it is refunded there once (through a provider that fails twice
// first), then the row records the provider's refund with the restock
// asked for, the refund's status is upserted and the buyer is told.
func TestRefundPaidOrderAtItsProvider(t *testing.T) {
	unavailable := func(n int) error {
		if n <= 2 {
			return payment.ErrUnavailable
		}
		return nil
	}
	env, c := newRefundEnv(t, paidRow, unavailable, restocks)
	env.ExecuteWorkflow(OrderRefundWorkflow, RefundRequest{OrderID: testRef.OrderID, Reason: "lost parcel", Restock: true, By: "admin"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow completed %v, err %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var out RefundOutcome
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	want := RefundOutcome{Status: domain.StatusRefundedRestocked, Reason: store.RefundRestockedReason, PaymentID: "pay-1", RefundID: "re-pay-1"}
	if out != want {
		t.Errorf("outcome = %+v, want %+v", out, want)
	}
	if len(c.refunds) != 3 || c.refunds[2].PaymentID != "pay-1" || c.refunds[2].Provider != "fake" || c.refunds[2].Reason != "lost parcel" {
		t.Errorf("provider refunds = %+v, want pay-1 asked until taken (3 calls)", c.refunds)
	}
	if len(c.recorded) != 1 || c.recorded[0] != (activities.RefundOrderInput{Ref: testRef, RefundID: "re-pay-1", Reason: "lost parcel", Restock: true}) {
		t.Errorf("recorded = %+v, want the provider's refund with the restock, once", c.recorded)
	}
	if len(c.notified) != 1 || c.notified[0].Status != domain.StatusRefundedRestocked || c.notified[0].RefundedPayment != "pay-1" {
		t.Errorf("notified = %+v, want the buyer told of the refund of pay-1", c.notified)
	}
	if len(c.upserts) != 1 || c.upserts[0] != string(domain.StatusRefundedRestocked) {
		t.Errorf("upserts = %v, want [REFUNDED_RESTOCKED]", c.upserts)
	}
}

// The other branches: an order paid without a provider is recorded
// refunded with no provider call; a refunded order is answered as it is;
// an order that is not PAID, or whose refund the provider refuses, fails
// the run with nothing recorded.
func TestRefundBranches(t *testing.T) {
	rejected := func(int) error {
		return temporal.NewNonRetryableApplicationError("no", activities.ErrTypePaymentRejected, payment.ErrRejected)
	}
	for _, tc := range []struct {
		name      string
		row       activities.OrderPayment
		refund    func(int) error
		wantErr   string // the ApplicationError type, "" for success
		want      RefundOutcome
		refunds   int
		recorded  []activities.RefundOrderInput
		notifiedN int
	}{
		{name: "no provider", row: activities.OrderPayment{Ref: testRef, Status: domain.StatusPaid}, refund: noFailure,
			want:     RefundOutcome{Status: domain.StatusRefunded, Reason: store.RefundNotAskedReason},
			recorded: []activities.RefundOrderInput{{Ref: testRef, Reason: "r"}}, notifiedN: 1},
		{name: "refunded already", row: activities.OrderPayment{Ref: testRef, Status: domain.StatusRefunded, Provider: "fake", PaymentID: "pay-1", RefundID: "re-pay-1"},
			refund: noFailure, want: RefundOutcome{Status: domain.StatusRefunded, PaymentID: "pay-1", RefundID: "re-pay-1"}},
		{name: "not paid", row: activities.OrderPayment{Ref: testRef, Status: domain.StatusExpired}, refund: noFailure, wantErr: ErrTypeInvalidState},
		{name: "provider refuses", row: paidRow, refund: rejected, wantErr: activities.ErrTypePaymentRejected, refunds: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, c := newRefundEnv(t, tc.row, tc.refund, restocks)
			env.ExecuteWorkflow(OrderRefundWorkflow, RefundRequest{OrderID: testRef.OrderID, Reason: "r"})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			err := env.GetWorkflowError()
			var app *temporal.ApplicationError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("workflow error %v", err)
			case tc.wantErr != "" && !(errors.As(err, &app) && app.Type() == tc.wantErr):
				t.Fatalf("workflow error %v, want %s", err, tc.wantErr)
			case tc.wantErr == ErrTypeInvalidState:
				var status domain.Status
				if app.Details(&status) != nil || status != tc.row.Status {
					t.Errorf("refusal names status %q, want %s", status, tc.row.Status)
				}
			case tc.wantErr == "":
				var out RefundOutcome
				if err := env.GetWorkflowResult(&out); err != nil || out != tc.want {
					t.Errorf("outcome = %+v (%v), want %+v", out, err, tc.want)
				}
			}
			if len(c.refunds) != tc.refunds || len(c.recorded) != len(tc.recorded) || len(c.notified) != tc.notifiedN {
				t.Errorf("provider refunds %d, recorded %+v, notified %d; want %d, %+v, %d",
					len(c.refunds), c.recorded, len(c.notified), tc.refunds, tc.recorded, tc.notifiedN)
			}
			for i := range tc.recorded {
				if i < len(c.recorded) && c.recorded[i] != tc.recorded[i] {
					t.Errorf("recorded %+v, want %+v", c.recorded[i], tc.recorded[i])
				}
			}
		})
	}
}

// A Cancel of the refund's workflow (the Web UI) while the provider is
// refunding does not lose the refund: it is recorded all the same.
func TestRefundOutlivesTheWorkflowsCancellation(t *testing.T) {
	var env *testsuite.TestWorkflowEnvironment
	slow := func(n int) error {
		if n == 1 {
			env.CancelWorkflow()
			return payment.ErrUnavailable
		}
		return nil
	}
	env, c := newRefundEnv(t, paidRow, slow, restocks)
	env.ExecuteWorkflow(OrderRefundWorkflow, RefundRequest{OrderID: testRef.OrderID, Reason: "r"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if len(c.recorded) != 1 || c.recorded[0].RefundID != "re-pay-1" {
		t.Errorf("recorded = %+v after a cancellation mid-refund, want the refund recorded", c.recorded)
	}
}
