// Package relay turns admitted orders into order workflows. reserve.lua
// appends an intent to the sale's stream; every api instance runs a relay
// that reads the streams through one consumer group and starts
// "order-<id>" workflows. An entry is acknowledged (and deleted) only after
// Temporal accepted the start, so an intent survives a Temporal outage and a
// relay crash; a crashed relay's entries are reclaimed by the others.
//
// A relay's cost follows the live work, not the sales ever held: one
// reader reads the streams of every live sale (stock.LiveSales) with one
// blocking XREADGROUP over them all, so it holds one Redis connection at a
// time however many sales Redis holds.
//
// The relay sits above workflows (it names the workflow it starts), while
// the stock package it reads from stays a leaf that knows nothing of
// Temporal.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/workflows"
)

// startTimeout bounds one workflow start, an order's or an engine
// probe's: a start that takes longer is retried (an order) or reported
// (a probe).
const startTimeout = 10 * time.Second

// Starter starts an order workflow. created is false when the workflow
// existed already, which counts as success: starts are idempotent by id.
type Starter interface {
	Start(ctx context.Context, in workflows.OrderInput) (created bool, err error)
}

// Options tune a relay. Zero values take the defaults.
type Options struct {
	// Group is the consumer group shared by all relays. Default "relay".
	Group string
	// Consumer names this relay in the group; it must differ between
	// instances. Default: host name, pid and a timestamp.
	Consumer string
	// MinIdle is how long an entry may stay unacknowledged by its reader
	// before another relay takes it over. Default 30s.
	MinIdle time.Duration
	// Batch is how many entries one read takes. Default 256.
	Batch int
	// Parallel is how many workflow starts run at once. Default 64.
	Parallel int
	// Block is how long one read waits for new entries. Default 1s.
	Block time.Duration
	// Discover is how often the relay lists the live sales: a sale that
	// goes live is read within about Discover + Block. Default 1s.
	Discover time.Duration
	// StreamsPerRead bounds the streams one XREADGROUP names. More live
	// sales than that are read in turns, still one read at a time.
	// Default 512.
	StreamsPerRead int
	// PaymentTimeout is passed to every workflow it starts whose intent
	// carries no payment_timeout_ms of its sale.
	PaymentTimeout time.Duration
	// PaymentProvider is the payment provider the orders it starts pay at
	// (OrderInput.Provider: "builtin", "stripe"); "" pays without one, the
	// pay update deciding PAID. PaymentGrace is their OrderInput.PaymentGrace
	// (0: the workflow's default).
	PaymentProvider string
	PaymentGrace    time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// BeforeStart, if set, runs after entries were read and before their
	// workflows are started. Tests use it to crash a relay in that window.
	BeforeStart func(ctx context.Context, orderIDs []int64)
	// Fenced, if set, is given the orders of intents read but not started
	// because the fence stopped their acknowledgement (redisack.IsFenced):
	// admissions on a primary the Sentinels no longer confirm, which their
	// failover loses. Their buyers were told 202 or UNCONFIRMED. The
	// processes record them (store.RememberFenced), so that the reconciler
	// and the audit name those lost (docs/design.md §3.14). It is called
	// again each time the same intents are tried; an error is logged.
	Fenced func(ctx context.Context, orders []domain.OrderRef) error
	// Metrics, if set, gets the start latency histogram, the counts of
	// what the relay did and the gauges of what it reads.
	Metrics prometheus.Registerer
	// Busy, if set, reports that purchases are being admitted right now.
	// The relay then holds its workflow starts back, for at most MaxYield
	// in a row: the buyers' 202s come first, and the sagas, which run
	// behind the intent stream anyway, take the CPU once the burst is over.
	// A burst longer than MaxYield no longer holds them back, so a
	// sustained load cannot starve the sagas.
	Busy     func() bool
	MaxYield time.Duration
	// Tracing, if set, starts each workflow inside a span whose parent is
	// the purchase's trace context, which the intent carries (traceparent),
	// so an order is one trace from the purchase to its activities. Nil: no
	// spans, at no cost.
	Tracing trace.TracerProvider
}

func (o *Options) defaults() {
	if o.Group == "" {
		o.Group = "relay"
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
	}
	if o.MinIdle <= 0 {
		o.MinIdle = 30 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Parallel <= 0 {
		o.Parallel = 64
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.Discover <= 0 {
		o.Discover = time.Second
	}
	if o.StreamsPerRead <= 0 {
		o.StreamsPerRead = 512
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Relay drains the intent streams of the live sales.
type Relay struct {
	rdb     redis.UniversalClient
	stock   *stock.Stock
	starter Starter
	opts    Options
	tracer  trace.Tracer // nil: tracing off

	created    atomic.Int64
	duplicates atomic.Int64
	failures   atomic.Int64
	collisions atomic.Int64
	dropped    atomic.Int64

	// startLatency is the time from admission (reserve.lua) to Temporal
	// accepting the workflow start.
	startLatency prometheus.Histogram

	// What the reader reads, for Reading and the gauges.
	liveSales     atomic.Int64
	streamsRead   atomic.Int64
	blockingReads atomic.Int64

	yieldMu       sync.Mutex
	yieldingSince time.Time // zero while not yielding
	yieldChecked  time.Time // the last time yield looked
}

// New returns a relay reading the streams of the sales known to st.
func New(st *stock.Stock, starter Starter, opts Options) *Relay {
	opts.defaults()
	r := &Relay{rdb: st.Client(), stock: st, starter: starter, opts: opts,
		startLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_relay_start_latency_seconds",
			Help:    "Time from admission to Temporal accepting the order workflow's start.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		})}
	if opts.Tracing != nil {
		r.tracer = opts.Tracing.Tracer("github.com/seckill/seckill/relay")
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(r.startLatency,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "seckill_relay_live_sales",
				Help: "Sales whose intent streams the relay reads: not ended, or with intents not yet started.",
			}, func() float64 { return float64(r.liveSales.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "seckill_relay_streams_read",
				Help: "Intent streams named by the relay's last XREADGROUP.",
			}, func() float64 { return float64(r.streamsRead.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "seckill_relay_blocking_reads",
				Help: "Blocking XREADGROUPs of the relay in flight, each holding a Redis connection (at most 1).",
			}, func() float64 { return float64(r.blockingReads.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "seckill_relay_workflows_started_total", Help: "Order workflows this process's relay started.",
			}, func() float64 { return float64(r.created.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "seckill_relay_start_duplicates_total", Help: "Starts that found the order's workflow existing (a retry after a start whose answer was lost, or another relay's).",
			}, func() float64 { return float64(r.duplicates.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "seckill_relay_start_failures_total", Help: "Workflow start attempts that failed and will be retried.",
			}, func() float64 { return float64(r.failures.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "seckill_relay_start_collisions_total", Help: "Starts that met the workflow of another order under the same id (an id minted twice); the intent stays unacknowledged.",
			}, func() float64 { return float64(r.collisions.Load()) }),
		)
	}
	return r
}

// Counts of what the relay did since it was created.
type Counts struct {
	Created    int64 // workflows this relay started
	Duplicates int64 // starts that found the workflow existing
	Failures   int64 // start attempts that failed and will be retried
	Dropped    int64 // malformed entries dropped
}

// Counts returns what the relay has done so far.
func (r *Relay) Counts() Counts {
	return Counts{r.created.Load(), r.duplicates.Load(), r.failures.Load(), r.dropped.Load()}
}

// Reading is what the relay reads now.
type Reading struct {
	LiveSales     int // sales whose streams it reads
	StreamsRead   int // streams named by its last read
	BlockingReads int // blocking reads in flight: 0 or 1
}

// Reading returns what the relay reads now.
func (r *Relay) Reading() Reading {
	return Reading{int(r.liveSales.Load()), int(r.streamsRead.Load()), int(r.blockingReads.Load())}
}

// batch is entries read from one stream.
type batch struct {
	s    *stream
	msgs []redis.XMessage
}

// process starts the workflows of the batches' entries in parallel and
// acknowledges (and deletes) the entries whose start Temporal accepted,
// taking their orders off the line.
// It returns how many failed in each batch; those stay pending. fenced:
// none was started because the fence stopped the acknowledgement.
func (r *Relay) process(ctx context.Context, batches []batch, awaitReplicas func(context.Context) error) (failed []int, fenced bool) {
	type job struct {
		batch int
		entry stock.StartedIntent
		in    intent
	}
	var (
		jobs []job
		ids  []int64
		done = make([][]stock.StartedIntent, len(batches))
	)
	failed = make([]int, len(batches))
	for bi, b := range batches {
		for _, m := range b.msgs {
			si, err := stock.ParseIntent(m.Values)
			if err != nil {
				r.dropped.Add(1)
				r.opts.Logger.Error("relay: dropping malformed intent", "stream", b.s.key, "entry", m.ID, "err", err)
				// Its order, if readable, leaves the line with it.
				order, _ := strconv.ParseInt(fmt.Sprint(m.Values[stock.IntentOrderID]), 10, 64)
				done[bi] = append(done[bi], stock.StartedIntent{Entry: m.ID, OrderID: order})
				continue
			}
			in := orderIntent(si, &r.opts)
			jobs = append(jobs, job{bi, stock.StartedIntent{Entry: m.ID, OrderID: in.Order.OrderID}, in})
			ids = append(ids, in.Order.OrderID)
		}
	}
	if r.opts.BeforeStart != nil && len(ids) > 0 {
		r.opts.BeforeStart(ctx, ids)
	}
	if ctx.Err() == nil && len(ids) > 0 {
		// Only admissions a replica holds become orders: one a failover
		// loses must not have a workflow (docs/design.md §3.13). They stay
		// pending and are tried again with the stream's backoff. The wait
		// runs on the connection the batches were read on (reader.ack).
		if err := awaitReplicas(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("relay: intents not yet on a replica; starting them later", "err", err)
			fenced = redisack.IsFenced(err)
			if r.opts.Fenced != nil && fenced {
				refs := make([]domain.OrderRef, len(jobs))
				for i, j := range jobs {
					refs[i] = j.in.Order
				}
				ferr := r.opts.Fenced(ctx, refs)
				if ferr == nil {
					ferr = fault.Hit(fault.RelayFenced)
				}
				if ferr != nil {
					r.opts.Logger.Error("relay: record the intents the fence stopped", "orders", len(refs), "err", ferr)
				}
			}
			for _, j := range jobs {
				failed[j.batch]++
			}
			return failed, fenced
		}
	}
	if ctx.Err() != nil {
		for _, j := range jobs {
			failed[j.batch]++
		}
		return failed, false
	}
	var (
		mu     sync.Mutex
		logged bool
		wg     sync.WaitGroup
		sem    = make(chan struct{}, r.opts.Parallel)
	)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sctx, cancel := context.WithTimeout(ctx, startTimeout)
			sctx, span := r.traceStart(sctx, j.in)
			created, err := r.starter.Start(sctx, j.in.OrderInput)
			endSpan(span, created, err)
			if err == nil {
				err = fault.Hit(fault.RelayStart)
			}
			cancel()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, new(*CollisionError)):
				// Never acknowledged as started: the order has no
				// workflow. It stays pending, retried with the stream's
				// backoff, and every attempt is an error in the log and
				// seckill_relay_start_collisions_total.
				failed[j.batch]++
				r.collisions.Add(1)
				r.opts.Logger.Error("relay: order id collision", "order_id", j.in.Order.OrderID, "sale_id", j.in.Order.SaleID, "user_id", j.in.Order.UserID, "err", err)
			case err != nil:
				failed[j.batch]++
				r.failures.Add(1)
				if ctx.Err() == nil && !logged {
					logged = true
					r.opts.Logger.Warn("relay: start order workflow", "order_id", j.in.Order.OrderID, "sale_id", j.in.Order.SaleID, "err", err)
				}
			case created:
				r.created.Add(1)
				r.startLatency.Observe(time.Since(j.in.ReservedAt).Seconds())
				done[j.batch] = append(done[j.batch], j.entry)
			default:
				r.duplicates.Add(1)
				done[j.batch] = append(done[j.batch], j.entry)
			}
		})
	}
	wg.Wait()
	// One round trip acknowledges and deletes the started entries and takes
	// their orders off the sales' lines (docs/design.md §3.11).
	started := make(map[int64][]stock.StartedIntent, len(batches))
	for bi, entries := range done {
		if len(entries) > 0 {
			sale := batches[bi].s.sale
			started[sale] = append(started[sale], entries...)
		}
	}
	if len(started) > 0 {
		err := r.stock.Started(context.WithoutCancel(ctx), r.opts.Group, started)
		if err == nil {
			err = fault.Hit(fault.RelayAck)
		}
		if err != nil {
			// The starts happened; the entries will be started again, which
			// finds the workflows existing and acknowledges them then.
			r.opts.Logger.Warn("relay: acknowledge intents", "err", err)
		}
	}
	return failed, false
}

// yield waits while Busy reports purchases in flight, for at most MaxYield
// since the relay began yielding; past that it goes on until Busy has been
// false once.
func (r *Relay) yield(ctx context.Context) {
	if r.opts.Busy == nil || r.opts.MaxYield <= 0 {
		return
	}
	const poll = 20 * time.Millisecond
	for r.opts.Busy() {
		r.yieldMu.Lock()
		// A relay that has not looked for a while (no intents to read)
		// starts a new stretch rather than continuing an old one.
		if now := time.Now(); r.yieldingSince.IsZero() || now.Sub(r.yieldChecked) > r.opts.Block+time.Second {
			r.yieldingSince = now
		}
		r.yieldChecked = time.Now()
		over := time.Since(r.yieldingSince) >= r.opts.MaxYield
		r.yieldMu.Unlock()
		if over {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
	r.yieldMu.Lock()
	r.yieldingSince = time.Time{}
	r.yieldMu.Unlock()
}

// OrderIDKey is the span attribute naming an order, as worker.OrderIDKey.
const OrderIDKey = attribute.Key("order.id")

// traceStart opens the span in which the relay starts an intent's workflow,
// a child of the purchase whose trace context the intent carries (a new
// trace when it carries none). Temporal's client interceptor carries it on
// into the workflow. Tracing off, it is ctx and a nil span.
func (r *Relay) traceStart(ctx context.Context, in intent) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	if in.traceparent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": in.traceparent})
	}
	return r.tracer.Start(ctx, "relay.StartOrderWorkflow", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(OrderIDKey.String(strconv.FormatInt(in.Order.OrderID, 10)),
			attribute.String("sale.id", strconv.FormatInt(in.Order.SaleID, 10)),
			attribute.String("workflow.id", domain.WorkflowID(in.Order.OrderID))))
}

func endSpan(span trace.Span, created bool, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.Bool("workflow.created", created))
	span.End()
}

// intent is an entry of an intent stream as the relay starts it: the
// order's workflow input and the purchase's trace context (W3C traceparent,
// "" when the api does not trace).
type intent struct {
	workflows.OrderInput
	traceparent string
}

// orderIntent is the workflow input of an entry written by reserve.lua:
// the order's payment timeout is the sale's own when the intent carries
// one, else the relay's; the payment provider and its grace are the
// relay's.
func orderIntent(si stock.Intent, o *Options) intent {
	in := intent{
		OrderInput: workflows.OrderInput{Order: si.Order, ReservedAt: si.ReservedAt, PaymentTimeout: o.PaymentTimeout,
			Provider: o.PaymentProvider, PaymentGrace: o.PaymentGrace},
		traceparent: si.Traceparent,
	}
	if si.PaymentTimeout > 0 {
		in.PaymentTimeout = si.PaymentTimeout
	}
	return in
}

// backoff doubles a pause from 100ms to 5s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

// next returns the pause to take now and doubles the following one.
func (b *backoff) next() time.Duration {
	d := b.d
	b.d = min(2*b.d, 5*time.Second)
	return d
}

func (b *backoff) wait(ctx context.Context) { sleep(ctx, b.next()) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
