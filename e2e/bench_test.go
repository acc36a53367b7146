package e2e

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/internal/testenv"
)

// A small classic sale end to end through `seckill bench`; then the
// invariant audit of `seckill audit`, and /metrics must agree with what the
// load generator saw.
func TestSmallBench(t *testing.T) {
	testenv.RedisAddr(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dev := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret}, "dev", "--data-dir", dir, "--seed-stock=0",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1", "--metrics-addr=127.0.0.1:0")
	waitReady(t, api+"/readyz", 60*time.Second)
	testenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(dev.Stdout(), "Redis ") {
			return fmt.Errorf("dev has not printed its addresses yet")
		}
		return nil
	})
	redisAddr := regexp.MustCompile(`Redis\s+(\S+)`).FindStringSubmatch(dev.Stdout())[1]
	metricsURL := regexp.MustCompile(`Metrics\s+(\S+)`).FindStringSubmatch(dev.Stdout())[1]
	temporalAddr := regexp.MustCompile(`Temporal\s+(\d\S+)`).FindStringSubmatch(dev.Stdout())[1]

	const buyers, units = 2000, 500
	acceptedFile := filepath.Join(t.TempDir(), "accepted.ndjson")
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", api, "--metrics-url", metricsURL, "--users", fmt.Sprint(buyers), "--stock", fmt.Sprint(units),
		"--dup-rate", "0.1", "--pay", "0.2", "--cancel", "0.1", "--start-delay", "2s", "--wait", "8m",
		"--redis-addr", redisAddr, "--accepted-out", acceptedFile, "--engine-workflows", "0", "--json")
	cmd.Env = append(cmd.Environ(), "SECKILL_JWT_SECRET="+secret)
	out, err := cmd.Output()
	var r bench.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("bench: %v / %v\n%s", err, jerr, out)
	}
	t.Logf("bench: admission %.2fs (%.0f req/s, p99 %.1f ms, %.2f× the Redis ceiling), all orders created after %.1fs (%.1f orders/s), outcomes %v",
		r.AdmissionSeconds, r.RequestsPerSec, r.Latency.P99, r.AdmissionVsCeil, r.CreatedSeconds, r.OrdersPerSecond, r.Outcomes)
	if err != nil || !r.InvariantsOK || !r.AllCreated {
		t.Fatalf("bench failed (%v): %v", err, r.Violations)
	}
	if r.Accepted != units || r.Outcomes["ACCEPTED"] != units || r.Outcomes["SOLD_OUT"]+r.Outcomes["ALREADY_PURCHASED"] != r.Requests-units {
		t.Fatalf("outcomes %v for %d requests, want exactly %d accepted", r.Outcomes, r.Requests, units)
	}
	// dev keeps its orders in SQLite here: the Postgres that CI runs on
	// this machine serves other tests and is not the system's.
	if src, ok := r.CPU.Sources["postgres"]; ok {
		t.Errorf("the CPU of %s counted for a system on SQLite", src)
	}
	if r.Paid != units/5 || r.Cancelled != units/10 {
		t.Fatalf("paid %d, cancelled %d; want %d and %d", r.Paid, r.Cancelled, units/5, units/10)
	}
	// Every 202 was checked by its order id, and a later check of the file
	// finds them too.
	if r.Lost == nil || r.Lost.Checked != units || r.Lost.Lost != 0 {
		t.Fatalf("lost-202 check %+v, want %d checked and none lost", r.Lost, units)
	}
	verify := exec.Command(testenv.Binary(t), "bench", "--target", api, "--verify", acceptedFile, "--json")
	verify.Env = append(verify.Environ(), "SECKILL_JWT_SECRET="+secret)
	var lost bench.Lost
	if out, err := verify.Output(); err != nil || json.Unmarshal(out, &lost) != nil || lost.Checked != units || lost.Lost != 0 {
		t.Fatalf("seckill bench --verify: %v %+v\n%s", err, lost, out)
	}

	// The shop ships what was paid for: the paid orders, exported as CSV
	// (from the dev mode's SQLite), and all of them as NDJSON.
	tok := exec.Command(testenv.Binary(t), "token", "--user", "ops", "--role", "admin")
	tok.Env = append(tok.Environ(), "SECKILL_JWT_SECRET="+secret)
	admin, err := tok.Output()
	if err != nil {
		t.Fatalf("seckill token: %v", err)
	}
	export := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(testenv.Binary(t), append([]string{"export", "--api", api, "--sale", r.SaleID}, args...)...)
		// The name the tour exports it under (README), as dev prints it.
		cmd.Env = append(cmd.Environ(), "ADMIN_TOKEN="+strings.TrimSpace(string(admin)))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("seckill export %v: %v", args, err)
		}
		return string(out)
	}
	paid, err := csv.NewReader(strings.NewReader(export("--status", "PAID"))).ReadAll()
	if err != nil || len(paid) != r.Paid+1 || paid[0][0] != "order_id" {
		t.Fatalf("seckill export --status PAID: %d records (%v), want a header and %d orders", len(paid), err, r.Paid)
	}
	for _, rec := range paid[1:] {
		if rec[3] != "PAID" || rec[6] == "" {
			t.Fatalf("exported row %q: want PAID with paid_at", rec)
		}
	}
	if lines := strings.Count(export("--format", "ndjson"), "\n"); lines != units {
		t.Fatalf("seckill export --format ndjson: %d lines, want the %d orders", lines, units)
	}

	// The full audit, straight from the stores.
	audit := exec.Command(testenv.Binary(t), "audit", "--sale", r.SaleID, "--settled",
		"--database-url", "sqlite:"+filepath.Join(dir, "seckill.db"), "--redis-addr", redisAddr,
		"--temporal-address", temporalAddr)
	if out, err := audit.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK: every invariant holds") {
		t.Fatalf("seckill audit: %v\n%s", err, out)
	}

	// /metrics counted what the load generator saw.
	metrics := get(t, metricsURL)
	for code, n := range r.Outcomes {
		if got := metric(t, metrics, `seckill_purchases_total{code="`+code+`"}`); got != float64(n) {
			t.Errorf("seckill_purchases_total{code=%q} = %v, want %d", code, got, n)
		}
	}
	if got := metric(t, metrics, "seckill_admission_seconds_count"); got != float64(r.Requests) {
		t.Errorf("seckill_admission_seconds_count = %v, want %d", got, r.Requests)
	}
	// A start whose answer was lost (a timeout under load) is retried and
	// then finds its workflow existing: it counts as a duplicate, not twice.
	started := metric(t, metrics, "seckill_relay_workflows_started_total")
	dups := metric(t, metrics, "seckill_relay_start_duplicates_total")
	if started+dups != float64(units) || started > float64(units) {
		t.Errorf("relay: %v started + %v found existing, want %d workflows", started, dups, units)
	}
	if got := metric(t, metrics, `seckill_saga_step_seconds_count{outcome="ok",step="PlaceOrder"}`); got != float64(units) {
		t.Errorf("PlaceOrder steps = %v, want %d", got, units)
	}
	if got := metric(t, metrics, `seckill_compensations_total{step="RestoreStock"}`); got != float64(r.Cancelled) {
		t.Errorf("RestoreStock compensations = %v, want %d (the cancelled orders)", got, r.Cancelled)
	}
	for _, series := range []string{"seckill_websocket_connections", "seckill_relay_backlog", "go_goroutines",
		`go_sql_open_connections{db_name="seckill"}`, "seckill_redis_pool_connections",
		"seckill_relay_start_latency_seconds_count", `seckill_admission_seconds_bucket{le="0.05"}`} {
		metric(t, metrics, series)
	}
	if !strings.Contains(metrics, "\ntemporal_") {
		t.Error("/metrics has no Temporal SDK series")
	}
}

// A small sale through `seckill bench` against `seckill dev` on real
// Postgres and Redis, with the limits and the CPU measured in the same run:
// the JSON carries each, with sane values. The figures are logged, never
// judged: this machine is shared.
func TestBenchMeasuresLimitsAndCPU(t *testing.T) {
	_, db := testenv.Redis(t)
	_, scratch := testenv.Redis(t) // the scratch sales of the ceiling and the HTTP limit
	redisURL := testenv.RedisURL(testenv.RedisAddr(t), db)
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dbURL := testenv.DatabaseURL(t)
	dev := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret, "DATABASE_URL=" + dbURL, "REDIS_ADDR=" + redisURL},
		"dev", "--memory", "--seed-stock=0", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1",
		"--metrics-addr=127.0.0.1:0")
	waitReady(t, api+"/readyz", 60*time.Second)
	// The api's CPU is read from its own /metrics, on the port it chose.
	testenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(dev.Stdout(), "Metrics ") {
			return fmt.Errorf("dev has not printed its addresses yet")
		}
		return nil
	})
	metricsURL := regexp.MustCompile(`Metrics\s+(\S+)`).FindStringSubmatch(dev.Stdout())[1]

	const buyers, units, workflows = 300, 100, 50
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", api, "--metrics-url", metricsURL, "--users", fmt.Sprint(buyers), "--stock", fmt.Sprint(units),
		"--start-delay", "1s", "--wait", "5m", "--redis-addr", redisURL, "--ceiling-db", fmt.Sprint(scratch),
		"--engine-workflows", fmt.Sprint(workflows),
		// The order's whole life: 30 paid, 20 cancelled, 50 left to expire
		// once the window (longer than the other phases take) has passed.
		"--pay", "0.3", "--cancel", "0.2", "--expire", "--payment-window", "25s", "--pg", "seckill="+dbURL, "--json")
	cmd.Env = append(cmd.Environ(), "SECKILL_JWT_SECRET="+secret)
	out, err := cmd.Output()
	var r bench.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil || err != nil || !r.InvariantsOK || !r.AllCreated {
		t.Fatalf("bench: %v / %v %v\n%s", err, jerr, r.Violations, out)
	}

	l, e := r.HTTPLimit, r.Engine
	if l == nil || e == nil {
		t.Fatalf("http_limit %+v, engine_ceiling %+v, not measured: %v", l, e, r.NotMeasured)
	}
	if l.Seconds <= 0 || l.RequestsPerSec <= 0 || l.Latency.P50 <= 0 || l.Latency.P99 < l.Latency.P50 ||
		l.Outcomes["ACCEPTED"] != units || l.Outcomes["ACCEPTED"]+l.Outcomes["SOLD_OUT"] != r.Requests {
		t.Errorf("http_limit %+v for %d requests, %d units", l, r.Requests, units)
	}
	if r.AdmissionVsHTTP <= 0 || r.P99VsHTTP <= 0 || r.AdmissionVsCeil <= 0 {
		t.Errorf("admission / http limit %v, p99 / http limit %v, admission / ceiling %v", r.AdmissionVsHTTP, r.P99VsHTTP, r.AdmissionVsCeil)
	}
	if e.Workflows != workflows || e.Seconds <= 0 || e.WorkflowsPerSec <= 0 || len(e.Relays) != 1 ||
		e.LoadBefore == "" || e.LoadAfter == "" || r.SagaLoadBefore == "" || r.SagaVsEngine <= 0 {
		t.Errorf("engine_ceiling %+v, saga / engine %v", e, r.SagaVsEngine)
	}

	c := r.CPU
	if c == nil || c.Engine == nil || c.Admission == nil || c.Saga == nil {
		t.Fatalf("cpu %+v", c)
	}
	for _, name := range []string{"api", "redis", bench.LoadGenerator} {
		if c.Sources[name] == "" {
			t.Errorf("cpu sources %v: no %s", c.Sources, name)
		}
	}
	for phase, p := range map[string]*bench.CPUPhase{"engine": c.Engine, "admission": c.Admission, "saga": c.Saga} {
		if p.WallSeconds <= 0 || p.Components["api"] <= 0 || p.Components["redis"] <= 0 || p.SystemSeconds < p.Components["api"]+p.Components["redis"] {
			t.Errorf("cpu.%s %+v", phase, p)
		}
	}
	if c.Admission.LoadGeneratorSeconds <= 0 || c.EngineMsPerWorkflow <= 0 || c.AdmissionMsPerRequest <= 0 || c.SagaMsPerOrder <= 0 || c.LoadGeneratorMsPerRequest <= 0 {
		t.Errorf("cpu %+v", c)
	}
	if len(c.Unavailable) > 0 {
		t.Errorf("cpu sources not read: %v", c.Unavailable)
	}

	// Every phase of the life measured on its own: orders/s, CPU per order
	// by component, the database's commits and WAL, the requests' times.
	want := []struct {
		name   string
		orders int
	}{{bench.PhasePlace, units}, {bench.PhasePay, 30}, {bench.PhaseCancel, 20}, {bench.PhaseExpire, 50}}
	if len(r.Phases) != len(want) {
		t.Fatalf("phases %+v, want %v", r.Phases, want)
	}
	commits := int64(0)
	for i, w := range want {
		p := r.Phases[i]
		pg := p.Postgres["seckill"]
		// Commits are counted as backends publish them, up to a second
		// late: a phase of a fraction of a second may see none, so they
		// are checked over the whole life; the WAL position is exact.
		commits += pg.Commits
		if p.Name != w.name || p.Orders != w.orders || !p.Complete || p.OrdersPerSecond <= 0 || p.LoadBefore == "" ||
			p.CPUMsPerOrder["system"] <= 0 || p.CPUMsPerOrder["api"] <= 0 || p.CPUMsPerOrder["system"] < p.CPUMsPerOrder["api"] ||
			pg.Commits < 0 || pg.WALBytes <= 0 || pg.WALBytesPerOrder <= 0 || pg.Cluster == "" || p.Note != "" {
			t.Errorf("phase %d: %+v, want %s of %d orders, complete, with CPU and Postgres figures", i, p, w.name, w.orders)
		}
		if requests := w.name == bench.PhasePay || w.name == bench.PhaseCancel; requests != (p.Latency != nil) ||
			requests && (p.Latency.P50 <= 0 || p.Latency.P99 < p.Latency.P50) {
			t.Errorf("phase %s latency %+v", w.name, p.Latency)
		}
	}
	if commits <= 0 {
		t.Errorf("no commits counted over the order's life: %+v", r.Phases)
	}
	if r.Paid != 30 || r.Cancelled != 20 || r.Stats.Orders["EXPIRED"] != 50 {
		t.Errorf("paid %d, cancelled %d, expired %d; want 30, 20, 50", r.Paid, r.Cancelled, r.Stats.Orders["EXPIRED"])
	}
	t.Logf("http limit %.2fs (admission %.2f× its wall time, %.2f× its p99); engine %.1f workflows/s (saga %.2f× it); cpu %.2f ms a no-op workflow, %.3f ms a request, %.2f ms an order (load generator %.3f ms a request); engine %+v; admission %+v; saga %+v",
		l.Seconds, r.AdmissionVsHTTP, r.P99VsHTTP, e.WorkflowsPerSec, r.SagaVsEngine,
		c.EngineMsPerWorkflow, c.AdmissionMsPerRequest, c.SagaMsPerOrder, c.LoadGeneratorMsPerRequest, *c.Engine, *c.Admission, *c.Saga)
}

// metric returns the value of one series in a Prometheus text exposition.
func metric(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no series %s", series)
	return 0
}

// `seckill bench --pay` against `seckill dev` taking payments at the
// built-in provider: each pay answers with the provider's hosted page, the
// bench pays there as a buyer's browser does (the page, then its Pay form
// with the page's token), and counts an order paid once the provider's
// notification has made it PAID; the pay phase reports each step's times.
func TestBenchPaysAtBuiltinProvider(t *testing.T) {
	_, db := testenv.Redis(t)
	redisURL := testenv.RedisURL(testenv.RedisAddr(t), db)
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dev := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret, "DATABASE_URL=" + testenv.DatabaseURL(t), "REDIS_ADDR=" + redisURL},
		"dev", "--memory", "--seed-stock=0", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1",
		"--metrics-addr=127.0.0.1:0", "--payment-provider", "builtin")
	waitReady(t, api+"/readyz", 60*time.Second)
	testenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(dev.Stdout(), "Metrics ") {
			return fmt.Errorf("dev has not printed its addresses yet")
		}
		return nil
	})
	metricsURL := regexp.MustCompile(`Metrics\s+(\S+)`).FindStringSubmatch(dev.Stdout())[1]

	const buyers, units = 12, 6
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", api, "--metrics-url", metricsURL, "--users", fmt.Sprint(buyers),
		"--stock", fmt.Sprint(units), "--pay", "1", "--start-delay", "1s", "--wait", "45s", "--engine-workflows", "0", "--json")
	cmd.Env = append(cmd.Environ(), "SECKILL_JWT_SECRET="+secret)
	out, err := cmd.Output()
	var r bench.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil || err != nil || !r.InvariantsOK || !r.AllCreated {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench: %v / %v %v\n%s\n%s", err, jerr, r.Violations, out, stderr)
	}
	if r.Paid != units || r.Stats.Orders["PAID"] != units {
		t.Fatalf("the bench counted %d paid, the sale has %d PAID orders; want %d of each", r.Paid, r.Stats.Orders["PAID"], units)
	}
	if len(r.Phases) != 2 || r.Phases[1].Name != bench.PhasePay {
		t.Fatalf("phases %+v, want place and pay", r.Phases)
	}
	p := r.Phases[1]
	pay := p.Payment
	if pay == nil {
		t.Fatalf("the pay phase %+v reports no payment at the provider", p)
	}
	if !p.Complete || p.Orders != units || p.OrdersPerSecond <= 0 || p.Latency == nil || p.Latency.P99 <= 0 {
		t.Errorf("pay phase %+v, want %d orders, complete, with the pay's latency", p, units)
	}
	if pay.Provider != "builtin" || pay.Paid != units || len(pay.Failed) != 0 || pay.Page.P99 <= 0 || pay.Submit.P99 <= 0 ||
		pay.CaptureToPaid == nil || pay.CaptureToPaid.P50 <= 0 || pay.CaptureToPaid.P99 < pay.CaptureToPaid.P50 || p.Note != "" {
		t.Errorf("payment %+v (capture to PAID %+v), note %q", pay, pay.CaptureToPaid, p.Note)
	}
	t.Logf("pay phase: %.1f orders/s; pay p99 %.1f ms, page p99 %.1f ms, submit p99 %.1f ms, capture→PAID p50 %.1f / p99 %.1f ms",
		p.OrdersPerSecond, p.Latency.P99, pay.Page.P99, pay.Submit.P99, pay.CaptureToPaid.P50, pay.CaptureToPaid.P99)
}
