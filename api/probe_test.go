package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/internal/testenv"
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
	p, err := client.New(s.url, admin, nil).EngineProbe(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine probe: %+v", p)
	if p.Workflows != n || p.Seconds <= 0 || p.StartsSeconds <= 0 || p.StartsSeconds > p.Seconds || len(p.Relays) != 1 ||
		p.WorkflowsPerSec <= 0 || p.WorkflowsPerSec*p.Seconds < n-0.01 || p.WorkflowsPerSec*p.Seconds > n+0.01 {
		t.Fatalf("engine probe %+v", p)
	}
	if done, err := s.probeWorkflows("Completed"); err != nil || done != first+n {
		t.Fatalf("%d probe workflows completed, want %d (%v)", done, first+n, err)
	}
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
		p, err := client.New(s.url, token, nil).EngineProbe(context.Background(), n)
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
