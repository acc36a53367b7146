package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seckill/seckill/domain"
)

func isBusinessOutcome(err error) bool {
	var already *domain.AlreadyPurchasedError
	return errors.Is(err, domain.ErrSoldOut) || errors.As(err, &already)
}

// Table renders a result for people.
func (r *Result) Table() string {
	var b strings.Builder
	row := func(k, f string, a ...any) { fmt.Fprintf(&b, "  %-26s %s\n", k, fmt.Sprintf(f, a...)) }
	fmt.Fprintf(&b, "seckill bench: %d buyers (%d requests) race for %d units, concurrency %d, %s\n",
		r.Users, r.Requests, r.Stock, r.Concurrency, r.Target)
	fmt.Fprintf(&b, "machine: %d cores, load average %s before, %s after\n", r.Cores, r.LoadBefore, r.LoadAfter)
	if r.SaleWorkflowsURL != "" {
		fmt.Fprintf(&b, "sale %s; its orders in the Temporal Web UI: %s\n\n", r.SaleID, r.SaleWorkflowsURL)
	} else {
		fmt.Fprintf(&b, "sale %s\n\n", r.SaleID)
	}
	b.WriteString("limits (measured before the sale, on the quiet system)\n")
	if r.CeilingSeconds > 0 {
		row("redis ceiling", "%.3f s for the same requests as bare reserve.lua calls", r.CeilingSeconds)
	} else {
		row("redis ceiling", "not measured (needs --redis-addr)")
	}
	if l := r.HTTPLimit; l != nil {
		row("http limit", "%.3f s, %.0f requests/s: the same wave against a bare handler of one reserve.lua", l.Seconds, l.RequestsPerSec)
		row("  latency p50/p95/p99/max", "%.1f / %.1f / %.1f / %.1f ms", l.Latency.P50, l.Latency.P95, l.Latency.P99, l.Latency.Max)
	} else {
		row("http limit", "not measured (%s)", r.NotMeasured["http_limit"])
	}
	if e := r.Engine; e != nil {
		row("temporal engine", "%.1f workflows/s: %d no-op workflows in %.2f s (the server's times), started by %d relay(s)",
			e.WorkflowsPerSec, e.Workflows, e.Seconds, len(e.Relays))
		row("  load average", "%s before, %s after", e.LoadBefore, e.LoadAfter)
		switch cl := r.EngineCleanup; {
		case cl == nil:
		case cl.Error != "" || cl.Undeleted > 0:
			row("  its workflows", "%d deleted after the run, %d left listed: %s", cl.Deleted, cl.Undeleted, cl.Error)
		default:
			row("  its workflows", "deleted after the run (%d), off the Web UI's list within about a minute", cl.Deleted)
		}
	} else {
		row("temporal engine", "not measured (%s)", r.NotMeasured["engine_ceiling"])
	}
	b.WriteString("admission\n")
	row("wall time", "%.3f s", r.AdmissionSeconds)
	row("requests/s", "%.0f", r.RequestsPerSec)
	row("latency p50/p95/p99/max", "%.1f / %.1f / %.1f / %.1f ms", r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	row("outcomes", "%s", outcomes(r.Outcomes))
	if r.HeldUnconfirmed > 0 {
		row("unconfirmed, but held", "%d purchases answered UNCONFIRMED at the end took their unit all the same (their orders are there)", r.HeldUnconfirmed)
	}
	if u := r.Unavailable; u != nil {
		u.table(row)
	}
	if rs := r.ReadStorm; rs != nil {
		row("read storm", "%d reads of GET /v1/sales/{id} in %.3f s: %.0f/s (target %d/s, %d in flight), %d errors",
			rs.Reads, rs.Seconds, rs.ReadsPerSec, rs.TargetRate, rs.Concurrency, rs.Errors)
		row("  latency p50/p95/p99/max", "%.1f / %.1f / %.1f / %.1f ms", rs.Latency.P50, rs.Latency.P95, rs.Latency.P99, rs.Latency.Max)
		if rs.Errors > 0 {
			row("  outcomes", "%s", outcomes(rs.Outcomes))
		}
	}
	if r.AdmissionVsCeil > 0 {
		row("admission / ceiling", "%.2f×", r.AdmissionVsCeil)
	}
	if r.AdmissionVsHTTP > 0 {
		row("admission / http limit", "%.2f× the wall time, %.2f× the p99", r.AdmissionVsHTTP, r.P99VsHTTP)
	}
	if !r.AdmissionOnly {
		b.WriteString("saga\n")
		every := "every accepted order awaits payment"
		if !r.AllCreated {
			every = "NOT every accepted order awaits payment"
		}
		row("all orders created", "%.1f s after the first purchase (%s)", r.CreatedSeconds, every)
		row("orders/s through the saga", "%.1f", r.OrdersPerSecond)
		row("  load average", "%s before, %s after", r.SagaLoadBefore, r.SagaLoadAfter)
		if r.SagaVsEngine > 0 {
			row("saga / engine", "%.2f× the no-op workflows' rate", r.SagaVsEngine)
		}
		if r.Paid+r.Cancelled > 0 {
			row("paid / cancelled", "%d / %d, settled in %.1f s", r.Paid, r.Cancelled, r.EndSeconds)
		}
		phaseTable(&b, row, r.Phases)
	}
	if r.CPU != nil {
		orders := 0
		if r.AllCreated {
			orders = r.orders()
		}
		workflows := 0
		if r.Engine != nil {
			workflows = r.Engine.Workflows
		}
		r.CPU.table(&b, row, workflows, r.Requests, orders)
	}
	b.WriteString("api memory (resident, from /metrics)\n")
	row("start / peak", "%.0f / %.0f MiB", r.APIMemory.StartMiB, r.APIMemory.PeakMiB)
	if r.APIMemory.Websockets > 0 {
		row("idle websockets", "%d cost %.0f MiB (%.1f KiB each)", r.APIMemory.Websockets, r.APIMemory.WebsocketsExtraMiB,
			r.APIMemory.WebsocketsExtraMiB*1024/float64(r.APIMemory.Websockets))
	}
	b.WriteString("invariants\n")
	st := r.Stats
	row("stock / db / redis", "%d / %d / %d", st.Stock, st.DBStock, st.RedisRemaining)
	row("live orders / redis buyers", "%d / %d", st.live(), st.RedisBuyers)
	switch {
	case r.InvariantsOK && r.AdmissionOnly:
		row("verdict", "OK at admission (not oversold; sagas not awaited)")
	case r.InvariantsOK:
		row("verdict", "OK (oversold 0, redis = db, nothing pending)")
	default:
		row("verdict", "VIOLATED")
		for _, v := range r.Violations {
			b.WriteString("    - " + v + "\n")
		}
	}
	return b.String()
}

// outcomes renders counts of answers by name, in name order.
func outcomes(counts map[string]int) string {
	codes := make([]string, 0, len(counts))
	for c := range counts {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s %d", c, counts[c]))
	}
	return strings.Join(parts, ", ")
}

// table renders the CPU section: per component, the seconds of each phase
// and the milliseconds per no-op workflow of the engine probe, per request
// of the wave (admission) or per order (saga; orders 0 when not every
// order was created).
func (c *CPU) table(b *strings.Builder, row func(k, f string, a ...any), workflows, requests, orders int) {
	b.WriteString("cpu (seconds in each phase; ms per workflow of the engine probe, per request in admission, per order in the saga)\n")
	phases := []struct {
		p   *CPUPhase
		per int
	}{{c.Engine, workflows}, {c.Admission, requests}, {c.Saga, orders}}
	cell := func(p *CPUPhase, v float64, ok bool, per int) string {
		switch {
		case p == nil:
			return "–"
		case !ok:
			return "not read"
		case per > 0:
			return fmt.Sprintf("%.2f s (%.3f ms)", v, 1000*v/float64(per))
		}
		return fmt.Sprintf("%.2f s", v)
	}
	line := func(k, source string, v func(p *CPUPhase) (float64, bool)) {
		var cells [3]string
		for i, ph := range phases {
			var x float64
			var ok bool
			if ph.p != nil {
				x, ok = v(ph.p)
			}
			cells[i] = cell(ph.p, x, ok, ph.per)
		}
		row(k, "%-24s %-24s %-24s %s", cells[0], cells[1], cells[2], source)
	}
	row("", "%-24s %-24s %-24s %s", "engine probe", "admission", "saga", "source")
	names := make([]string, 0, len(c.Sources))
	for n := range c.Sources {
		if n != LoadGenerator {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		line(n, c.Sources[n], func(p *CPUPhase) (float64, bool) {
			v, ok := p.Components[n]
			return v, ok
		})
	}
	line("system", "the sum", func(p *CPUPhase) (float64, bool) { return p.SystemSeconds, true })
	line("load generator (bench)", c.Sources[LoadGenerator], func(p *CPUPhase) (float64, bool) { return p.LoadGeneratorSeconds, true })
	busy := func(p *CPUPhase) string {
		if p == nil || p.WallSeconds <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f over %.1f s", p.SystemSeconds/p.WallSeconds, p.WallSeconds)
	}
	row("system cores busy", "%-24s %-24s %s", busy(c.Engine), busy(c.Admission), busy(c.Saga))
	names = names[:0]
	for n := range c.Unavailable {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		row("not read: "+n, "%s", c.Unavailable[n])
	}
}

// table renders the wave's 503 answers and what the buyers did about them.
func (u *Unavailable) table(row func(k, f string, a ...any)) {
	if len(u.Answers) == 0 {
		row("503 answers", "none")
	} else {
		row("503 answers", "from %.2f s to %.2f s after the wave began (%.2f s): %s",
			u.FirstSeconds, u.LastSeconds, u.SpanSeconds, outcomes(u.Answers))
	}
	if u.RetryForSeconds > 0 {
		row("  retried", "%d requests resent with their Idempotency-Key; %d gave up (next retry past --retry-for %gs)",
			u.Retries, u.GaveUp, u.RetryForSeconds)
	}
	row("units unsold", "%d", u.UnitsUnsold)
}
