package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// seckill serve and seckill worker as two processes against real Postgres,
// Redis and Temporal: the README tour works, and a worker killed mid-flow
// is replaced without losing an order.
func TestServeAndWorkerProcesses(t *testing.T) {
	st := newStack(t, payEnv...) // the tour pays on the provider's page
	api, env := st.api, st.env
	seckill := func(args ...string) string { return st.seckill(t, args...) }
	seckill("migrate") // again: idempotent

	pprofAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	serve := run(t, "serve", env, "serve", "--pprof-addr", pprofAddr)
	worker := run(t, "worker", env, "worker")
	waitReady(t, api+"/readyz", 60*time.Second)

	// Profiles are served on their own address, never on the api's.
	waitReady(t, "http://"+pprofAddr+"/debug/pprof/", 10*time.Second)
	if resp, err := http.Get(api + "/debug/pprof/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("pprof on the public listener: %v %v, want 404", resp, err)
	}

	admin := strings.TrimSpace(seckill("token", "--user", "ops", "--role", "admin"))
	buyer := strings.TrimSpace(seckill("token", "--user", "tourist"))
	runTour(t, api, admin, buyer)

	// Headers beyond the server's limit are refused before any handler runs.
	req, _ := http.NewRequest("GET", api+"/v1/sales", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: %v %v, want 431", resp, err)
	}

	// A wave of orders; the worker dies in the middle of their sagas.
	sale := openSale(t, api, admin, 30)
	orders := map[string]string{}
	for i := range 30 {
		user := fmt.Sprintf("wave-%02d", i)
		tok := strings.TrimSpace(seckill("token", "--user", user))
		orders[user+"|"+tok] = buy(t, api, sale, tok)
		if i == 10 {
			worker.Kill()
		}
	}
	run(t, "worker-2", env, "worker")
	for key, id := range orders {
		tok := strings.SplitN(key, "|", 2)[1]
		testenv.Eventually(t, 2*time.Minute, func() error {
			if s := orderStatus(t, api, id, tok); s != "AWAITING_PAYMENT" {
				return fmt.Errorf("order %s is %q", id, s)
			}
			return nil
		})
	}
	out := seckill("audit", "--sale", sale, "--settled")
	if !strings.Contains(out, "OK: every invariant holds") {
		t.Fatalf("audit:\n%s", out)
	}
	// Neither the secret nor a token appears in any log.
	for _, p := range []*proc{serve, worker} {
		if logs := p.Output(); strings.Contains(logs, secret) || strings.Contains(logs, buyer) || strings.Contains(logs, admin) {
			t.Fatal("a secret or a token was logged")
		}
	}
}
