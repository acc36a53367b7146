package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	seckillclient "github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/workflows"
)

// The engine probe's no-op workflows are started by the relay and run by
// the order worker: without a worker the probe waits (and a second probe
// is refused meanwhile), and once a worker runs it answers the rate the
// server recorded, naming the relay that started them.
func TestEngineProbe(t *testing.T) {
	s := start(t, options{})
	admin := s.token("probe-admin", auth.RoleAdmin)
	for _, tc := range []struct {
		token, body string
		status      int
	}{
		{s.token("probe-buyer", auth.RoleBuyer), `{"workflows":1}`, http.StatusForbidden},
		{admin, `{"workflows":0}`, http.StatusUnprocessableEntity},
		{admin, `{"workflows":20001}`, http.StatusUnprocessableEntity},
		{admin, `{"workflows":"ten"}`, http.StatusUnprocessableEntity},
	} {
		if r := s.do(http.MethodPost, "/v1/admin/engine-probe", tc.token, tc.body); r.status != tc.status {
			t.Fatalf("probe %s: %d %s, want %d", tc.body, r.status, r.body, tc.status)
		}
	}
	// No worker: the probe's workflows wait on the task queue.
	s.stopW()
	const first = 30
	waiting := s.probeInBackground(admin, first)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n, err := s.probeWorkflows("Running"); err != nil || n < first {
			return fmt.Errorf("%d probe workflows running, want %d (%v)", n, first, err)
		}
		return nil
	})
	r := s.do(http.MethodPost, "/v1/admin/engine-probe", admin, `{"workflows":1}`)
	if p := r.problem(t); r.status != http.StatusServiceUnavailable || p.Code != wire.CodeUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("a second probe: %d %s, want 503 UNAVAILABLE with Retry-After", r.status, r.body)
	}

	// The worker comes: the waiting probe completes.
	s.startWorker()
	a := <-waiting
	if a.err != nil || a.p.Workflows != first || a.p.Seconds <= 0 {
		t.Fatalf("the waiting probe: %+v, %v", a.p, a.err)
	}

	const n = 40
	p, err := seckillclient.New(s.url, admin, nil).EngineProbe(context.Background(), wire.EngineProbeBody{Workflows: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine probe: %+v", p)
	if p.Workflows != n || p.Seconds <= 0 || p.StartsSeconds <= 0 || p.StartsSeconds > p.Seconds || len(p.Relays) != 1 ||
		p.WorkflowsPerSec <= 0 || p.WorkflowsPerSec*p.Seconds < n-0.01 || p.WorkflowsPerSec*p.Seconds > n+0.01 {
		t.Fatalf("engine probe %+v", p)
	}
	// Each probe deleted its own workflows, and only those: the first's
	// were gone already (or on their way), not the second's to delete.
	if a.p.Deleted != first || p.Deleted != n || a.p.Undeleted+p.Undeleted != 0 {
		t.Fatalf("deleted %d and %d (undeleted %d and %d), want %d and %d", a.p.Deleted, p.Deleted, a.p.Undeleted, p.Undeleted, first, n)
	}
}

// Once it has measured, a probe deletes its workflows, and those an
// earlier probe left (here: still open, never run, as when no worker
// registered the probe and its api died), so that the Temporal Web UI's
// list shows the orders alone; the orders are untouched. The server here
// checkpoints its transfer queue every second (30 s by default), which is
// what a deleted workflow waits for before it leaves the lists.
func TestEngineProbeDeletesItsWorkflows(t *testing.T) {
	dc := filepath.Join(t.TempDir(), "dynamicconfig.yaml")
	if err := os.WriteFile(dc, []byte("history.transferProcessorUpdateAckInterval:\n  - value: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, options{temporalArgs: []string{"--dynamic-config", dc}})
	ctx := context.Background()
	sale, l := s.openSale(2), newLedger()
	order := s.sold(l, sale, "olga")
	s.waitStatus(order, "olga", domain.StatusAwaitingPayment)
	const dead = 3
	for i := range dead {
		if _, err := s.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: relay.ProbeID("dead", i), TaskQueue: "no-worker-polls-this",
		}, workflows.EngineProbeName); err != nil {
			t.Fatal(err)
		}
	}

	const n = 40
	p, err := seckillclient.New(s.url, s.token("probe-admin", auth.RoleAdmin), nil).EngineProbe(ctx, wire.EngineProbeBody{Workflows: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine probe: %+v", p)
	if p.Workflows != n || p.WorkflowsPerSec <= 0 || p.Deleted != n+dead || p.Undeleted != 0 || p.DeleteSeconds <= 0 {
		t.Fatalf("engine probe %+v, want %d measured and %d deleted", p, n, n+dead)
	}
	answered := time.Now()
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := s.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = '%s'", workflows.EngineProbeName)})
		if err != nil || len(resp.GetExecutions()) > 0 {
			return fmt.Errorf("%d probe workflows still listed (%v)", len(resp.GetExecutions()), err)
		}
		return nil
	})
	t.Logf("no probe workflow listed %.1f s after the probe answered", time.Since(answered).Seconds())

	// A benchmark's probe keeps its workflows until the benchmark has
	// measured what follows, then deletes them.
	admin := seckillclient.New(s.url, s.token("probe-admin", auth.RoleAdmin), nil)
	if p, err = admin.EngineProbe(ctx, wire.EngineProbeBody{Workflows: n, Keep: true}); err != nil || p.Workflows != n || p.Deleted != 0 {
		t.Fatalf("engine probe that keeps its workflows: %+v %v, want %d measured and none deleted", p, err, n)
	}
	if listed := probesListed(t, s); listed != n {
		t.Fatalf("%d probe workflows listed after a probe that keeps them, want %d", listed, n)
	}
	c, err := admin.DeleteEngineProbes(ctx)
	if err != nil || c.Deleted != n || c.Undeleted != 0 {
		t.Fatalf("DELETE /v1/admin/engine-probe: %+v %v, want %d deleted", c, err, n)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if listed := probesListed(t, s); listed > 0 {
			return fmt.Errorf("%d kept probe workflows still listed after their deletion", listed)
		}
		return nil
	})
	d, err := s.tc.DescribeWorkflowExecution(ctx, "order-"+order, "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the order's workflow after the probe: %v, %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	s.settle(l, sale)
}

// probesListed counts the probe workflows the server lists.
func probesListed(t *testing.T, s *system) int {
	t.Helper()
	resp, err := s.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s'", workflows.EngineProbeName)})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.GetExecutions())
}

// With no relay anywhere, nothing takes the probe's jobs: the api says so
// instead of waiting out the probe's time.
func TestEngineProbeWithoutARelay(t *testing.T) {
	s := start(t, options{cfg: api.Config{NoRelay: true}})
	r := s.do(http.MethodPost, "/v1/admin/engine-probe", s.token("probe-admin", auth.RoleAdmin), `{"workflows":5}`)
	if p := r.problem(t); r.status != http.StatusServiceUnavailable || p.Code != wire.CodeUnavailable || !strings.Contains(p.Detail, "no relay") {
		t.Fatalf("probe without a relay: %d %s, want 503 UNAVAILABLE naming the missing relay", r.status, r.body)
	}
}

// A start the relays did not count (its count lost; here a relay stopped
// between the start and its count) is no stall while the workflows wait
// for a worker: visibility has them all started, and the probe answers
// once a worker runs them.
func TestEngineProbeTrustsVisibilityOverTheRelaysCount(t *testing.T) {
	s := start(t, options{})
	s.stopW()
	defer fault.Arm(fault.ProbeStart, fault.Stop(1, nil))()
	const n = 20
	waiting := s.probeInBackground(s.token("probe-admin", auth.RoleAdmin), n)
	testenv.Eventually(t, 30*time.Second, func() error {
		if fault.Hits(fault.ProbeStart) < n {
			return fmt.Errorf("%d of %d probe workflows started", fault.Hits(fault.ProbeStart), n)
		}
		return nil
	})
	// The stall window passes with no start and no completion: the
	// relays' count says n-1, visibility says n, and the probe waits on.
	select {
	case a := <-waiting:
		t.Fatalf("the probe answered before any worker ran it: %+v, %v", a.p, a.err)
	case <-time.After(api.ProbeStall + 2*time.Second):
	}
	s.startWorker()
	if a := <-waiting; a.err != nil || a.p.Workflows != n {
		t.Fatalf("the probe: %+v, %v", a.p, a.err)
	}
}

// probeAnswer is what an engine probe answered.
type probeAnswer struct {
	p   wire.EngineProbe
	err error
}

// probeInBackground asks for a probe of n workflows and delivers its
// answer on the channel returned.
func (s *system) probeInBackground(token string, n int) <-chan probeAnswer {
	waiting := make(chan probeAnswer, 1)
	go func() {
		p, err := seckillclient.New(s.url, token, nil).EngineProbe(context.Background(), wire.EngineProbeBody{Workflows: n})
		waiting <- probeAnswer{p, err}
	}()
	return waiting
}

// probeWorkflows counts the engine probe's workflows in status (Running,
// Completed, …), of every probe run so far.
func (s *system) probeWorkflows(status string) (int64, error) {
	resp, err := s.tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = '%s'", workflows.EngineProbeName, status)})
	return resp.GetCount(), err
}
