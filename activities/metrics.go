package activities

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
)

// Metrics are the saga's Prometheus series. A nil *Metrics records nothing.
type Metrics struct {
	steps         *prometheus.HistogramVec
	compensations *prometheus.CounterVec
	transitions   *prometheus.CounterVec
	// The payments at a provider (docs/design.md §4.10): attempts started,
	// captures that paid their order, and refunds of captures the order
	// did not keep, by RefundClasses. A decline is known to the workflow
	// only: workflows.MetricPaymentsDeclined.
	paymentsStarted, paymentsCaptured prometheus.Counter
	refundedLate                      *prometheus.CounterVec
}

// The reason classes of seckill_payments_refunded_late_total: why a
// capture was not kept. RefundInput.Class carries one.
const (
	// RefundLate: captured after the order had ended (or its workflow had
	// closed) without it.
	RefundLate = "late"
	// RefundSecondCapture: the order was paid by another payment.
	RefundSecondCapture = "second_capture"
	// RefundWrongAmount: captured another amount or currency than the
	// order's.
	RefundWrongAmount = "wrong_amount"
	// RefundNotStarted: a payment of the order that its workflow did not
	// start.
	RefundNotStarted = "not_started"
	// RefundUnknownOrder: a capture naming an order the database does not
	// know (found by the reconciliation of the provider's records).
	RefundUnknownOrder = "unknown_order"
)

// RefundClasses are the reason classes, each exported from the start.
var RefundClasses = []string{RefundLate, RefundSecondCapture, RefundWrongAmount, RefundNotStarted, RefundUnknownOrder}

// NewMetrics registers the saga's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_saga_step_seconds",
			Help:    "Duration of each saga step attempt, by step and outcome (ok or error).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"step", "outcome"}),
		compensations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_compensations_total",
			Help: "Compensations that gave something back: a unit to the database stock (RestoreStock) or to Redis (ReleaseReservation), or an order ended (FinishOrder).",
		}, []string{"step"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_order_transitions_total",
			Help: "Orders the saga moved into a status, by status: AWAITING_PAYMENT (the order written), PAID, or the ending without a sale (CANCELLED, EXPIRED, FAILED).",
		}, []string{"status"}),
		paymentsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_payments_started_total",
			Help: "Payment attempts created at the payment provider (a buyer's pay; a declined payment's retry is another).",
		}),
		paymentsCaptured: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_payments_captured_total",
			Help: "Captures at the payment provider that paid their order (the order recorded PAID by the payment).",
		}),
		refundedLate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payments_refunded_late_total",
			Help: "Captures the order did not keep, refunded at the payment provider, by reason: late (after the order ended), second_capture, wrong_amount, not_started (a payment the order did not start), unknown_order (found by the reconciliation).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.steps, m.compensations, m.transitions, m.paymentsStarted, m.paymentsCaptured, m.refundedLate)
	// Exported at zero from the start: a first late refund is an increase
	// an alert sees, not a series appearing out of nowhere.
	for _, class := range RefundClasses {
		m.refundedLate.WithLabelValues(class)
	}
	return m
}

func (m *Metrics) paymentStarted() {
	if m != nil {
		m.paymentsStarted.Inc()
	}
}

func (m *Metrics) paymentCaptured() {
	if m != nil {
		m.paymentsCaptured.Inc()
	}
}

// refunded counts a refund of a capture not kept. A refund without a class
// (one an operator asked for) is not a late one.
func (m *Metrics) refunded(class string) {
	if m != nil && class != "" {
		m.refundedLate.WithLabelValues(class).Inc()
	}
}

func (m *Metrics) observe(step string, start time.Time, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.steps.WithLabelValues(step, outcome).Observe(time.Since(start).Seconds())
}

func (m *Metrics) compensated(step string) {
	if m != nil {
		m.compensations.WithLabelValues(step).Inc()
	}
}

// entered counts an order moving into status. A step retried after its
// answer was lost counts again, so this is a rate to watch, not a ledger:
// the orders table is the ledger.
func (m *Metrics) entered(status domain.Status) {
	if m != nil {
		m.transitions.WithLabelValues(string(status)).Inc()
	}
}
