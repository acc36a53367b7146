package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A phase's per-order figures come from its boundaries; an incomplete
// phase reports its totals but no per-order figure, since the CPU was
// spent on orders not all counted.
func TestPhaseFigures(t *testing.T) {
	at := time.Now()
	from := probe{at: at, load: "1.00 0.50 0.20",
		cpu: &cpuSample{at: at, values: map[string]map[string]float64{"api": {"": 10}, "postgres": {"1/7": 3}}, errs: map[string]error{}},
		pg:  map[string]pgReading{"seckill": {commits: 100, lsn: 1000, cluster: "42"}, "gone": {commits: 1}}}
	to := probe{at: at.Add(4 * time.Second), load: "1.50 0.60 0.20",
		cpu: &cpuSample{at: at.Add(4 * time.Second), values: map[string]map[string]float64{"api": {"": 12}, "postgres": {"1/7": 4, "2/9": 1}}, errs: map[string]error{}},
		pg:  map[string]pgReading{"seckill": {commits: 300, lsn: 41000, cluster: "42"}}}
	lat := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}

	p := newPhase(PhasePay, 100, true, from, to, lat, map[string]string{})
	if p.Seconds != 4 || p.OrdersPerSecond != 25 || p.LoadBefore != "1.00 0.50 0.20" || p.LoadAfter != "1.50 0.60 0.20" {
		t.Errorf("phase %+v", p)
	}
	// api 2 s, postgres 1 s + 1 s (a backend born in the phase) over 100 orders.
	if p.CPUMsPerOrder["system"] != 40 || p.CPUMsPerOrder["api"] != 20 || p.CPUMsPerOrder["postgres"] != 20 {
		t.Errorf("cpu ms per order %v", p.CPUMsPerOrder)
	}
	pg, ok := p.Postgres["seckill"]
	if !ok || pg.Commits != 200 || pg.WALBytes != 40000 || pg.CommitsPerOrder != 2 || pg.WALBytesPerOrder != 400 || pg.Cluster != "42" {
		t.Errorf("postgres %+v", p.Postgres)
	}
	if _, ok := p.Postgres["gone"]; ok {
		t.Error("a database read at one end only is reported")
	}
	if p.Latency == nil || p.Latency.P50 <= 0 || p.Latency.Max != 40 {
		t.Errorf("latency %+v", p.Latency)
	}

	partial := newPhase(PhaseExpire, 100, false, from, to, nil, map[string]string{})
	if partial.OrdersPerSecond != 0 || partial.CPUMsPerOrder != nil || partial.Postgres["seckill"].CommitsPerOrder != 0 ||
		partial.Postgres["seckill"].Commits != 200 || partial.CPU == nil || partial.Latency != nil {
		t.Errorf("incomplete phase %+v", partial)
	}

	var b strings.Builder
	row := func(k, f string, a ...any) { b.WriteString(k + " " + strings.TrimSpace(fmt.Sprintf(f, a...)) + "\n") }
	partial.Note = "the payment window ended early"
	phaseTable(&b, row, []OrderPhase{p, partial})
	for _, want := range []string{"pay", "expire", "100 (incomplete)", "25.0", "20.0 / 30.0", "40.00", "postgres seckill 2.0 commits 0.4 KB", "note: expire the payment window ended early"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

// --pg names each database once, and never echoes a URL it refuses (it
// may hold a password).
func TestParsePGSources(t *testing.T) {
	got, err := ParsePGSources([]string{"seckill=postgres://u:pw@h/seckill", "temporal=postgresql://h/temporal"})
	if err != nil || len(got) != 2 || got[1].Name != "temporal" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range [][]string{{"seckill"}, {"=postgres://h/x"}, {"x=mysql://u:secret@h"}, {"a=postgres://h/a", "a=postgres://h/b"}} {
		_, err := ParsePGSources(bad)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// The table names the sale and where its orders are in the Web UI, and
// says in words what "all orders created" found.
func TestTableNamesTheSale(t *testing.T) {
	r := &Result{SaleID: "42", SaleWorkflowsURL: "http://127.0.0.1:8233/namespaces/default/workflows?query=SaleId%3D%2242%22",
		AllCreated: true, Stats: Stats{Orders: map[string]int{}}}
	out := r.Table()
	for _, want := range []string{"sale 42; its orders in the Temporal Web UI: http://127.0.0.1:8233/namespaces/default/workflows?query=SaleId%3D%2242%22",
		"(every accepted order awaits payment)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	r.AllCreated = false
	if out := r.Table(); !strings.Contains(out, "(NOT every accepted order awaits payment)") {
		t.Errorf("an incomplete saga is not said so:\n%s", out)
	}
}

// A pay phase at a provider shows, beside the pay's own times, the hosted
// page's, the submit's and capture to PAID, and what was not paid.
func TestPhaseTableShowsThePayment(t *testing.T) {
	pay := OrderPhase{Name: PhasePay, Orders: 10, Latency: &Latency{P50: 5, P99: 9}, Payment: &PhasePayment{
		Provider: "builtin", Page: Latency{P50: 1, P99: 2}, Submit: Latency{P50: 3, P99: 4},
		CaptureToPaid: &Latency{P50: 120, P99: 340}, Paid: 9, Failed: map[string]int{"submit": 1}, FailedSample: "submit: HTTP 409"}}
	var b strings.Builder
	row := func(k, f string, a ...any) { b.WriteString(k + " " + strings.TrimSpace(fmt.Sprintf(f, a...)) + "\n") }
	phaseTable(&b, row, []OrderPhase{{Name: PhasePlace, Orders: 10}, pay})
	out := strings.Join(strings.Fields(b.String()), " ") // the columns' padding aside
	for _, want := range []string{"payment provider – builtin", "pay page p50/p99 ms – 1.0 / 2.0", "pay submit p50/p99 ms – 3.0 / 4.0",
		"capture→PAID p50/p99 ms – 120.0 / 340.0", "read PAID after – 9", "not paid: pay submit 1 (first: submit: HTTP 409)", "5.0 / 9.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
