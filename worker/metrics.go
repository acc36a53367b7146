package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/workflows"
)

// MetricsHandler is the metrics handler of a Temporal client whose worker
// runs seckill's workflows. The counters the workflows count through
// workflow.GetMetricsHandler (which counts nothing while a history is
// replayed, so each is counted once per thing it counts) become Prometheus
// counters of reg, without the SDK's tags, exported at zero from the
// start; every other metric (the SDK's own) goes to next.
func MetricsHandler(next client.MetricsHandler, reg prometheus.Registerer) client.MetricsHandler {
	declined := prometheus.NewCounter(prometheus.CounterOpts{
		Name: workflows.MetricPaymentsDeclined,
		Help: "Payment attempts the payment provider declined (the buyer may pay again, with another attempt), counted by the order's workflow.",
	})
	reg.MustRegister(declined)
	if next == nil {
		next = client.MetricsNopHandler
	}
	return metricsHandler{next: next, counters: map[string]prometheus.Counter{workflows.MetricPaymentsDeclined: declined}}
}

type metricsHandler struct {
	next     client.MetricsHandler
	counters map[string]prometheus.Counter
}

func (h metricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	return metricsHandler{next: h.next.WithTags(tags), counters: h.counters}
}

func (h metricsHandler) Counter(name string) client.MetricsCounter {
	if c, ok := h.counters[name]; ok {
		return promCounter{c}
	}
	return h.next.Counter(name)
}

func (h metricsHandler) Gauge(name string) client.MetricsGauge { return h.next.Gauge(name) }

func (h metricsHandler) Timer(name string) client.MetricsTimer { return h.next.Timer(name) }

// promCounter is a Prometheus counter as the SDK's: a negative increment,
// which a counter cannot take, is dropped.
type promCounter struct{ c prometheus.Counter }

func (p promCounter) Inc(n int64) {
	if n > 0 {
		p.c.Add(float64(n))
	}
}
