package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/internal/testenv"
)

// The dashboard kept in the repo, provisioned by docker-compose.yml.
const dashboardFile = "../deploy/grafana/dashboards/seckill.json"

// dashboardRows are the dashboard's rows, one per stage of an order's
// journey, in this order.
var dashboardRows = []string{"Admission", "Relay", "Saga", "Temporal SDK", "Reconciler", "Websockets", "Pools"}

// mayBeEmpty are the queries (panel/refId) that may legitimately return
// nothing after the test's small bench, because the traffic that fills
// them is not sent: every other query must return at least one series on
// the real Prometheus.
var mayBeEmpty = map[string]string{
	// seckill_purchases_total has no RATE_LIMITED or UNAVAILABLE series
	// until a buyer is limited or a purchase shed; the bench stays under
	// every limit.
	"Rate-limited and shed/A": "no 429 or 503 in the bench",
	// outcome="error" appears with the first failed step attempt; a
	// healthy run has none.
	"Step failures/A": "no saga step fails in a healthy run",
}

// grafanaVars stand for Grafana's built-in range variables, so that an
// expression parses as PromQL and runs on a Prometheus scraping every
// second (a minute holds many samples).
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "5m", "$__interval", "15s")

type dashboardQuery struct {
	panel, refID, expr string
}

func (q dashboardQuery) key() string { return q.panel + "/" + q.refID }

type grafanaPanel struct {
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Panels     []grafanaPanel `json:"panels"` // a collapsed row's panels
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// loadDashboard returns the dashboard's rows in order and every query of
// its panels.
func loadDashboard(t *testing.T) (rows []string, queries []dashboardQuery) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				rows = append(rows, p.Title)
				walk(p.Panels)
				continue
			}
			if uid, _ := p.Datasource["uid"].(string); uid != "prometheus" {
				t.Errorf("panel %q: datasource uid %q, want the provisioned \"prometheus\"", p.Title, uid)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries = append(queries, dashboardQuery{p.Title, tg.RefID, tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return rows, queries
}

// metricNames parses expr and returns the metric names its selectors name.
func metricNames(expr string) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// The dashboard's shape and PromQL, without any service: rows in the
// journey's order, every query valid, every selector naming a metric, the
// provisioning pointing at the dashboard and its datasource.
func TestDashboardQueriesParse(t *testing.T) {
	rows, queries := loadDashboard(t)
	if len(rows) != len(dashboardRows) {
		t.Fatalf("rows %q, want one per stage: %q", rows, dashboardRows)
	}
	for i, r := range rows {
		if !strings.HasPrefix(r, dashboardRows[i]) {
			t.Errorf("row %d is %q, want %q", i, r, dashboardRows[i])
		}
	}
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", q.key(), q.expr, err)
			continue
		}
		if len(names) == 0 || slices.Contains(names, "") {
			t.Errorf("%s: %q has a selector without a metric name", q.key(), q.expr)
		}
	}
	for key := range mayBeEmpty {
		if !slices.ContainsFunc(queries, func(q dashboardQuery) bool { return q.key() == key }) {
			t.Errorf("mayBeEmpty names %s, which is not on the dashboard", key)
		}
	}
	ds, err := os.ReadFile("../deploy/grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+uid: prometheus$`).Match(ds) {
		t.Error("the provisioned datasource's uid is not \"prometheus\", the one the panels name")
	}
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, mount := range []string{"./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro",
		"./deploy/grafana/provisioning:/etc/grafana/provisioning:ro",
		"./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"} {
		if !bytes.Contains(compose, []byte(mount)) {
			t.Errorf("docker-compose.yml does not mount %s", mount)
		}
	}
	prov, err := os.ReadFile("../deploy/grafana/provisioning/dashboards/seckill.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(prov, []byte("path: /var/lib/grafana/dashboards")) {
		t.Error("the dashboard provider does not read /var/lib/grafana/dashboards, where compose mounts them")
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "config", "../deploy/prometheus/prometheus.yml").CombinedOutput(); err != nil {
			t.Errorf("promtool check config: %v\n%s", err, out)
		}
	}
}

// Every metric the dashboard names is exported by the real binaries, and
// every query returns data on a real Prometheus: `seckill serve` and
// `seckill worker` run a small sale with payments and cancellations
// (`seckill bench`), then their /metrics are scraped, and a Prometheus
// (Debian's package) that scraped them through the run answers each query.
func TestDashboardAgainstRunningSystem(t *testing.T) {
	_, queries := loadDashboard(t)
	promBin, promErr := exec.LookPath("prometheus")
	if promErr != nil && os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
		t.Fatal("prometheus is required (SECKILL_REQUIRE_SERVICES=1) but not installed: apt-get install prometheus (.ci/run does)")
	}

	// Each process serves /metrics on its own listener, as in production;
	// the api's port does not.
	workerMetrics, apiMetrics := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	// Paying at the built-in provider, as seckill dev does: its calls are
	// the ordinary activities of a healthy run (from workflow version 8
	// every other step is a local activity first), so the panels of both
	// kinds have data.
	st := newStack(t, payEnv...)
	run(t, "serve", st.env, "serve", "--metrics-addr", apiMetrics)
	run(t, "worker", st.env, "worker", "--metrics-addr", workerMetrics)
	waitReady(t, st.api+"/readyz", 60*time.Second)
	waitReady(t, "http://"+workerMetrics+"/metrics", 30*time.Second)
	waitReady(t, "http://"+apiMetrics+"/metrics", 30*time.Second)

	var prom string
	if promErr == nil {
		prom = startPrometheus(t, promBin, map[string]string{"api": apiMetrics, "worker": workerMetrics})
	} else {
		t.Log("prometheus not installed: checking metric names only")
	}

	const buyers, units = 300, 100
	start := time.Now()
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", st.api, "--metrics-url", "http://"+apiMetrics+"/metrics", "--users", fmt.Sprint(buyers), "--stock", fmt.Sprint(units),
		"--dup-rate", "0.1", "--pay", "0.3", "--cancel", "0.2", "--start-delay", "2s", "--wait", "3m", "--engine-workflows", "0", "--json")
	cmd.Env = append(cmd.Environ(), "SECKILL_JWT_SECRET="+secret)
	out, err := cmd.Output()
	var r bench.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil || err != nil || !r.InvariantsOK || !r.AllCreated {
		t.Fatalf("bench: %v / %v\n%s", err, jerr, out)
	}
	t.Logf("bench: %d requests, outcomes %v, paid %d, cancelled %d, in %s", r.Requests, r.Outcomes, r.Paid, r.Cancelled, time.Since(start).Round(time.Millisecond))

	// The saga counted each order's transitions once.
	worker := get(t, "http://"+workerMetrics+"/metrics")
	for status, want := range map[string]int{"AWAITING_PAYMENT": r.Accepted, "PAID": r.Paid, "CANCELLED": r.Cancelled} {
		if got := metric(t, worker, `seckill_order_transitions_total{status="`+status+`"}`); got != float64(want) {
			t.Errorf("seckill_order_transitions_total{status=%q} = %v, want %d", status, got, want)
		}
	}

	// Every name a query selects is a sample name one of the binaries
	// exports: exact names, so a histogram's _bucket or a summary's
	// quantile series must really be there.
	exported := sampleNames(get(t, "http://"+apiMetrics+"/metrics") + worker)
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.key(), err)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %s is exported by neither seckill serve nor seckill worker", q.key(), n)
			}
		}
	}

	if prom == "" {
		return
	}
	// Wait until Prometheus has scraped both processes a few times (a rate
	// needs two samples of a series; Prometheus applies new targets only
	// every 5 s) after the last order settled, and until every query that
	// must have data has it: a counter such as
	// temporal_workflow_completed_total appears with the first completion,
	// which may come a scrape after the last transition, and a rate over it
	// needs a second scrape. A metric that never appears still fails the
	// test, at the deadline, query by query.
	settled := func() error {
		res, err := promQuery(prom, `sum(seckill_order_transitions_total{status="PAID"})`)
		if err != nil {
			return err
		}
		if len(res) != 1 || res[0].Value[1] != fmt.Sprint(r.Paid) {
			return fmt.Errorf("prometheus has %v paid orders, want %d", res, r.Paid)
		}
		if res, err = promQuery(prom, `sum_over_time(up[1m]) >= 3`); err != nil || len(res) != 2 {
			return fmt.Errorf("fewer than 3 good scrapes of api and worker yet: %v %v", res, err)
		}
		return nil
	}
	testenv.Eventually(t, 60*time.Second, settled)
	testenv.Eventually(t, 30*time.Second, func() error {
		var failed []error
		for _, q := range queries {
			res, err := promQuery(prom, grafanaVars.Replace(q.expr))
			switch {
			case err != nil:
				failed = append(failed, fmt.Errorf("%s: %q: %v", q.key(), q.expr, err))
			case len(res) == 0 && mayBeEmpty[q.key()] == "":
				failed = append(failed, fmt.Errorf("%s: %q returned nothing after the bench", q.key(), q.expr))
			}
		}
		return errors.Join(failed...)
	})
	t.Logf("%d queries ran on prometheus; whole test %s", len(queries), time.Since(start).Round(time.Millisecond))
}

// sampleNames returns the names of the samples in a Prometheus text
// exposition.
func sampleNames(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// startPrometheus runs Prometheus scraping each job's target every second
// and returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin string, targets map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for job, target := range targets {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, target)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	base := "http://" + addr
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			if resp, err := http.Get(base + "/api/v1/targets"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("prometheus targets: %s", b)
			}
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	waitReady(t, base+"/-/ready", 30*time.Second)
	return base
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promQuery evaluates an instant query through Prometheus's HTTP API.
func promQuery(base, expr string) ([]promSample, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", body.Status, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want a vector", body.Data.ResultType)
	}
	return body.Data.Result, nil
}
