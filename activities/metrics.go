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
}

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
	}
	reg.MustRegister(m.steps, m.compensations, m.transitions)
	return m
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
