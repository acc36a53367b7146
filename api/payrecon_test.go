package api_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/workflows"
)

// The reconciliation of the provider's records (docs/design.md §4.10):
// with every notification lost on the way, a capture naming an order
// seckill never wrote and a second capture of a paid order are found and
// refunded, once, while the capture that paid the order is left alone and
// a capture younger than the settle margin is left to its order. The
// payments' counters count each once.
func TestReconciliationRefundsCapturesNoOrderKept(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := start(t, options{builtinPay: true, metrics: reg})
	sale := s.createShortSale(5, 600)
	ctx := context.Background()

	// Paid the ordinary way, and a decline on the way for bob.
	paid := s.purchase(sale.ID, "ann")
	declined := s.purchase(sale.ID, "bob")
	s.waitStatus(paid, "ann", domain.StatusAwaitingPayment)
	s.waitStatus(declined, "bob", domain.StatusAwaitingPayment)
	kept := s.startPayment(paid, "ann")
	s.submitCheckout(kept.RedirectURL, "pay")
	s.submitCheckout(s.startPayment(declined, "bob").RedirectURL, "decline")
	s.waitStatus(paid, "ann", domain.StatusPaid)
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := counter(t, reg, workflows.MetricPaymentsDeclined, ""); got != 1 {
			return fmt.Errorf("%s = %v, want 1", workflows.MetricPaymentsDeclined, got)
		}
		return nil
	})

	// From here the provider's notifications are lost: only the
	// reconciliation can find these two captures.
	if err := s.payService.SetControls(builtin.Controls{NotifyHold: true}); err != nil {
		t.Fatal(err)
	}
	prov := s.payments[builtin.Name]
	capture := func(orderID int64, key string) payment.Payment {
		t.Helper()
		p, err := prov.Create(ctx, payment.CreateRequest{OrderID: orderID, SaleID: mustID(t, sale.ID), UserID: "mallory",
			Amount: payment.Money{Minor: 19900, Currency: sale.Currency}, Key: key, ReturnURL: s.url + "/",
			ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		s.submitCheckout(p.RedirectURL, "pay")
		if st := s.paymentState(p.ID); st != "captured" {
			t.Fatalf("payment %s is %s, want captured", p.ID, st)
		}
		return p
	}
	stray := capture(4242424242, "stray-1")        // an order seckill never wrote
	second := capture(mustID(t, paid), "second-1") // ann's order, paid already

	rc := (&reconcile.Reconciler{Store: s.store, Stock: s.stock, Temporal: s.tc, Providers: s.payments,
		SettleMargin: time.Hour}).WithMetrics(reg)
	// Younger than the margin: left to their orders.
	reps, err := rc.Payments(ctx)
	for _, r := range reps {
		if len(r.Settling) != 0 {
			err = errors.Join(err, fmt.Errorf("%s settling", r.Provider))
		}
	}
	if err != nil {
		t.Fatalf("pass inside the margin: %+v, %v; want nothing settled", reps, err)
	}
	for _, p := range []payment.Payment{stray, second} {
		if _, err := s.tc.DescribeWorkflowExecution(ctx, workflows.SettleWorkflowID(builtin.Name, p.ID), ""); !errors.As(err, new(*serviceerror.NotFound)) {
			t.Errorf("payment %s inside the margin: its settle workflow: %v, want none", p.ID, err)
		}
	}

	rc.SettleMargin = time.Nanosecond
	reps, err = rc.Payments(ctx)
	if err != nil || len(reps) != 1 {
		t.Fatalf("pass: %+v, %v", reps, err)
	}
	found := map[string]string{}
	for _, f := range reps[0].Settling {
		found[f.PaymentID] = f.Kind
	}
	if len(found) != 2 || found[stray.ID] != reconcile.FindUnknownOrder || found[second.ID] != reconcile.FindNotKept || reps[0].Kept != 1 {
		t.Fatalf("pass: %+v; want %s %s and %s %s settling, %s kept", reps[0], stray.ID, reconcile.FindUnknownOrder,
			second.ID, reconcile.FindNotKept, kept.ID)
	}
	for _, p := range []payment.Payment{stray, second} {
		var did workflows.Settlement
		if err := s.tc.GetWorkflow(ctx, workflows.SettleWorkflowID(builtin.Name, p.ID), "").Get(ctx, &did); err != nil || did != workflows.SettleRefunded {
			t.Fatalf("settle workflow of %s: %q, %v; want refunded", p.ID, did, err)
		}
		s.checkOneRefund(p.ID)
	}

	// Again: nothing more is started, nothing refunded twice.
	reps, err = rc.Payments(ctx)
	if err != nil || len(reps) != 1 || len(reps[0].Settling) != 0 || reps[0].Kept != 1 || reps[0].Refunded != 2 {
		t.Fatalf("second pass: %+v, %v; want nothing settling, 1 kept, 2 refunded", reps, err)
	}
	s.checkOneRefund(stray.ID)
	s.checkOneRefund(second.ID)

	// The capture that paid ann's order stands.
	if st := s.paymentState(kept.ID); st != "captured" {
		t.Errorf("the payment that paid the order is %s at the provider, want captured", st)
	}
	if o, _ := s.getOrder(paid, "ann"); o.Status != domain.StatusPaid || o.PaymentID != kept.ID {
		t.Errorf("ann's order: %s paid by %q, want PAID by %s", o.Status, o.PaymentID, kept.ID)
	}

	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"seckill_payments_started_total", "", 2},
		{"seckill_payments_captured_total", "", 1},
		{workflows.MetricPaymentsDeclined, "", 1},
		{"seckill_payments_refunded_late_total", "unknown_order", 1},
		{"seckill_payments_refunded_late_total", "second_capture", 1},
		{"seckill_payments_refunded_late_total", "late", 0},
		{"seckill_reconciler_payment_finds_total", "unknown_order", 1},
		{"seckill_reconciler_payment_finds_total", "not_kept", 1},
	} {
		if got := counter(t, reg, c.name, c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
}

// counter is the value of the counter name in reg, of the series whose one
// label has the value label ("" for a counter without labels).
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if (label == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s} in the registry", name, label)
	return 0
}
