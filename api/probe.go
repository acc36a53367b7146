package api

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/relay"
)

// The engine probe measures the Temporal engine's ceiling in the shape the
// orders take (docs/design.md §4.9): no-op workflows started from this
// instance's Temporal client, the relay's starts in flight and eager start,
// run by the order worker wherever it runs. `seckill bench` calls it
// before the wave.

// probeTime bounds a probe: two minutes, plus 50 ms a workflow (a rate of
// 20 workflows a second, far below any engine's).
func probeTime(n int) time.Duration { return 2*time.Minute + time.Duration(n)*50*time.Millisecond }

var errProbeRunning = func() problemExample {
	e := example("probe-running", "An engine probe is running on this instance: retry after `Retry-After` seconds",
		http.StatusServiceUnavailable, wire.CodeUnavailable, "an engine probe is running on this instance")
	e.header = "Retry-After"
	return e
}()

func (s *Server) registerProbe() {
	huma.Register(s.api, huma.Operation{
		OperationID: "engine-probe", Method: http.MethodPost, Path: "/v1/admin/engine-probe",
		Summary: "Measure the Temporal engine's ceiling for the orders (admin)",
		Description: "Starts `workflows` no-op workflows on the order task queue from this instance, as its relay starts orders " +
			"(the same client, as many starts in flight, eager start), waits until the order worker has run every one, " +
			"and answers the rate the Temporal server recorded. Run it on a quiet system: during a wave it competes with the orders. " +
			"One probe at a time per instance; the workflows stay in the namespace (type SeckillEngineProbe) until its retention ends them.",
		Tags: []string{"health"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		MaxBodyBytes: 1 << 10,
		Responses:    s.problems(errMalformed, errNoToken, errAdminsOnly, errTooLarge, errInvalid, errProbeRunning, errUnavailable),
	}, func(ctx context.Context, in *struct{ Body wire.EngineProbeBody }) (*struct{ Body wire.EngineProbe }, error) {
		if !s.probing.CompareAndSwap(false, true) {
			p := problem(http.StatusServiceUnavailable, wire.CodeUnavailable, errProbeRunning.p.Detail)
			return nil, huma.ErrorWithHeaders(p, http.Header{"Retry-After": {"10"}})
		}
		defer s.probing.Store(false)
		n := in.Body.Workflows
		ctx, cancel := context.WithTimeout(ctx, probeTime(n))
		defer cancel()
		run := fmt.Sprintf("%x", time.Now().UnixNano())
		parallel := s.cfg.Relay.Parallel
		if parallel <= 0 {
			parallel = relay.DefaultParallel
		}
		p, err := s.starter.Probe(ctx, run, n, parallel)
		if err != nil {
			return nil, probeFailed(ctx, err)
		}
		return &struct{ Body wire.EngineProbe }{probeView(p)}, nil
	})
}

func probeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Too slow or never run: the detail says how far it got.
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable, "the engine probe did not finish in time: "+err.Error())
	}
	return toHTTP(ctx, err)
}

func probeView(p relay.Probe) wire.EngineProbe {
	host, _ := os.Hostname()
	var rate float64
	if p.Span > 0 {
		rate = float64(p.Workflows) / p.Span.Seconds()
	}
	return wire.EngineProbe{
		Workflows: p.Workflows, Parallel: p.Parallel,
		Seconds: p.Span.Seconds(), WorkflowsPerSec: rate,
		StartsSeconds: p.Starts.Seconds(), SettledSeconds: p.Settled.Seconds(),
		Instance: fmt.Sprintf("%s/%d", host, os.Getpid()),
	}
}
