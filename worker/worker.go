// Package worker runs the order saga: it registers OrderWorkflow and its
// activities on the order task queue, workflows.TaskQueue.
package worker

import (
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/workflows"
)

// Options tune a worker. Zero values take the defaults below.
type Options struct {
	// MaxConcurrentActivities bounds the activities running at once; they
	// hold database connections, so keep it near the pool size.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds workflow tasks running at once.
	MaxConcurrentWorkflowTasks int
	// Tracing, if set, traces workflows and activities (Temporal's
	// OpenTelemetry interceptor): each joins the trace whose context its
	// Temporal headers carry. Nil: no tracing, at no cost.
	Tracing trace.TracerProvider
}

// New returns a worker for the order saga; call Run or Start on it.
func New(c client.Client, acts *activities.Activities, opts Options) sdkworker.Worker {
	if opts.MaxConcurrentActivities == 0 {
		opts.MaxConcurrentActivities = 64
	}
	if opts.MaxConcurrentWorkflowTasks == 0 {
		opts.MaxConcurrentWorkflowTasks = 64
	}
	wo := sdkworker.Options{
		MaxConcurrentActivityExecutionSize:     opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: opts.MaxConcurrentWorkflowTasks,
		MaxConcurrentActivityTaskPollers:       4,
		MaxConcurrentWorkflowTaskPollers:       4,
	}
	if opts.Tracing != nil {
		wo.Interceptors = []interceptor.WorkerInterceptor{tracing(opts.Tracing)}
	}
	w := sdkworker.New(c, workflows.TaskQueue, wo)
	w.RegisterWorkflowWithOptions(workflows.OrderWorkflow, workflow.RegisterOptions{Name: "OrderWorkflow"})
	w.RegisterActivity(acts)
	return w
}
