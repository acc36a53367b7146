package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/worker"
)

// WorkerCmd runs the order saga worker until SIGINT/SIGTERM, then lets
// running activities finish.
type WorkerCmd struct {
	Services
	MaxConcurrentActivities int `name:"max-concurrent-activities" env:"SECKILL_WORKER_ACTIVITIES" default:"64" help:"Activities running at once."`
}

func (c *WorkerCmd) Run(ctx context.Context) error {
	d, err := c.connect(ctx, true)
	if err != nil {
		return err
	}
	defer d.Close()
	acts := &activities.Activities{Store: d.store, Stock: d.stock, Events: d.events}
	w := worker.New(d.temporal, acts, worker.Options{MaxConcurrentActivities: c.MaxConcurrentActivities})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	slog.Info("worker running", "task_queue", "seckill-orders", "temporal", c.TemporalAddress)
	<-ctx.Done()
	w.Stop()
	slog.Info("worker stopped")
	return nil
}
