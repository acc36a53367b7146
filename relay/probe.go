package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/workflows"
)

// The engine probe measures the Temporal engine's ceiling in the shape the
// orders take (docs/design.md §4.9): no-op workflows (workflows.EngineProbe)
// started by the relays, wherever they run (the api, or `seckill worker
// --relay`), through the client and with the parallelism they start orders
// with, and run by the order worker. The api asks for it by pushing jobs of
// ProbeChunk workflows onto a Redis list that every relay polls; relays take
// jobs as fast as they start them, as they share the intents of a wave.

// ProbeStarter starts one engine-probe workflow; the relay's Starter
// implements it to take part in probes.
type ProbeStarter interface {
	StartProbe(ctx context.Context, workflowID string, deadline time.Time) error
}

// Redis keys of the probes: the jobs, and per run the relays that took
// part and the errors they met.
const (
	probeJobsKey = "seckill:engine-probe:jobs"
	// ProbeChunk is the workflows of one job.
	ProbeChunk = 16
	// probePoll is how often a relay looks for probe jobs: a RPOP, no
	// connection held between.
	probePoll = 500 * time.Millisecond
)

func probeRelaysKey(run string) string  { return "seckill:engine-probe:" + run + ":relays" }
func probeErrorsKey(run string) string  { return "seckill:engine-probe:" + run + ":errors" }
func probeStartedKey(run string) string { return "seckill:engine-probe:" + run + ":started" }

// ProbeID is the workflow id of a probe's i-th workflow; ProbePrefix(run)
// begins all of them.
func ProbeID(run string, i int) string { return fmt.Sprintf("%s%d", ProbePrefix(run), i) }

// ProbePrefix begins the workflow ids of run's probe workflows.
func ProbePrefix(run string) string { return "engine-probe-" + run + "-" }

type probeJob struct {
	Run      string    `json:"run"`
	From     int       `json:"from"`
	To       int       `json:"to"` // exclusive
	Deadline time.Time `json:"deadline"`
}

// RequestProbe pushes the jobs of a probe of n workflows; the relays start
// them until deadline, after which a job left over is dropped. The caller
// holds the deployment's probe lock (stock.WithProbeLock): the jobs replace
// whatever the list held, a dead probe's (or one that lost the lock, which
// then says so when its starts stall). withdraw takes back the jobs no
// relay has taken yet: a probe that gives up early leaves nothing behind
// to start. withdraw is returned with an error too, since the jobs may
// have been pushed all the same.
func RequestProbe(ctx context.Context, rdb redis.UniversalClient, run string, n int, deadline time.Time) (withdraw func(), err error) {
	jobs := make([]any, 0, n/ProbeChunk+1)
	for from := 0; from < n; from += ProbeChunk {
		b, err := json.Marshal(probeJob{Run: run, From: from, To: min(from+ProbeChunk, n), Deadline: deadline})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, b)
	}
	withdraw = func() {
		wctx := context.WithoutCancel(ctx)
		_, _ = rdb.Pipelined(wctx, func(p redis.Pipeliner) error {
			for _, j := range jobs {
				// fault: taking jobs back; one left behind is dropped at its deadline
				p.LRem(wctx, probeJobsKey, 1, j)
			}
			return nil
		})
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, probeJobsKey)
		p.LPush(ctx, probeJobsKey, jobs...)
		p.Expire(ctx, probeJobsKey, time.Until(deadline)+time.Minute)
		return nil
	})
	if err == nil {
		err = fault.Hit(fault.ProbeJobs)
	}
	return withdraw, err
}

// ProbeReport is what the relays said of a probe so far: which took part,
// how many of its workflows they started, and the errors they met.
type ProbeReport struct {
	Relays  []string
	Started int64
	Errors  []string
}

// ReadProbe reads the report of run.
func ReadProbe(ctx context.Context, rdb redis.UniversalClient, run string) (ProbeReport, error) {
	var relays *redis.StringSliceCmd
	var started *redis.StringCmd
	var errs *redis.StringSliceCmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		relays = p.SMembers(ctx, probeRelaysKey(run))
		started = p.Get(ctx, probeStartedKey(run))
		errs = p.LRange(ctx, probeErrorsKey(run), 0, 9)
		return nil
	})
	// Each command's own error: a missing counter (none started yet) is
	// redis.Nil, which must not hide another command's failure.
	if err := cmp.Or(relays.Err(), errs.Err()); err != nil {
		return ProbeReport{}, err
	}
	if err := started.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return ProbeReport{}, err
	}
	r := ProbeReport{Relays: relays.Val(), Errors: errs.Val()}
	r.Started, _ = started.Int64()
	return r, nil
}

// probeLoop takes probe jobs while ctx lasts and starts their workflows,
// Parallel in flight, as the relay starts orders. It takes a job only when
// it has room to start all of it at once, as it reads intents: a relay
// never hoards jobs that another could start sooner.
func (r *Relay) probeLoop(ctx context.Context, ps ProbeStarter) {
	sem := make(chan struct{}, r.opts.Parallel)
	room := min(ProbeChunk, r.opts.Parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(probePoll)
	defer tick.Stop()
	for {
		for range room {
			sem <- struct{}{}
		}
		job, ok := r.takeProbeJob(ctx)
		if !ok {
			for range room {
				<-sem
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			continue
		}
		ttl := time.Until(job.Deadline) + time.Minute
		r.noteProbe(ctx, probeRelaysKey(job.Run), ttl, func(p redis.Pipeliner) {
			// fault: a report; the api reads who took part, not what is owed
			p.SAdd(ctx, probeRelaysKey(job.Run), r.opts.Consumer)
		})
		for i := job.From; i < job.To; i++ {
			if i-job.From >= room {
				sem <- struct{}{}
			}
			wg.Go(func() {
				defer func() { <-sem }()
				err := ps.StartProbe(ctx, ProbeID(job.Run, i), job.Deadline)
				if err == nil {
					err = fault.Hit(fault.ProbeStart)
				}
				switch {
				case err == nil:
					r.noteProbe(ctx, probeStartedKey(job.Run), ttl, func(p redis.Pipeliner) {
						p.Incr(ctx, probeStartedKey(job.Run))
					})
				case ctx.Err() == nil:
					msg := fmt.Sprintf("%s: start %s: %v", r.opts.Consumer, ProbeID(job.Run, i), err)
					r.noteProbe(ctx, probeErrorsKey(job.Run), ttl, func(p redis.Pipeliner) {
						p.RPush(ctx, probeErrorsKey(job.Run), msg)
					})
				}
			})
		}
		for range room - min(room, job.To-job.From) {
			<-sem // the room a short job did not use
		}
	}
}

// noteProbe writes to one of a probe run's report keys (add does) and
// gives the key its run's TTL, in one round trip, whether or not ctx has
// ended: the api reads what a relay met even as the relay stops.
func (r *Relay) noteProbe(ctx context.Context, key string, ttl time.Duration, add func(p redis.Pipeliner)) {
	ctx = context.WithoutCancel(ctx)
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		add(p)
		p.Expire(ctx, key, ttl)
		return nil
	})
}

// takeProbeJob pops the oldest probe job whose probe still waits; ok is
// false when there is none (or Redis did not answer). A job popped and
// then not started (an error after the pop, a crash) is lost: its probe
// sees its starts stall and says so (api, design §4.9).
func (r *Relay) takeProbeJob(ctx context.Context) (job probeJob, ok bool) {
	for {
		raw, err := r.rdb.RPop(ctx, probeJobsKey).Result()
		if err == nil {
			err = fault.Hit(fault.ProbeTake)
		}
		switch {
		case errors.Is(err, redis.Nil):
			return job, false
		case err != nil:
			if ctx.Err() == nil {
				r.opts.Logger.Warn("relay: take an engine probe job", "err", err)
			}
			return job, false
		}
		if err := json.Unmarshal([]byte(raw), &job); err != nil || job.Run == "" || job.To <= job.From {
			r.opts.Logger.Warn("relay: malformed engine probe job dropped", "job", raw)
			continue
		}
		if time.Now().After(job.Deadline) {
			continue // the probe that asked has given up
		}
		return job, true
	}
}

// StartProbe starts one engine-probe workflow on the order task queue, as
// Start starts an order (eager from an eager starter). It ends
// by deadline: a probe no worker runs (none registers it) times out
// instead of staying open.
func (s *TemporalStarter) StartProbe(ctx context.Context, workflowID string, deadline time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.firstAlone(func() error {
		_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflowID, TaskQueue: workflows.TaskQueue, EnableEagerStart: s.eager,
			WorkflowExecutionTimeout: max(time.Until(deadline), time.Second),
		}, workflows.EngineProbeName)
		return err
	})
}

// ProbeTimes are a finished probe's times as the Temporal server recorded
// them.
type ProbeTimes struct {
	// Span is from the first workflow's start to the last one's close.
	Span time.Duration
	// Starts is from the first start to the last.
	Starts time.Duration
}

// probeQuery selects run's probe workflows in visibility.
func probeQuery(run string) string {
	return fmt.Sprintf("WorkflowType = '%s' AND WorkflowId STARTS_WITH '%s'", workflows.EngineProbeName, ProbePrefix(run))
}

// CountCompleted counts run's probe workflows that visibility lists as
// completed.
func CountCompleted(ctx context.Context, c client.Client, run string) (int64, error) {
	return countProbes(ctx, c, probeQuery(run)+" AND ExecutionStatus = 'Completed'")
}

// CountStarted counts run's probe workflows that visibility lists, in any
// state: the ones the relays started.
func CountStarted(ctx context.Context, c client.Client, run string) (int64, error) {
	return countProbes(ctx, c, probeQuery(run))
}

func countProbes(ctx context.Context, c client.Client, query string) (int64, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	if err != nil {
		return 0, fmt.Errorf("count the engine probes: %w", err)
	}
	return resp.GetCount(), nil
}

// ReadProbeTimes lists run's probe workflows and returns their times.
func ReadProbeTimes(ctx context.Context, c client.Client, run string) (ProbeTimes, error) {
	var firstStart, lastStart, lastClose time.Time
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: probeQuery(run), PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return ProbeTimes{}, fmt.Errorf("list the engine probes: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			start, end := ex.GetStartTime().AsTime(), ex.GetCloseTime().AsTime()
			if firstStart.IsZero() || start.Before(firstStart) {
				firstStart = start
			}
			if start.After(lastStart) {
				lastStart = start
			}
			if end.After(lastClose) {
				lastClose = end
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ProbeTimes{Span: lastClose.Sub(firstStart), Starts: lastStart.Sub(firstStart)}, nil
		}
	}
}

// A probe's workflows are deleted once it has measured, so that the
// Temporal Web UI's list shows the orders alone (issue 31). The server
// accepts a deletion at once, but takes a workflow that closed moments
// before off its lists only after its transfer queue's next checkpoint
// (history.transferProcessorUpdateAckInterval, 30 s by default), retrying
// from 3 s: 10 to 40 s after the probe answers (design §4.9).
const (
	// probeDeleteParallel is the deletions in flight.
	probeDeleteParallel = 32
	// probeSweepMax bounds the earlier probes' workflows one probe deletes.
	probeSweepMax = 1000
	// probeSweepAge: an earlier probe's workflow that closed more recently
	// is left to a later sweep, since its own probe may have deleted it and
	// the server not yet taken it off its lists (deleted twice, it would be
	// counted twice).
	probeSweepAge = 2 * time.Minute
)

// ProbeCleanup is what deleting a probe's workflows did.
type ProbeCleanup struct {
	// Deleted counts the deletions the server accepted.
	Deleted int
	// Undeleted counts those that failed; Err is the first failure (or
	// the sweep's list that failed).
	Undeleted int
	Err       error
}

// DeleteProbes deletes run's n probe workflows, then the workflows that
// earlier probes left (their api died before deleting them) that are
// still open or closed before began-probeSweepAge, up to probeSweepMax.
// An open one is terminated and deleted. One already gone is not counted.
// The caller holds the probe lock: no other probe's workflows are in
// flight.
func DeleteProbes(ctx context.Context, c client.Client, namespace, run string, n int, began time.Time) ProbeCleanup {
	d := newProbeDeleter(ctx, c, namespace)
	for i := range n {
		d.delete(ProbeID(run, i), "")
	}
	d.sweep(leftoverQuery(run, began.Add(-probeSweepAge)))
	return d.wait()
}

// DeleteListedProbes deletes every probe workflow the server lists, up to
// probeSweepMax: those of probes asked to keep them (a benchmark's, deleted
// once its measurements are over), and any left over. A workflow deleted
// moments ago may still be listed, and is then counted again. The caller
// holds the probe lock.
func DeleteListedProbes(ctx context.Context, c client.Client, namespace string) ProbeCleanup {
	d := newProbeDeleter(ctx, c, namespace)
	d.sweep(fmt.Sprintf("WorkflowType = '%s'", workflows.EngineProbeName))
	return d.wait()
}

// probeDeleter deletes probe workflows, probeDeleteParallel at a time.
type probeDeleter struct {
	ctx       context.Context
	c         client.Client
	namespace string
	sem       chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	out       ProbeCleanup
}

func newProbeDeleter(ctx context.Context, c client.Client, namespace string) *probeDeleter {
	return &probeDeleter{ctx: ctx, c: c, namespace: namespace, sem: make(chan struct{}, probeDeleteParallel)}
}

func (d *probeDeleter) delete(id, runID string) {
	d.sem <- struct{}{}
	d.wg.Go(func() {
		defer func() { <-d.sem }()
		_, err := d.c.WorkflowService().DeleteWorkflowExecution(d.ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: d.namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		})
		var gone *serviceerror.NotFound
		if errors.As(err, &gone) {
			return
		}
		if err == nil {
			err = fault.Hit(fault.ProbeDelete)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			d.out.Undeleted++
			d.out.Err = cmp.Or(d.out.Err, fmt.Errorf("delete the engine probe %s: %w", id, err))
			return
		}
		d.out.Deleted++
	})
}

// sweep deletes the probe workflows query lists, up to probeSweepMax.
func (d *probeDeleter) sweep(query string) {
	left, err := d.c.ListWorkflow(d.ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: probeSweepMax})
	if err != nil {
		d.mu.Lock()
		d.out.Err = cmp.Or(d.out.Err, fmt.Errorf("list the engine probes left over: %w", err))
		d.mu.Unlock()
	}
	for _, ex := range left.GetExecutions() {
		d.delete(ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
	}
}

func (d *probeDeleter) wait() ProbeCleanup {
	d.wg.Wait()
	return d.out
}

// leftoverQuery selects the probe workflows of runs other than run that
// are open, or closed before cutoff.
func leftoverQuery(run string, cutoff time.Time) string {
	return fmt.Sprintf("WorkflowType = '%s' AND WorkflowId NOT STARTS_WITH '%s' AND (ExecutionStatus = 'Running' OR CloseTime < '%s')",
		workflows.EngineProbeName, ProbePrefix(run), cutoff.UTC().Format(time.RFC3339Nano))
}
