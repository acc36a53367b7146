package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/workflows"
)

// Probe is what an engine probe measured: n no-op workflows
// (workflows.EngineProbe) started on the order task queue from this
// starter's client, Parallel at a time with eager start, as the relay
// starts orders, and run by the order worker. Its times are the Temporal
// server's own records of the workflows, so they do not depend on where
// the caller runs (docs/design.md §4.9).
type Probe struct {
	Workflows int
	Parallel  int
	// Span is from the first probe's start to the last one's close, as the
	// server recorded them.
	Span time.Duration
	// Starts is how long this process took to start them all.
	Starts time.Duration
	// Settled is how long after the last start returned the server's
	// visibility listed every probe completed.
	Settled time.Duration
}

// probePrefix begins every probe workflow's id: "engine-probe-<run>-<i>".
const probePrefix = "engine-probe-"

// Probe starts n engine-probe workflows named after run, parallel at a time,
// and waits until the server lists all of them completed. A probe that
// never completes (no worker registers workflows.EngineProbeName, one that
// is not this version's) makes it wait until ctx ends.
func (s *TemporalStarter) Probe(ctx context.Context, run string, n, parallel int) (Probe, error) {
	res := Probe{Workflows: n, Parallel: parallel}
	prefix := probePrefix + run + "-"
	var (
		wg     sync.WaitGroup
		sem    = make(chan struct{}, parallel)
		mu     sync.Mutex
		failed error
	)
	begin := time.Now()
	for i := range n {
		sem <- struct{}{}
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			err := s.firstAlone(func() error {
				_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: fmt.Sprintf("%s%d", prefix, i), TaskQueue: workflows.TaskQueue, EnableEagerStart: true,
				}, workflows.EngineProbeName)
				return err
			})
			if err != nil {
				mu.Lock()
				failed = cmpErr(failed, fmt.Errorf("start engine probe %d: %w", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil || ctx.Err() != nil {
		return res, cmpErr(failed, ctx.Err())
	}
	res.Starts = time.Since(begin)

	query := fmt.Sprintf("WorkflowType = '%s' AND WorkflowId STARTS_WITH '%s'", workflows.EngineProbeName, prefix)
	settled := time.Now()
	if err := awaitCompleted(ctx, s.client, query, n); err != nil {
		return res, err
	}
	res.Settled = time.Since(settled)
	span, err := serverSpan(ctx, s.client, query)
	if err != nil {
		return res, err
	}
	res.Span = span
	return res, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// awaitCompleted polls visibility until it counts n completed workflows
// matching query.
func awaitCompleted(ctx context.Context, c client.Client, query string, n int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: query + " AND ExecutionStatus = 'Completed'",
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("count the engine probes: %w", err)
		case resp.GetCount() >= int64(n):
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%d of %d engine probes completed (is an order worker of this version running?)",
				resp.GetCount(), n), ctx.Err())
		case <-tick.C:
		}
	}
}

// serverSpan is the time from the earliest start to the latest close of
// the workflows matching query, as the server recorded them.
func serverSpan(ctx context.Context, c client.Client, query string) (time.Duration, error) {
	var first, last time.Time
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return 0, fmt.Errorf("list the engine probes: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			start, end := ex.GetStartTime().AsTime(), ex.GetCloseTime().AsTime()
			if first.IsZero() || start.Before(first) {
				first = start
			}
			if end.After(last) {
				last = end
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return last.Sub(first), nil
		}
	}
}
