package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// The production shape with the relay in the worker: the api runs with
// --relay=false and starts nothing, a worker with --relay starts every
// order on its own Temporal client (so the starts can be eager), including
// one admitted before any relay ran.
func TestRelayInTheWorker(t *testing.T) {
	workerMetrics, apiMetrics := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	st := newStack(t)
	seckill := func(args ...string) string { return strings.TrimSpace(st.seckill(t, args...)) }
	serve := run(t, "serve", st.env, "serve", "--relay=false", "--metrics-addr", apiMetrics)
	waitReady(t, st.api+"/readyz", 60*time.Second)

	admin := seckill("token", "--user", "ops", "--role", "admin")
	const units = 20
	sale := openSale(t, st.api, admin, units)
	tokens := map[string]string{} // order id -> buyer's token
	early := seckill("token", "--user", "early")
	tokens[buy(t, st.api, sale, early)] = early

	run(t, "worker", st.env, "worker", "--relay", "--metrics-addr", workerMetrics)
	waitReady(t, "http://"+workerMetrics+"/metrics", 30*time.Second)
	for i := range units - 1 {
		tok := seckill("token", "--user", fmt.Sprintf("buyer-%02d", i))
		tokens[buy(t, st.api, sale, tok)] = tok
	}
	for id, tok := range tokens {
		testenv.Eventually(t, 2*time.Minute, func() error {
			if s := orderStatus(t, st.api, id, tok); s != "AWAITING_PAYMENT" {
				return fmt.Errorf("order %s is %q", id, s)
			}
			return nil
		})
	}

	worker := get(t, "http://"+workerMetrics+"/metrics")
	if n := metric(t, worker, "seckill_relay_workflows_started_total"); n != units {
		t.Errorf("the worker's relay started %v workflows, want %d", n, units)
	}
	if api := get(t, "http://"+apiMetrics+"/metrics"); strings.Contains(api, "seckill_relay_workflows_started_total") {
		t.Error("the api reports a relay of its own with --relay=false")
	}
	if !strings.Contains(serve.Output(), "runs no relay") {
		t.Error("serve --relay=false did not warn that it starts no orders")
	}
	if out := seckill("audit", "--sale", sale, "--settled"); !strings.Contains(out, "OK: every invariant holds") {
		t.Fatalf("audit:\n%s", out)
	}
}
