package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// The alert rules Prometheus loads in docker-compose.yml fire on the
// series they are meant for and stay quiet on the others (their cases in
// deploy/prometheus/alerts_test.yml, run by Prometheus' own promtool), and
// name only metrics the dashboard queries, which
// TestDashboardAgainstRunningSystem finds exported by the real binaries.
func TestAlertRulesFireOnTheirSeries(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool (Prometheus' own tool; Debian's prometheus package) is needed to test deploy/prometheus/alerts.yml")
	}
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"}, // and the rule files it loads
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}

	raw, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var groups struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	_, queries := loadDashboard(t)
	var onDashboard []string
	for _, q := range queries {
		names, _ := metricNames(q.expr)
		onDashboard = append(onDashboard, names...)
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			names, err := metricNames(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
			for _, n := range names {
				if !slices.Contains(onDashboard, n) {
					t.Errorf("alert %s names %s, which no dashboard query does", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"SeckillRedisUnacknowledgedWrites", "SeckillAcceptedPurchasesLost", "SeckillPaymentsRefundedLate"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in deploy/prometheus/alerts.yml", want)
		}
	}

	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(compose, []byte("./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro")) {
		t.Error("docker-compose.yml does not mount deploy/prometheus/alerts.yml beside prometheus.yml")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)### Alerts worth setting\n(.*?)\n##").FindSubmatch(readme)
	if section == nil || !bytes.Contains(section[1], []byte("deploy/prometheus/alerts.yml")) {
		t.Error("README's \"Alerts worth setting\" does not point at deploy/prometheus/alerts.yml")
	}
}
