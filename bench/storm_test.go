package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The read storm counts its reads and their errors, summarizes their
// latency, and the report shows them on screen and in JSON.
func TestReadStormReport(t *testing.T) {
	var served atomic.Int64
	enough := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/sales/42" {
			t.Errorf("storm sent %s %s", r.Method, r.URL.Path)
		}
		n := served.Add(1)
		if n == 200 {
			close(enough)
		}
		if n%10 == 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":503,"code":"UNAVAILABLE","detail":"overloaded"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"42","name":"x","state":"active","remaining":3}`))
	}))
	defer srv.Close()

	end := startReadStorm(context.Background(), srv.URL, "42", 5000, 8)
	<-enough
	rs := end()
	// Up to 8 reads were in flight when the storm ended: not counted.
	if rs.Reads < 200-8 || rs.Reads != rs.Outcomes["OK"]+rs.Outcomes["HTTP_503"] {
		t.Fatalf("reads %d, outcomes %v: want at least 192, every one counted", rs.Reads, rs.Outcomes)
	}
	if rs.Errors != rs.Outcomes["HTTP_503"] || rs.Errors < 20-8 {
		t.Fatalf("errors %d, outcomes %v: want every 503 counted", rs.Errors, rs.Outcomes)
	}
	if rs.Latency.P50 <= 0 || rs.Latency.P99 < rs.Latency.P50 || rs.ReadsPerSec <= 0 || rs.TargetRate != 5000 || rs.Concurrency != 8 {
		t.Fatalf("storm %+v: want latencies, a rate and the settings", rs)
	}

	r := &Result{Outcomes: map[string]int{"ACCEPTED": 1}, ReadStorm: rs}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ReadStorm map[string]any `json:"read_storm"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"target_reads_per_second", "concurrency", "reads", "errors", "seconds", "reads_per_second", "latency", "outcomes"} {
		if _, ok := doc.ReadStorm[k]; !ok {
			t.Errorf("--json read_storm has no %q: %s", k, b)
		}
	}
	if lat, _ := doc.ReadStorm["latency"].(map[string]any); lat["p99_ms"] == nil {
		t.Errorf("--json read_storm.latency has no p99_ms: %s", b)
	}
	table := r.Table()
	for _, want := range []string{"read storm", "errors", "HTTP_503"} {
		if !strings.Contains(table, want) {
			t.Errorf("table does not mention %q:\n%s", want, table)
		}
	}

	quiet, _ := json.Marshal(&Result{})
	if strings.Contains(string(quiet), "read_storm") {
		t.Errorf("a run without a storm reports one: %s", quiet)
	}
}

// A storm is aimed at one's own machine only.
func TestReadStormLoopbackOnly(t *testing.T) {
	for target, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "http://[::1]:8080": true,
		"https://shop.example.com": false, "http://10.0.0.5:8080": false,
	} {
		o := Options{Target: target, Users: 1, Stock: 1, Concurrency: 1, ReadStormRate: 100}
		if err := o.validate(); (err == nil) != ok {
			t.Errorf("storm at %s: %v, want allowed %v", target, err, ok)
		}
	}
}
