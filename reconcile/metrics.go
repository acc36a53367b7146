package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
)

// repairKinds are the kind labels of seckill_reconciler_repairs_total.
var repairKinds = []string{"rebuilt", "buyer_restored", "stale_released", "remaining_fixed"}

// WithMetrics registers the reconciler's series on reg and sets OnRepair,
// OnRetire, OnStranded and OnPaymentFind to count repairs by kind, retired
// sales, stranded orders ended and captures found no order kept.
func (rc *Reconciler) WithMetrics(reg prometheus.Registerer) *Reconciler {
	repairs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconciler_repairs_total",
		Help: "Redis/Postgres drift the reconciler repaired, by kind.",
	}, []string{"kind"})
	retired := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_sales_retired_total",
		Help: "Ended, drained sales whose keys the reconciler dropped from Redis.",
	})
	stranded := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconciler_stranded_orders_total",
		Help: "Orders whose workflow closed without ending them (an operator's Terminate) that the reconciler ended, by the status they ended in.",
	}, []string{"status"})
	lost := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reconciler_lost_admissions_total",
		Help: "Admitted orders (their buyers told 202) that Redis lost before any order row was written: found when a sale's Redis state was gone or rolled back (alert on any).",
	})
	recovered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reconciler_recovered_admissions_total",
		Help: "Lost admissions (counted in seckill_reconciler_lost_admissions_total) the reconciler admitted again under their order ids, so their orders are placed after all.",
	})
	finds := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconciler_payment_finds_total",
		Help: "Captures at a payment provider that no order kept, found by the reconciliation of the provider's records and handed to their PaymentSettleWorkflow to be refunded, by kind: unknown_order (no such order) or not_kept (the order ended without it). Each is a notification lost on the way.",
	}, []string{"kind"})
	reg.MustRegister(repairs, retired, stranded, lost, recovered, finds)
	// Every kind is exported from the start, at zero, so a first repair is
	// an increase an alert sees, not a series appearing out of nowhere.
	for _, kind := range repairKinds {
		repairs.WithLabelValues(kind)
	}
	for _, status := range []domain.Status{domain.StatusPaid, domain.StatusCancelled, domain.StatusExpired, domain.StatusFailed} {
		stranded.WithLabelValues(string(status))
	}
	rc.OnRepair = func(r Report) {
		if r.Rebuilt {
			repairs.WithLabelValues("rebuilt").Inc()
		}
		repairs.WithLabelValues("buyer_restored").Add(float64(r.BuyersRestored))
		repairs.WithLabelValues("stale_released").Add(float64(r.StaleReleased))
		if r.RemainingFixed {
			repairs.WithLabelValues("remaining_fixed").Inc()
		}
		lost.Add(float64(r.LostAdmissions))
		recovered.Add(float64(len(r.Recovered)))
	}
	for _, kind := range findKinds {
		finds.WithLabelValues(kind)
	}
	rc.OnRetire = func(int64) { retired.Inc() }
	rc.OnPaymentFind = func(f Find) { finds.WithLabelValues(f.Kind).Inc() }
	rc.OnStranded = func(e Ending) { stranded.WithLabelValues(string(e.Status)).Inc() }
	return rc
}
