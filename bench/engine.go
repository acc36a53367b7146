package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/seckill/seckill/worker"
)

// EngineCeiling is the Temporal engine's own rate on this system: no-op
// workflows started the way the relay starts orders, to their completion.
type EngineCeiling struct {
	Workflows       int     `json:"workflows"`
	Seconds         float64 `json:"seconds"`
	WorkflowsPerSec float64 `json:"workflows_per_second"`
	// EagerStarts is how many starts came back with their first workflow
	// task. A start is eager only if the worker has a free workflow task
	// slot then; the others go through the task queue, as the relay's can.
	EagerStarts int `json:"eager_starts"`
	// SettledSeconds is how long after the last completion the server's
	// visibility listed every workflow as completed: the engine's backlog,
	// waited out so that it does not weigh on what is measured next.
	SettledSeconds float64 `json:"visibility_settled_seconds,omitempty"`
}

// Engine describes where and how the engine ceiling is measured.
type Engine struct {
	Address   string // Temporal frontend host:port
	Namespace string
	Workflows int
	// Wait bounds the measurement, from the dial to the last workflow
	// listed as completed. Zero: no bound but the caller's context.
	Wait time.Duration
	// Connect, if set, sets the client's TLS and credentials (the
	// system's --temporal-tls and --temporal-api-key flags).
	Connect func(*client.Options) error
}

// engineParallel is the relay's default number of workflow starts in
// flight (relay.Options.Parallel); the worker's slots and pollers are the
// order worker's (worker.New).
const (
	engineParallel      = 64
	engineWorkflowSlots = worker.DefaultWorkflowTasks
	enginePollers       = worker.Pollers
)

// benchNoop is the no-op workflow: it completes in its first workflow
// task, so one completed workflow task is one completed workflow.
func benchNoop(workflow.Context) error { return nil }

// TemporalEngine returns a measurement of e.Workflows no-op workflows on
// the Temporal at e.Address. The bench dials it, runs a worker for the
// no-op workflow on a task queue of this run, and starts the workflows
// through the client it shares with that worker with eager start, 64 in
// flight: as `seckill dev`'s relay starts orders.
func TemporalEngine(e Engine) func(ctx context.Context, run string) (EngineCeiling, error) {
	return func(ctx context.Context, run string) (EngineCeiling, error) {
		if e.Wait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, e.Wait)
			defer cancel()
		}
		var res EngineCeiling
		// A workflow is complete when the server has accepted the
		// completion of its (only) workflow task; eager starts are those
		// whose answer carries that task.
		var completed, eager atomic.Int64
		allDone := make(chan struct{})
		count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoke(ctx, method, req, reply, cc, opts...)
			if err != nil {
				return err
			}
			switch method {
			case workflowservice.WorkflowService_RespondWorkflowTaskCompleted_FullMethodName:
				if completed.Add(1) == int64(e.Workflows) {
					close(allDone)
				}
			case workflowservice.WorkflowService_StartWorkflowExecution_FullMethodName:
				if r, ok := reply.(*workflowservice.StartWorkflowExecutionResponse); ok && r.GetEagerWorkflowTask() != nil {
					eager.Add(1)
				}
			}
			return nil
		}
		copts := client.Options{
			HostPort: e.Address, Namespace: e.Namespace,
			// The SDK's default logger writes to stdout, which --json owns.
			Logger:            sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}},
		}
		if e.Connect != nil {
			if err := e.Connect(&copts); err != nil {
				return res, err
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := client.DialContext(dctx, copts)
		cancel()
		if err != nil {
			return res, fmt.Errorf("dial temporal at %s: %w", e.Address, err)
		}
		defer c.Close()

		queue := "seckill-bench-engine-" + run
		w := sdkworker.New(c, queue, sdkworker.Options{
			MaxConcurrentWorkflowTaskExecutionSize: engineWorkflowSlots,
			MaxConcurrentWorkflowTaskPollers:       enginePollers,
		})
		w.RegisterWorkflowWithOptions(benchNoop, workflow.RegisterOptions{Name: "SeckillBenchNoop"})
		if err := w.Start(); err != nil {
			return res, fmt.Errorf("engine worker: %w", err)
		}
		defer w.Stop()

		var (
			wg     sync.WaitGroup
			sem    = make(chan struct{}, engineParallel)
			failed atomic.Value
		)
		begin := time.Now()
		for i := range e.Workflows {
			if ctx.Err() != nil || failed.Load() != nil {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := c.ExecuteWorkflow(sctx, client.StartWorkflowOptions{
					ID: fmt.Sprintf("%s-%d", queue, i), TaskQueue: queue, EnableEagerStart: true,
				}, "SeckillBenchNoop")
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return res, fmt.Errorf("start a no-op workflow: %w", err)
		}
		select {
		case <-allDone:
		case <-ctx.Done():
			return res, fmt.Errorf("%d of %d no-op workflows completed: %w", completed.Load(), e.Workflows, ctx.Err())
		}
		d := time.Since(begin)
		res = EngineCeiling{Workflows: e.Workflows, Seconds: d.Seconds(),
			WorkflowsPerSec: float64(e.Workflows) / d.Seconds(), EagerStarts: int(eager.Load())}

		settled, err := awaitVisibility(ctx, c, queue, e.Workflows)
		if err != nil {
			return res, err
		}
		res.SettledSeconds = settled.Seconds()
		return res, nil
	}
}

// awaitVisibility waits until the server lists n completed workflows on
// queue, and says how long that took.
func awaitVisibility(ctx context.Context, c client.Client, queue string, n int) (time.Duration, error) {
	begin := time.Now()
	query := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Completed'", queue)
	for {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		switch {
		case err != nil && ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil:
			return 0, fmt.Errorf("count the no-op workflows: %w", err)
		case resp.GetCount() >= int64(n):
			return time.Since(begin), nil
		}
		select {
		case <-ctx.Done():
			return 0, errors.Join(fmt.Errorf("visibility lists %d of %d no-op workflows completed", resp.GetCount(), n), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
