package e2e

import (
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
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1")
	waitReady(t, api+"/readyz", 60*time.Second)
	testenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(dev.Stdout(), "Redis ") {
			return fmt.Errorf("dev has not printed its addresses yet")
		}
		return nil
	})
	redisAddr := regexp.MustCompile(`Redis\s+(\S+)`).FindStringSubmatch(dev.Stdout())[1]
	temporalAddr := regexp.MustCompile(`Temporal\s+(\d\S+)`).FindStringSubmatch(dev.Stdout())[1]

	const buyers, units = 2000, 500
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", api, "--users", fmt.Sprint(buyers), "--stock", fmt.Sprint(units),
		"--dup-rate", "0.1", "--pay", "0.2", "--cancel", "0.1", "--start-delay", "2s", "--wait", "8m",
		"--redis-addr", redisAddr, "--json")
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
	if r.Paid != units/5 || r.Cancelled != units/10 {
		t.Fatalf("paid %d, cancelled %d; want %d and %d", r.Paid, r.Cancelled, units/5, units/10)
	}

	// The full audit, straight from the stores.
	audit := exec.Command(testenv.Binary(t), "audit", "--sale", r.SaleID, "--settled",
		"--database-url", "sqlite:"+filepath.Join(dir, "seckill.db"), "--redis-addr", redisAddr,
		"--temporal-address", temporalAddr)
	if out, err := audit.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK: every invariant holds") {
		t.Fatalf("seckill audit: %v\n%s", err, out)
	}

	// /metrics counted what the load generator saw.
	metrics := get(t, api+"/metrics")
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
