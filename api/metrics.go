package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the api's Prometheus series.
type metrics struct {
	purchases *prometheus.CounterVec
	admission prometheus.Histogram
	unfenced  prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_purchases_total",
			Help: "Purchase requests by outcome code (ACCEPTED or the error code).",
		}, []string{"code"}),
		admission: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_admission_seconds",
			Help:    "Time to answer a purchase request, from handler entry to answer.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5},
		}),
		unfenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_orderid_unfenced_total",
			Help: "Purchases answered 503 because this instance could not confirm its order-id node lease (it does not mint ids another instance may mint).",
		}),
	}
	reg.MustRegister(m.purchases, m.admission, m.unfenced,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "seckill_websocket_connections", Help: "Open result websockets on this instance.",
		}, func() float64 { return float64(s.hub.Connections()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "seckill_exports_running", Help: "Exports of a sale's orders streaming on this instance (at most --max-exports).",
		}, func() float64 { return float64(len(s.exports)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "seckill_relay_backlog", Help: "Admitted orders whose workflow has not started yet, over all sales (read from Redis at scrape).",
		}, s.backlog),
	)
	return m
}

func (m *metrics) observePurchase(err error, d time.Duration) {
	m.admission.Observe(d.Seconds())
	code := "ACCEPTED"
	if err != nil {
		code = problemFor(err).Code
	}
	m.purchases.WithLabelValues(code).Inc()
}

// backlog sums the intent streams' lengths; -1 if Redis does not answer.
func (s *Server) backlog() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := s.deps.Stock.Backlog(ctx)
	if err != nil {
		return -1
	}
	return float64(n)
}
