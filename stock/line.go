package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

// The line of a sale (docs/design.md §3.11) is the sorted set Keys.Line:
// reserve.lua adds each admitted order, scored by the version it moved the
// sale to, in the same step that appends its intent; started.lua takes an
// order off in the same step that deletes its intent. So the line holds
// exactly the admitted orders whose workflow has not started, in admission
// order, and ZRANK is an order's place in it.

var (
	//go:embed started.lua
	startedSrc    string
	startedScript = redis.NewScript(startedSrc)
)

// StartedIntent is an intent stream entry whose workflow Temporal accepted
// (or that the relay dropped as unreadable): it leaves the stream and the
// line.
type StartedIntent struct {
	Entry   string // the stream entry id
	OrderID int64  // 0 when the entry's order id could not be read
}

// startedChunk bounds the entries of one started.lua call: Lua's unpack
// takes a few thousand values at most.
const startedChunk = 512

// Started acknowledges and deletes started intents, by sale, from the
// intent streams read through group, takes their orders off the sales'
// lines and counts them as departures, in one round trip for all sales.
// Each sale's step is atomic (started.lua) and may be repeated.
func (s *Stock) Started(ctx context.Context, group string, started map[int64][]StartedIntent) error {
	run := func(sha bool) error {
		pipe := s.rdb.Pipeline()
		for sale, in := range started {
			k := KeysFor(sale)
			keys := []string{k.Intents, k.Line, k.Started}
			for len(in) > 0 {
				n := min(len(in), startedChunk)
				args := make([]any, 0, 1+2*n)
				args = append(args, group)
				for _, si := range in[:n] {
					order := ""
					if si.OrderID != 0 {
						order = strconv.FormatInt(si.OrderID, 10)
					}
					args = append(args, si.Entry, order)
				}
				if sha {
					startedScript.EvalSha(ctx, pipe, keys, args...)
				} else {
					startedScript.Eval(ctx, pipe, keys, args...)
				}
				in = in[n:]
			}
		}
		if pipe.Len() == 0 {
			return nil
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := run(true)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script cache was emptied (a restart, a failover): send the
		// script itself, which caches it again. Steps that did run are
		// harmless to repeat.
		err = run(false)
	}
	if err != nil {
		return fmt.Errorf("mark intents started: %w", err)
	}
	return nil
}

// Line defaults.
const (
	defaultLineSampleEvery = time.Second
	defaultLineWindow      = 30 * time.Second
)

// LineOptions tune a Line. Zero values take the defaults.
type LineOptions struct {
	// SampleEvery is how often, at most, a sale's departure counter is
	// read; default 1s.
	SampleEvery time.Duration
	// Window is how far back the departure rate looks; default 30s.
	Window time.Duration
	// Now is the clock the rate is measured by; default time.Now.
	Now func() time.Time
}

// Line answers where PENDING orders stand in their sales' lines, and how
// long they may still wait. One per api instance: it keeps, per sale, the
// recent samples of the departure counter its rate is measured from.
type Line struct {
	rdb  redis.UniversalClient
	opts LineOptions

	mu    sync.Mutex
	rates map[int64]*departures
}

// departures are the recent samples of one sale's departure counter,
// oldest first, spanning at most the window.
type departures struct {
	samples []departureSample
	next    time.Time // when the counter is due to be read again
}

type departureSample struct {
	at    time.Time
	count int64
}

// NewLine returns the line reader of this instance.
func (s *Stock) NewLine(opts LineOptions) *Line {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = defaultLineSampleEvery
	}
	if opts.Window <= 0 {
		opts.Window = defaultLineWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Line{rdb: s.rdb, opts: opts, rates: map[int64]*departures{}}
}

// Places returns the place in line of each of orders that is in its sale's
// line, by order id; only OrderID and SaleID are read. An order missing
// from the answer is not in line: its workflow has started, or Redis lost
// the line (docs/design.md §3.11). It costs one round trip, whatever the
// number of orders: a ZRANK per order, and a GET of the departure counter
// of each sale not sampled within SampleEvery.
func (l *Line) Places(ctx context.Context, orders []domain.OrderRef) (map[int64]domain.Place, error) {
	if len(orders) == 0 {
		return nil, nil
	}
	now := l.opts.Now()
	due := map[int64]bool{}
	l.mu.Lock()
	for _, o := range orders {
		if _, seen := due[o.SaleID]; seen {
			continue
		}
		d := l.rates[o.SaleID]
		if d == nil {
			d = &departures{}
			l.rates[o.SaleID] = d
		}
		// The first caller due reads the counter; callers meanwhile, however
		// many, use the samples there are.
		due[o.SaleID] = !now.Before(d.next)
		if due[o.SaleID] {
			d.next = now.Add(l.opts.SampleEvery)
		}
	}
	l.mu.Unlock()

	pipe := l.rdb.Pipeline()
	ranks := make([]*redis.IntCmd, len(orders))
	for i, o := range orders {
		ranks[i] = pipe.ZRank(ctx, KeysFor(o.SaleID).Line, strconv.FormatInt(o.OrderID, 10))
	}
	counters := map[int64]*redis.StringCmd{}
	for sale, d := range due {
		if d {
			counters[sale] = pipe.Get(ctx, KeysFor(sale).Started)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("places in line: %w", err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for sale, c := range counters {
		n, err := c.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			continue // unreadable: no sample this time
		}
		l.sample(sale, now, n)
	}
	l.forgetIdle(now)
	out := make(map[int64]domain.Place, len(orders))
	for i, o := range orders {
		rank, err := ranks[i].Result()
		if err != nil {
			continue // redis.Nil: not in line
		}
		p := domain.Place{Position: rank + 1}
		if rate := l.rate(o.SaleID); rate > 0 {
			p.ETASeconds = int64(math.Ceil(float64(p.Position) / rate))
		}
		out[o.OrderID] = p
	}
	return out, nil
}

// sample records the departure count of a sale read at now, dropping the
// samples that fell out of the window. l.mu is held.
func (l *Line) sample(sale int64, now time.Time, count int64) {
	d := l.rates[sale]
	if d == nil {
		return // forgotten meanwhile
	}
	if n := len(d.samples); n > 0 {
		if !now.After(d.samples[n-1].at) {
			return // a later read was recorded first
		}
		if count < d.samples[n-1].count {
			// The counter went back: Redis lost it, or the sale was
			// retired and loaded again. Start over.
			d.samples = d.samples[:0]
		}
	}
	d.samples = append(d.samples, departureSample{now, count})
	cut := 0
	for cut < len(d.samples)-1 && now.Sub(d.samples[cut].at) > l.opts.Window {
		cut++
	}
	d.samples = append(d.samples[:0], d.samples[cut:]...)
}

// rate is a sale's departures per second over its samples; 0 when unknown
// (fewer than two samples) or when nothing left the line. l.mu is held.
func (l *Line) rate(sale int64) float64 {
	d := l.rates[sale]
	if d == nil || len(d.samples) < 2 {
		return 0
	}
	first, last := d.samples[0], d.samples[len(d.samples)-1]
	span := last.at.Sub(first.at).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(last.count-first.count) / span
}

// forgetIdle drops the samples of sales nobody asked about for a window:
// they are stale, and the map would otherwise keep every sale ever asked
// about. l.mu is held.
func (l *Line) forgetIdle(now time.Time) {
	for sale, d := range l.rates {
		if now.Sub(d.next) > l.opts.Window {
			delete(l.rates, sale)
		}
	}
}
