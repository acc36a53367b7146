// Package worker runs the order saga: it registers OrderWorkflow and its
// activities, and the engine probe's no-op workflow, on the order task
// queue, workflows.TaskQueue, and the calls to a payment provider on
// workflows.PaymentTaskQueue.
package worker

import (
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
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
	// PaymentRate is how many calls to the payment provider per second
	// every worker together may start (workflows.PaymentTaskQueue): the
	// server holds the queue's tasks to it, retries included, so the
	// provider's own limit is not met. 0: no limit.
	PaymentRate float64
}

// Defaults of Options, and the pollers of each kind.
const (
	DefaultActivities = 64
	// DefaultWorkflowTasks is well above the relay's starts in flight
	// (relay.Options.Parallel, 64): a start is eager, its first workflow
	// task handed to this worker with the start's answer, only when the
	// worker has a free workflow task slot, and an eager start spares the
	// server a task dispatch and a RecordWorkflowTaskStarted. With 64
	// slots, 64 starts in flight and the pollers' reservations, fewer than
	// half the starts were eager; with 256, the saga ran 1.8× faster at
	// 0.77× the CPU per order (docs/performance.md, "Levers").
	DefaultWorkflowTasks = 256
	// Pollers is each worker's activity task pollers: an order's steps run
	// as local activities, so activity tasks come only with a failure or a
	// payment provider's call.
	Pollers = 4
	// WorkflowTaskPollers is each worker's workflow task pollers, half of
	// them on its sticky queue. A pay or cancel update, and an expiry's
	// timer, reach the order's worker as a workflow task on that queue;
	// the server hands the task straight to a poll that is waiting for one
	// (a sync match), and writes it to its database to be read back when
	// none is. With 4 pollers two of three pays were written so (a task
	// row inserted, read and deleted, the queue's range locked: about 4
	// of a pay's 20 statements in Temporal's database); with 32, one in
	// fifty, and a pay cost the topology 0.86 of the CPU (docs/performance.md,
	// "Lever 6"). A waiting poll is one held request, nothing more.
	WorkflowTaskPollers = 32
)

// SetStickyCache sets how many workflows the process's workers keep in
// memory between their workflow tasks (the SDK's sticky cache, one per
// process); n <= 0 keeps the SDK's default, 10,000. A task for an order that is
// not kept fetches and replays its history first: an order awaiting
// payment stays open for its payment timeout, and its pay or cancel is
// such a task. Call it before the first worker starts.
func SetStickyCache(n int) {
	if n > 0 {
		sdkworker.SetStickyWorkflowCacheSize(n)
	}
}

// Worker is the order saga's worker: the order task queue's and, when
// orders pay at a provider, the payment task queue's.
type Worker struct {
	orders, payments sdkworker.Worker
}

// Start starts polling both queues.
func (w *Worker) Start() error {
	if err := w.orders.Start(); err != nil {
		return err
	}
	if w.payments != nil {
		if err := w.payments.Start(); err != nil {
			w.orders.Stop()
			return err
		}
	}
	return nil
}

// Stop stops both, waiting for the activities running (up to the SDK's
// stop timeout).
func (w *Worker) Stop() {
	if w.payments != nil {
		w.payments.Stop()
	}
	w.orders.Stop()
}

// New returns a worker for the order saga; call Start on it.
func New(c client.Client, acts *activities.Activities, opts Options) *Worker {
	if opts.MaxConcurrentActivities == 0 {
		opts.MaxConcurrentActivities = DefaultActivities
	}
	if opts.MaxConcurrentWorkflowTasks == 0 {
		opts.MaxConcurrentWorkflowTasks = DefaultWorkflowTasks
	}
	wo := sdkworker.Options{
		MaxConcurrentActivityExecutionSize:     opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: opts.MaxConcurrentWorkflowTasks,
		MaxConcurrentActivityTaskPollers:       Pollers,
		MaxConcurrentWorkflowTaskPollers:       WorkflowTaskPollers,
	}
	if opts.Tracing != nil {
		wo.Interceptors = []interceptor.WorkerInterceptor{tracing(opts.Tracing)}
	}
	w := sdkworker.New(c, workflows.TaskQueue, wo)
	w.RegisterWorkflowWithOptions(workflows.OrderWorkflow, workflow.RegisterOptions{Name: "OrderWorkflow"})
	// The refunds of money that came after its order's workflow closed.
	w.RegisterWorkflowWithOptions(workflows.PaymentSettleWorkflow, workflow.RegisterOptions{Name: workflows.PaymentSettleWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.OrderRefundWorkflow, workflow.RegisterOptions{Name: workflows.OrderRefundWorkflowName})
	// The engine probe's no-op workflows (POST /v1/admin/engine-probe) run
	// here, on this worker's slots and pollers, as the orders do.
	w.RegisterWorkflowWithOptions(workflows.EngineProbe, workflow.RegisterOptions{Name: workflows.EngineProbeName})
	w.RegisterActivity(acts)
	out := &Worker{orders: w}
	if len(acts.Payments) > 0 {
		out.payments = newPayments(c, acts, wo, opts.PaymentRate)
	}
	return out
}

// newPayments is the worker of the provider calls, activities only. Its
// rate is the queue's, shared by every worker polling it.
func newPayments(c client.Client, acts *activities.Activities, wo sdkworker.Options, rate float64) sdkworker.Worker {
	wo.DisableWorkflowWorker = true
	wo.TaskQueueActivitiesPerSecond = rate
	w := sdkworker.New(c, workflows.PaymentTaskQueue, wo)
	for name, f := range map[string]any{
		"StartPayment": acts.StartPayment, "CancelPayment": acts.CancelPayment, "RefundPayment": acts.RefundPayment,
		"RefundPaidPayment": acts.RefundPaidPayment,
	} {
		w.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: name})
	}
	return w
}
