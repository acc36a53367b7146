package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/redact"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// WorkerCmd runs the order saga worker until SIGINT/SIGTERM, then lets
// running activities finish. With --relay it also runs a relay, whose
// starts are eager: the first workflow task of each order comes back with
// its start, to this worker, instead of through the server's task queue.
type WorkerCmd struct {
	Services
	CacheFlags
	RelayFlags              `embed:"" set:"payment_provider=none"`
	Relay                   bool          `name:"relay" env:"SECKILL_WORKER_RELAY" default:"false" help:"Also run a relay here, so that its workflow starts are eager (then run the api instances with --relay=false)."`
	MaxConcurrentActivities int           `name:"max-concurrent-activities" env:"SECKILL_WORKER_ACTIVITIES" default:"64" help:"Activities running at once."`
	MaxWorkflowTasks        int           `name:"max-concurrent-workflow-tasks" env:"SECKILL_WORKER_WORKFLOW_TASKS" default:"256" help:"Workflow tasks (with their local activities) running at once; keep it well above the relay's 64 starts in flight, so that starts are eager where the worker shares the relay's client."`
	MetricsAddr             string        `name:"metrics-addr" env:"SECKILL_METRICS_ADDR" default:":9090" help:"Where the worker serves /metrics (empty = nowhere)."`
	ReconcileInterval       time.Duration `name:"reconcile-interval" env:"SECKILL_RECONCILE_INTERVAL" default:"30s" help:"How often the worker repairs Redis/Postgres drift of live sales (0 = never)."`
	RetireAfter             time.Duration `name:"retire-after" env:"SECKILL_RETIRE_AFTER" default:"24h" help:"How long after its end a drained sale whose orders are all final keeps its keys in Redis (negative = forever)."`
	PaymentReconcileFlags
}

// CacheFlags size the sticky cache of a process that runs the saga's worker.
type CacheFlags struct {
	StickyCache int `name:"sticky-cache" env:"SECKILL_STICKY_CACHE" default:"10000" help:"Orders whose workflow the worker keeps in memory between tasks; a pay or cancel of one not kept replays its history first."`
}

func (c *WorkerCmd) Run(ctx context.Context) error {
	tp, stopTracing, err := setupTracing(ctx, "seckill-worker")
	if err != nil {
		return err
	}
	defer stopTracing()
	provs, err := c.providers("")
	if err != nil {
		return err
	}
	if err := c.PaymentReconcileFlags.check(c.PaymentGrace); err != nil {
		return err
	}
	d, err := c.connect(ctx, true, tp)
	if err != nil {
		return err
	}
	defer d.Close()
	d.warnUnfenced(ctx)
	acts := &activities.Activities{Store: d.store, Stock: d.stock, Events: d.events, Metrics: activities.NewMetrics(d.registry),
		Payments: provs}
	worker.SetStickyCache(c.StickyCache)
	// A worker that starts while Temporal is down waits for it instead of
	// exiting; once started, the SDK rides out outages by itself.
	var w *worker.Worker
	for {
		if err := waitTemporal(ctx, d.temporal, c.TemporalNamespace); err != nil {
			return err
		}
		w = worker.New(d.temporal, acts, worker.Options{MaxConcurrentActivities: c.MaxConcurrentActivities, MaxConcurrentWorkflowTasks: c.MaxWorkflowTasks, Tracing: d.tracing})
		err := w.Start()
		if err == nil {
			break
		}
		slog.Warn("start worker; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	slog.Info("worker running", "task_queue", workflows.TaskQueue, "temporal", redact.URL(c.TemporalAddress), "relay", c.Relay)
	var relays sync.WaitGroup
	if c.Relay {
		// Started after the worker, on its client: the SDK hands a start's
		// first workflow task to a worker of the same client with a free
		// slot. It does not yield to admission, which runs elsewhere.
		opts := c.RelayFlags.options()
		opts.Metrics, opts.Tracing, opts.Fenced = d.registry, d.tracing, d.store.RememberFenced
		r := relay.New(d.stock, relay.NewEagerTemporalStarter(d.temporal), opts)
		relays.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				slog.Error("relay stopped", "err", err)
			}
		})
	}
	runReconciler(ctx, d, c.ReconcileInterval, c.RetireAfter, 0, reconcilePayments{provs, c.PaymentReconcileFlags})
	serveMetrics(ctx, c.MetricsAddr, d.registry)
	<-ctx.Done()
	relays.Wait() // no start after the worker stopped
	w.Stop()
	slog.Info("worker stopped")
	return nil
}
