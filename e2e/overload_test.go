package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/internal/testenv"
)

// Far more purchase requests than the api admits at once: it sheds the
// excess with fast 503s instead of queueing, /healthz keeps answering, and
// memory stays flat. The load comes from `seckill bench` (a plain build,
// like any client), not from this race-instrumented test process.
// Latencies are logged (they are measurements, not assertions: this
// machine is shared).
func TestOverloadIsShedAndHealthzAnswers(t *testing.T) {
	st := newStack(t, "SECKILL_LOG_LEVEL=warn")
	api, env := st.api, st.env
	// The api on its own, as in production: the sagas run in the worker
	// and the Temporal server, other processes.
	serve := run(t, "serve", env, "serve", "--max-in-flight=64", "--user-rate=0")
	run(t, "worker", env, "worker")
	waitReady(t, api+"/readyz", 60*time.Second)
	rssBefore := rss(t, serve.Pid())

	const buyers, clients = 30000, 256
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", api, "--users", fmt.Sprint(buyers),
		"--stock", "1000000", "--concurrency", fmt.Sprint(clients), "--start-delay", "1s", "--admission-only", "--engine-workflows", "0", "--json")
	cmd.Env = append(cmd.Environ(), "SECKILL_JWT_SECRET="+secret)
	type sample struct {
		at time.Time
		d  time.Duration
	}
	var samples []sample
	stop := make(chan struct{})
	var hwg sync.WaitGroup
	hwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // sampling interval
			}
			t0 := time.Now()
			resp, err := http.Get(api + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz during the overload: %v %v", resp, err)
				return
			}
			resp.Body.Close()
			samples = append(samples, sample{t0, time.Since(t0)})
		}
	})
	out, err := cmd.Output()
	close(stop)
	hwg.Wait()
	rssAfter := rss(t, serve.Pid())
	var r bench.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil || err != nil {
		t.Fatalf("bench: %v / %v\n%s", err, jerr, out)
	}

	// /healthz latency while the purchases were being fired.
	end := r.AdmissionStart.Add(time.Duration(r.AdmissionSeconds * float64(time.Second)))
	var healthz []time.Duration
	for _, s := range samples {
		if !s.at.Before(r.AdmissionStart) && s.at.Before(end) {
			healthz = append(healthz, s.d)
		}
	}
	if len(healthz) == 0 {
		t.Fatalf("no /healthz sample during the %.2fs of admission", r.AdmissionSeconds)
	}
	slices.Sort(healthz)
	p := func(q float64) time.Duration { return healthz[int(q*float64(len(healthz)-1))] }
	t.Logf("%d purchases from %d clients in %.2fs (%.0f req/s, p50 %.1f ms, p99 %.1f ms): %v; /healthz over %d samples p50 %s p99 %s max %s; RSS %d → %d MiB; load %s → %s",
		r.Requests, clients, r.AdmissionSeconds, r.RequestsPerSec, r.Latency.P50, r.Latency.P99, r.Outcomes,
		len(healthz), p(0.5), p(0.99), p(1), rssBefore>>10, rssAfter>>10, r.LoadBefore, r.LoadAfter)
	if !r.InvariantsOK {
		t.Fatalf("invariants: %v", r.Violations)
	}
	if r.Outcomes["UNAVAILABLE"] == 0 {
		t.Fatal("nothing was shed")
	}
	if n := r.Requests - r.Outcomes["ACCEPTED"] - r.Outcomes["UNAVAILABLE"]; n != 0 {
		t.Fatalf("%d requests ended otherwise (timeouts, errors): %v", n, r.Outcomes)
	}
}

// rss is a process's resident set in KiB.
func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
			return kib
		}
	}
	return 0
}
