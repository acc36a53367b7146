// Package relay turns admitted orders into order workflows. reserve.lua
// appends an intent to the sale's stream; every api instance runs a relay
// that reads the streams through one consumer group and starts
// "order-<id>" workflows. An entry is acknowledged (and deleted) only after
// Temporal accepted the start, so an intent survives a Temporal outage and a
// relay crash; a crashed relay's entries are reclaimed by the others.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/workflows"
)

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
	// Discover is how often the relay looks for new sales. Default 1s.
	Discover time.Duration
	// PaymentTimeout is passed to every workflow it starts.
	PaymentTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// BeforeStart, if set, runs after entries were read and before their
	// workflows are started. Tests use it to crash a relay in that window.
	BeforeStart func(ctx context.Context, orderIDs []int64)
	// Metrics, if set, gets the start latency histogram.
	Metrics prometheus.Registerer
	// Busy, if set, reports that purchases are being admitted right now.
	// The relay then holds its workflow starts back, for at most MaxYield
	// in a row: the buyers' 202s come first, and the sagas, which run
	// behind the intent stream anyway, take the CPU once the burst is over.
	// A burst longer than MaxYield no longer holds them back, so a
	// sustained load cannot starve the sagas.
	Busy     func() bool
	MaxYield time.Duration
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Relay drains the intent streams of every sale loaded into Redis.
type Relay struct {
	rdb     redis.UniversalClient
	stock   *stock.Stock
	starter Starter
	opts    Options

	created    atomic.Int64
	duplicates atomic.Int64
	failures   atomic.Int64
	dropped    atomic.Int64

	// startLatency is the time from admission (reserve.lua) to Temporal
	// accepting the workflow start.
	startLatency prometheus.Histogram

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
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(r.startLatency)
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

// Run drains streams until ctx ends. It returns ctx's error.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	draining := map[int64]bool{}
	t := time.NewTicker(r.opts.Discover)
	defer t.Stop()
	for {
		sales, err := r.stock.Sales(ctx)
		if err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("relay: list sales", "err", err)
		}
		for _, id := range sales {
			if draining[id] {
				continue
			}
			draining[id] = true
			wg.Go(func() { r.drain(ctx, id) })
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drain starts the workflows of one sale's intents until ctx ends.
func (r *Relay) drain(ctx context.Context, saleID int64) {
	key := stock.KeysFor(saleID).Intents
	log := r.opts.Logger.With("sale_id", saleID)
	backoff := newBackoff()
	groupReady := false
	ownPending := true // after a restart under the same name, finish our own entries first
	lastClaim := time.Time{}
	for ctx.Err() == nil {
		if !groupReady {
			if err := r.ensureGroup(ctx, key); err != nil {
				log.Warn("relay: create consumer group", "err", err)
				backoff.wait(ctx)
				continue
			}
			groupReady = true
		}
		var (
			msgs []redis.XMessage
			err  error
		)
		switch {
		case ownPending:
			msgs, err = r.read(ctx, key, "0", -1)
			if err == nil && len(msgs) == 0 {
				ownPending = false
				continue
			}
		case time.Since(lastClaim) >= r.opts.MinIdle/2:
			lastClaim = time.Now()
			msgs, _, err = r.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: key, Group: r.opts.Group, Consumer: r.opts.Consumer,
				MinIdle: r.opts.MinIdle, Start: "0-0", Count: int64(r.opts.Batch),
			}).Result()
			if len(msgs) > 0 {
				log.Info("relay: reclaimed intents of another relay", "count", len(msgs))
			}
		default:
			// Yield before reading: entries left unread are nobody's, so
			// holding back never ages them towards another relay's claim.
			r.yield(ctx)
			msgs, err = r.read(ctx, key, ">", r.opts.Block)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				groupReady = false // the stream was lost (Redis restart): recreate
				continue
			}
			log.Warn("relay: read intents", "err", err)
			backoff.wait(ctx)
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		if failed := r.process(ctx, key, msgs); failed > 0 {
			// Leave them pending and retry them from our own list after a
			// pause: Temporal may be down, and they must not be lost.
			ownPending = true
			backoff.wait(ctx)
			continue
		}
		backoff.reset()
	}
}

func (r *Relay) read(ctx context.Context, key, from string, block time.Duration) ([]redis.XMessage, error) {
	res, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: r.opts.Group, Consumer: r.opts.Consumer,
		Streams: []string{key, from}, Count: int64(r.opts.Batch), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

func (r *Relay) ensureGroup(ctx context.Context, key string) error {
	err := r.rdb.XGroupCreateMkStream(ctx, key, r.opts.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// process starts the workflows of msgs in parallel and acknowledges (and
// deletes) the entries whose start Temporal accepted. It returns how many
// failed; those stay pending.
func (r *Relay) process(ctx context.Context, key string, msgs []redis.XMessage) int {
	inputs := make([]*workflows.OrderInput, len(msgs))
	var ids []int64
	var done []string
	for i, m := range msgs {
		in, err := parseIntent(m.Values)
		if err != nil {
			r.dropped.Add(1)
			r.opts.Logger.Error("relay: dropping malformed intent", "stream", key, "entry", m.ID, "err", err)
			done = append(done, m.ID)
			continue
		}
		in.PaymentTimeout = r.opts.PaymentTimeout
		inputs[i] = &in
		ids = append(ids, in.Order.OrderID)
	}
	if r.opts.BeforeStart != nil {
		r.opts.BeforeStart(ctx, ids)
		if ctx.Err() != nil {
			return len(ids)
		}
	}
	var (
		mu     sync.Mutex
		failed int
		wg     sync.WaitGroup
		sem    = make(chan struct{}, r.opts.Parallel)
	)
	for i, in := range inputs {
		if in == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			created, err := r.starter.Start(sctx, *in)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
				r.failures.Add(1)
				if ctx.Err() == nil && failed == 1 {
					r.opts.Logger.Warn("relay: start order workflow", "order_id", in.Order.OrderID, "err", err)
				}
			case created:
				r.created.Add(1)
				r.startLatency.Observe(time.Since(in.ReservedAt).Seconds())
				done = append(done, msgs[i].ID)
			default:
				r.duplicates.Add(1)
				done = append(done, msgs[i].ID)
			}
		})
	}
	wg.Wait()
	if len(done) > 0 {
		actx := context.WithoutCancel(ctx)
		pipe := r.rdb.Pipeline()
		pipe.XAck(actx, key, r.opts.Group, done...)
		pipe.XDel(actx, key, done...)
		if _, err := pipe.Exec(actx); err != nil {
			// The starts happened; the entries will be started again, which
			// finds the workflows existing and acknowledges them then.
			r.opts.Logger.Warn("relay: acknowledge intents", "err", err)
		}
	}
	return failed
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

// parseIntent reads an entry written by reserve.lua.
func parseIntent(v map[string]any) (workflows.OrderInput, error) {
	num := func(k string) (int64, error) {
		s, _ := v[k].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %s: %w", k, err)
		}
		return n, nil
	}
	var in workflows.OrderInput
	var err error
	if in.Order.OrderID, err = num("order_id"); err != nil {
		return in, err
	}
	if in.Order.SaleID, err = num("sale_id"); err != nil {
		return in, err
	}
	if in.Order.AmountCents, err = num("amount_cents"); err != nil {
		return in, err
	}
	ms, err := num("reserved_ms")
	if err != nil {
		return in, err
	}
	in.ReservedAt = time.UnixMilli(ms).UTC()
	in.Order.UserID, _ = v["user_id"].(string)
	if in.Order.UserID == "" {
		return in, errors.New("field user_id: empty")
	}
	return in, nil
}

// backoff doubles a pause from 100ms to 5s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

func (b *backoff) wait(ctx context.Context) {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	b.d = min(2*b.d, 5*time.Second)
}
