package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// The verdict: the ratios between the phases' figures and the limits
// measured beside them, and the invariant checks.

// measureLimits measures the limits the run is compared with, on the quiet
// system before the sale: measured after it, they would compete with the
// sagas for the same cores. The engine goes first: the probe waits out
// the server work its workflows leave (visibility) before it answers.
func (c *target) measureLimits(ctx context.Context, r *Result, o Options, admin string, tokens []string, requests []int) error {
	if o.EngineWorkflows > 0 {
		var before cpuSample
		if o.CPU != nil {
			before = o.CPU.sample(ctx)
		}
		e, err := c.engineCeiling(ctx, o, admin)
		if err != nil {
			return fmt.Errorf("temporal engine ceiling: %w", err)
		}
		r.Engine = &e
		if o.CPU != nil {
			r.CPU.Engine = phase(before, o.CPU.sample(ctx), r.CPU.Unavailable)
		}
	}
	if o.Ceiling != nil {
		d, err := o.Ceiling(ctx, o.Users, o.Stock, o.Concurrency)
		if err != nil {
			return fmt.Errorf("redis ceiling: %w", err)
		}
		r.CeilingSeconds = d.Seconds()
	}
	if o.BareAPI != nil {
		l, err := measureHTTPLimit(ctx, o, tokens, requests)
		if err != nil {
			return fmt.Errorf("http limit: %w", err)
		}
		r.HTTPLimit = l
	}
	return nil
}

// ratios relates the run to the limits measured in it, and its CPU to
// the work done; a ratio with a side not measured is left 0.
func (r *Result) ratios() {
	div := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	r.AdmissionVsCeil = div(r.AdmissionSeconds, r.CeilingSeconds)
	if r.HTTPLimit != nil {
		r.AdmissionVsHTTP = div(r.AdmissionSeconds, r.HTTPLimit.Seconds)
		r.P99VsHTTP = div(r.Latency.P99, r.HTTPLimit.Latency.P99)
	}
	if r.Engine != nil && !r.AdmissionOnly {
		r.SagaVsEngine = div(r.OrdersPerSecond, r.Engine.WorkflowsPerSec)
	}
	if r.CPU == nil {
		return
	}
	if e := r.CPU.Engine; e != nil && r.Engine != nil {
		r.CPU.EngineMsPerWorkflow = 1000 * div(e.SystemSeconds, float64(r.Engine.Workflows))
	}
	if a := r.CPU.Admission; a != nil {
		r.CPU.AdmissionMsPerRequest = 1000 * div(a.SystemSeconds, float64(r.Requests))
		r.CPU.LoadGeneratorMsPerRequest = 1000 * div(a.LoadGeneratorSeconds, float64(r.Requests))
	}
	// Per order only when every order was created: otherwise the CPU
	// was spent on orders not all counted.
	if s := r.CPU.Saga; s != nil && r.AllCreated {
		r.CPU.SagaMsPerOrder = 1000 * div(s.SystemSeconds, float64(r.orders()))
	}
}

// check applies the invariants visible through the stats endpoint.
func (r *Result) check() {
	st := r.Stats
	violate := func(f string, a ...any) { r.Violations = append(r.Violations, fmt.Sprintf(f, a...)) }
	if st.live() > st.Stock {
		violate("oversold: %d live orders for %d units", st.live(), st.Stock)
	}
	if r.orders() > r.Stock {
		violate("%d purchases accepted (%d of them answered UNCONFIRMED) for %d units", r.orders(), r.HeldUnconfirmed, r.Stock)
	}
	if r.AdmissionOnly {
		// The sagas are still running: only what admission alone decides.
		r.InvariantsOK = len(r.Violations) == 0
		return
	}
	r.Violations = append(r.Violations, st.drift()...)
	if !r.AllCreated {
		violate("not every accepted order reached AWAITING_PAYMENT in time")
	}
	total := 0
	for _, n := range st.Orders {
		total += n
	}
	if total != r.orders() {
		violate("%d order rows for %d accepted purchases and %d unconfirmed ones that held their unit (lost or extra orders)",
			total, r.Accepted, r.HeldUnconfirmed)
	}
	if r.Lost != nil && r.Lost.Lost > 0 {
		violate("%d of %d accepted purchases have no order (lost 202s), e.g. %v", r.Lost.Lost, r.Lost.Checked, r.Lost.Sample)
	}
	r.InvariantsOK = len(r.Violations) == 0
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
