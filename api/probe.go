package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/relay"
)

// The engine probe measures the Temporal engine's ceiling in the shape the
// orders take (docs/design.md §4.9): no-op workflows started by the relays
// wherever they run, through the client and the parallelism they start
// orders with, run by the order worker, timed by the Temporal server.
// `seckill bench` calls it before the wave.

// probeTime bounds a probe: two minutes, plus 50 ms a workflow (a rate of
// 20 workflows a second, far below any engine's).
func probeTime(n int) time.Duration { return 2*time.Minute + time.Duration(n)*50*time.Millisecond }

// probeStall is how long the api waits for another of the probe's
// workflows to start or complete, short of all started, before it says
// that the relays stopped: none took the probe, or one that took jobs
// stopped before starting them (a job taken is never started by another
// relay).
const probeStall = 15 * time.Second

var errProbeRunning = func() problemExample {
	e := example("probe-running", "An engine probe is running in this deployment: retry after `Retry-After` seconds",
		http.StatusServiceUnavailable, wire.CodeUnavailable, "an engine probe is running in this deployment")
	e.header = "Retry-After"
	return e
}()

func (s *Server) registerProbe() {
	huma.Register(s.api, huma.Operation{
		OperationID: "engine-probe", Method: http.MethodPost, Path: "/v1/admin/engine-probe",
		Summary: "Measure the Temporal engine's ceiling for the orders (admin)",
		Description: "Has the relays start `workflows` no-op workflows on the order task queue, wherever they run (the api instances, " +
			"or the workers where they run them), as they start orders: the same client, as many starts in flight, eager start where a worker " +
			"shares it. Answers once the order workers have run every one, with the rate the Temporal server recorded. Run it on a quiet " +
			"system: during a wave it competes with the orders. One probe at a time in the deployment. Once it has measured, outside its window, the probe deletes its " +
			"(unless asked to `keep` them) " +
			"workflows (type SeckillEngineProbe), and any an earlier probe left, so that the Temporal Web UI lists the orders alone; the server " +
			"takes them off its lists within about a minute. A workflow no worker runs times out at the probe's deadline.",
		Tags: []string{"health"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		MaxBodyBytes: 1 << 10,
		Responses:    s.problems(errMalformed, errNoToken, errAdminsOnly, errTooLarge, errNotJSON, errInvalid, errProbeRunning, errUnavailable),
	}, func(ctx context.Context, in *struct{ Body wire.EngineProbeBody }) (*struct{ Body wire.EngineProbe }, error) {
		p, err := s.probe(ctx, in.Body.Workflows, in.Body.Keep)
		if err != nil {
			return nil, err
		}
		return &struct{ Body wire.EngineProbe }{p}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "engine-probe-cleanup", Method: http.MethodDelete, Path: "/v1/admin/engine-probe",
		Summary: "Delete the engine probe's workflows (admin)",
		Description: "Deletes every engine-probe workflow (type SeckillEngineProbe) the Temporal server lists, up to 1,000 a call: " +
			"those of probes asked to `keep` them, and any a probe left. A benchmark calls it once it has measured everything, so that " +
			"the server's work of deleting them lands after its measurements. Answered 503 with `Retry-After` while a probe runs.",
		Tags: []string{"health"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		Responses: s.problems(errNoToken, errAdminsOnly, errProbeRunning, errUnavailable),
	}, func(ctx context.Context, _ *struct{}) (*struct{ Body wire.ProbeCleanup }, error) {
		var out wire.ProbeCleanup
		// fault: the probe's lock (probe.lock's cases); each deletion under it is probe.delete
		held, err := s.deps.Stock.WithProbeLock(ctx, func(ctx context.Context) error {
			var derr error
			out, derr = s.cleanProbes(ctx, relay.DeleteListedProbes)
			if derr != nil && out.Deleted == 0 {
				return toHTTP(ctx, unavailable(derr))
			}
			return nil
		})
		switch {
		case err != nil:
			var answer huma.StatusError
			if errors.As(err, &answer) {
				return nil, err
			}
			return nil, toHTTP(ctx, unavailable(err))
		case !held:
			return nil, probeBusy()
		}
		return &struct{ Body wire.ProbeCleanup }{out}, nil
	})
}

// probe runs a probe of n workflows under the deployment's probe lock
// (one at a time: the relays share its jobs) and waits for its end.
func (s *Server) probe(ctx context.Context, n int, keep bool) (wire.EngineProbe, error) {
	deadline := time.Now().Add(probeTime(n))
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var p wire.EngineProbe
	held, err := s.deps.Stock.WithProbeLock(ctx, func(ctx context.Context) error {
		if err := fault.Hit(fault.ProbeLock); err != nil {
			return toHTTP(ctx, unavailable(fmt.Errorf("lock the engine probe: %w", err)))
		}
		var err error
		p, err = s.runProbe(ctx, n, deadline, keep)
		return err
	})
	switch {
	case err != nil && p.Workflows > 0:
		// Measured; the lock could not be given back, and its expiry frees it.
		slog.WarnContext(ctx, "engine probe: unlock", "err", err)
	case err != nil:
		var answer huma.StatusError
		if errors.As(err, &answer) {
			return wire.EngineProbe{}, err // the probe's own, headers and all
		}
		return wire.EngineProbe{}, toHTTP(ctx, unavailable(err)) // the lock's
	case !held:
		return wire.EngineProbe{}, probeBusy()
	}
	return p, nil
}

// probeBusy answers a probe, or a cleanup, that found another probe
// holding the deployment's lock.
func probeBusy() error {
	p := problem(http.StatusServiceUnavailable, wire.CodeUnavailable, errProbeRunning.p.Detail)
	return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {"10"}})
}

// runProbe queues the jobs of a probe of n workflows for the relays and
// waits until the order workers have run them all, or says why not; its
// errors are HTTP answers.
func (s *Server) runProbe(ctx context.Context, n int, deadline time.Time, keep bool) (wire.EngineProbe, error) {
	rdb, tc := s.deps.Stock.Client(), s.deps.Temporal
	began := time.Now()
	run := fmt.Sprintf("%x", began.UnixNano())
	withdraw, err := relay.RequestProbe(ctx, rdb, run, n, deadline)
	if withdraw != nil {
		// Done or given up (or not told whether the jobs were queued), no
		// job of this probe is left for a relay to take.
		defer withdraw()
	}
	if err != nil {
		// Not "nothing changed": the jobs may have been queued, and a relay
		// may have started some before they were withdrawn.
		slog.WarnContext(ctx, "engine probe: queue its jobs", "err", err)
		return wire.EngineProbe{}, probeProblem("the engine probe's jobs could not be queued; any a relay took before they were withdrawn run and are ignored: retry")
	}
	// Visibility is asked four times a second: the probe's own reads
	// should not weigh on the engine it measures.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var done, started int64 // the last counts: completed (visibility), started (the relays')
	moved := time.Now()     // when either last grew
	for {
		count, err := relay.CountCompleted(ctx, tc, run)
		if err != nil && ctx.Err() == nil {
			return wire.EngineProbe{}, probeLost(ctx, err)
		}
		if err == nil && count > done {
			done, moved = count, time.Now()
		}
		report, rerr := relay.ReadProbe(ctx, rdb, run)
		if rerr == nil && report.Started > started {
			started, moved = report.Started, time.Now()
		}
		switch {
		case rerr == nil && len(report.Errors) > 0:
			return wire.EngineProbe{}, probeProblem("a relay could not start the probe's workflows: " + strings.Join(report.Errors, "; "))
		case err == nil && done >= int64(n):
			p, err := s.probeResult(ctx, run, n, report.Relays)
			if err == nil && !keep {
				s.deleteProbes(ctx, &p, run, began)
			}
			return p, err
		case rerr == nil && started < int64(n) && time.Since(moved) > probeStall:
			// The relays' count can miss a start (its write lost, or a
			// relay of an older version): visibility has the last word.
			switch all, err := relay.CountStarted(ctx, tc, run); {
			case err != nil && ctx.Err() == nil:
				return wire.EngineProbe{}, probeLost(ctx, err)
			case err != nil: // the probe's context ended: answered below
			case all > started:
				started, moved = all, time.Now()
			default:
				return wire.EngineProbe{}, probeStalled(started, n, report.Relays)
			}
		}
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return wire.EngineProbe{}, probeProblem("the engine probe was given up: its caller left, or it lost the deployment's probe lock (Redis did not answer)")
			}
			return wire.EngineProbe{}, probeProblem(fmt.Sprintf("the engine probe did not finish in %v: %d of %d workflows completed (is an order worker of this version running?)",
				probeTime(n), done, n))
		case <-tick.C:
		}
	}
}

func (s *Server) probeResult(ctx context.Context, run string, n int, relays []string) (wire.EngineProbe, error) {
	times, err := relay.ReadProbeTimes(ctx, s.deps.Temporal, run)
	if err != nil {
		return wire.EngineProbe{}, probeLost(ctx, err)
	}
	p := wire.EngineProbe{Workflows: n, Seconds: times.Span.Seconds(), StartsSeconds: times.Starts.Seconds(), Relays: relays}
	if times.Span > 0 {
		p.WorkflowsPerSec = float64(n) / times.Span.Seconds()
	}
	return p, nil
}

// probeDeleteTime bounds the deletion of a probe's workflows.
const probeDeleteTime = time.Minute

// deleteProbes deletes run's workflows once the probe has measured (their
// times are read: the deletions fall outside the window and its rate),
// with any an earlier probe left, so that the Temporal Web UI lists the
// orders alone; it notes in p what it did. Still under the probe lock: the
// next probe's window does not meet these deletions. The measurement
// stands whatever they meet, even the caller leaving.
func (s *Server) deleteProbes(ctx context.Context, p *wire.EngineProbe, run string, began time.Time) {
	c, _ := s.cleanProbes(ctx, func(ctx context.Context, tc client.Client, namespace string) relay.ProbeCleanup {
		return relay.DeleteProbes(ctx, tc, namespace, run, p.Workflows, began)
	})
	p.Deleted, p.Undeleted, p.DeleteSeconds = c.Deleted, c.Undeleted, c.DeleteSeconds
}

// cleanProbes runs one of relay's deletions of probe workflows, bounded by
// probeDeleteTime and apart from the caller (it finishes if the caller
// leaves), and says what it did; a failure is logged once.
func (s *Server) cleanProbes(ctx context.Context, del func(context.Context, client.Client, string) relay.ProbeCleanup) (wire.ProbeCleanup, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeDeleteTime)
	defer cancel()
	start := time.Now()
	c := del(ctx, s.deps.Temporal, cmp.Or(s.cfg.TemporalNamespace, "default"))
	if c.Err != nil {
		slog.WarnContext(ctx, "engine probe: delete its workflows", "deleted", c.Deleted, "undeleted", c.Undeleted, "err", c.Err)
	}
	return wire.ProbeCleanup{Deleted: c.Deleted, Undeleted: c.Undeleted, DeleteSeconds: time.Since(start).Seconds()}, c.Err
}

func probeProblem(detail string) error {
	return problem(http.StatusServiceUnavailable, wire.CodeUnavailable, detail)
}

// probeLost answers a probe that could no longer read Temporal's
// visibility. Not "nothing changed": its workflows were started.
func probeLost(ctx context.Context, err error) error {
	slog.WarnContext(ctx, "engine probe: read visibility", "err", err)
	return probeProblem("the engine probe could not read its workflows from Temporal's visibility; they run to their end without it: retry")
}

// probeStalled answers a probe whose relays started `started` of its n
// workflows and then none for probeStall; relays are those that took jobs.
func probeStalled(started int64, n int, relays []string) error {
	switch {
	case started == 0 && len(relays) == 0:
		return probeProblem(fmt.Sprintf("no relay took the probe's jobs within %v: is a relay running (seckill serve, or seckill worker --relay)?", probeStall))
	case started == 0:
		return probeProblem(fmt.Sprintf("relays %s took the probe's jobs and started none of its workflows within %v: they stopped (their logs say why)",
			strings.Join(relays, ", "), probeStall))
	}
	return probeProblem(fmt.Sprintf("the relays started %d of the probe's %d workflows, then none for %v: "+
		"a relay that took the rest stopped before starting them (its log says why)", started, n, probeStall))
}
