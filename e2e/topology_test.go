package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
)

// The production topology on loopback, docker-compose's shape: Temporal on
// Postgres as two processes of one cluster (frontend + matching; history +
// the internal worker) with 8 history shards, two `seckill serve` and two
// `seckill worker --relay`, the engine probe, a wave with pays and
// cancels, and the history process killed (SIGKILL) once orders are being
// placed, then restarted. Every order ends (the unpaid ones expire), the
// bench's invariants hold, and `seckill audit --quiescent` passes.
func TestProductionTopology(t *testing.T) {
	dbURL := testenv.TemporalDatabaseURL(t)
	store := []string{"--postgres-url", dbURL, "--history-shards", "8"}
	front := testenv.NewTemporal(t)
	front.Args = append(store, "--services", "frontend,matching")
	front.Start()
	history := testenv.NewTemporal(t)
	// The history process binds as in a container (every interface) and
	// advertises the address the frontend process reaches it at.
	history.Args = append(store, "--services", "history,worker", "--frontend-address", front.Address(),
		"--ip", "0.0.0.0", "--broadcast-address", "127.0.0.1")
	history.Start()

	// Unpaid orders expire within the test, so that it can end quiescent:
	// no workflow left running. Not sooner than a minute: placing every
	// order across the history kill can take 20 s, and an order that
	// expires before the last is placed, or while the bench pays, fails
	// the bench's checks for a reason that is not the topology's.
	st := newStackWith(t, testenv.StackOptions{Temporal: front, Env: []string{"SECKILL_PAYMENT_TIMEOUT=60s"}})
	second := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	// The relays run in the workers, whose starts are then eager, as in
	// docker-compose.yml (docs/performance.md, "Sizing").
	serveEnv, workerEnv := append(slices.Clone(st.env), "SECKILL_RELAY=false"), append(slices.Clone(st.env), "SECKILL_WORKER_RELAY=true")
	run(t, "serve-1", serveEnv, "serve")
	run(t, "serve-2", append(serveEnv, "SECKILL_HTTP_ADDR="+second), "serve")
	run(t, "worker-1", workerEnv, "worker")
	run(t, "worker-2", workerEnv, "worker")
	waitReady(t, st.api+"/readyz", 90*time.Second)
	waitReady(t, "http://"+second+"/readyz", 90*time.Second)

	const buyers, units = 600, 150
	cmd := exec.Command(testenv.Binary(t), "bench", "--target", st.api, "--users", fmt.Sprint(buyers), "--stock", fmt.Sprint(units),
		"--pay", "0.4", "--cancel", "0.2", "--start-delay", "2s", "--wait", "5m", "--engine-workflows", "200",
		"--ceiling-db", fmt.Sprint(scratchDB(t)), "--json")
	cmd.Env = append(cmd.Environ(), st.env...)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Once a fifth of the units have orders, history dies.
	admin := strings.TrimSpace(st.seckill(t, "token", "--user", "ops", "--role", "admin"))
	c := client.New(st.api, admin, nil)
	testenv.Eventually(t, 2*time.Minute, func() error {
		sales, err := c.Sales(context.Background(), 1)
		if err != nil || len(sales) == 0 {
			return fmt.Errorf("no sale yet (%v)", err)
		}
		stats, err := c.Stats(context.Background(), sales[0].ID)
		if err != nil {
			return err
		}
		if n := stats.Orders["AWAITING_PAYMENT"] + stats.Orders["PAID"] + stats.Orders["CANCELLED"]; n < units/5 {
			return fmt.Errorf("%d orders placed", n)
		}
		return nil
	})
	history.Kill()
	t.Log("history SIGKILLed")
	history.Start()

	if err := <-done; err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatalf("bench output: %v\n%s", err, out.String())
	}
	if !r.InvariantsOK || !r.AllCreated || r.Accepted != units || (r.Lost != nil && r.Lost.Lost != 0) {
		t.Fatalf("bench: invariants %v, all created %v, accepted %d of %d, violations %v", r.InvariantsOK, r.AllCreated, r.Accepted, units, r.Violations)
	}
	// The engine probe's workflows were started by the workers' relays,
	// not by the serve processes the bench asked.
	if e := r.Engine; e == nil || e.Workflows != 200 || e.WorkflowsPerSec <= 0 || len(e.Relays) == 0 || r.SagaVsEngine <= 0 {
		t.Fatalf("engine ceiling %+v (not measured: %v), saga / engine %v", r.Engine, r.NotMeasured, r.SagaVsEngine)
	}
	t.Logf("engine probe on the topology: %.1f workflows/s over %.2f s, started by %v; saga %.2f× it",
		r.Engine.WorkflowsPerSec, r.Engine.Seconds, r.Engine.Relays, r.SagaVsEngine)
	t.Logf("topology: %d accepted, %d paid, %d cancelled; all orders created after %.1fs (%.1f orders/s)",
		r.Accepted, r.Paid, r.Cancelled, r.CreatedSeconds, r.OrdersPerSecond)
	// The unpaid orders expire 60 s after they were placed; then nothing runs.
	testenv.Eventually(t, 2*time.Minute, func() error {
		audit := exec.Command(testenv.Binary(t), "audit", "--sale", r.SaleID, "--quiescent")
		audit.Env = append(audit.Environ(), st.env...)
		if out, err := audit.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK: every invariant holds") {
			return fmt.Errorf("seckill audit --quiescent: %v\n%s", err, out)
		}
		return nil
	})
}
