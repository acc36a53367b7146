// Package bench is seckill's load generator: the classic flash sale (U
// buyers race for S units) against a running system over real HTTP, timed
// and checked, plus the Redis ceiling it is measured against.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
)

// Options describe one run.
type Options struct {
	Target      string  // api base URL
	Users       int     // buyers
	Stock       int     // units on sale
	Concurrency int     // requests in flight
	DupRate     float64 // fraction of buyers who send a second request
	Pay         float64 // fraction of accepted orders to pay
	Cancel      float64 // fraction of accepted orders to cancel
	StartDelay  time.Duration
	Wait        time.Duration // how long to wait for the sagas
	// AdmissionOnly stops after the purchases: for overload experiments,
	// where the sagas are not what is measured.
	AdmissionOnly bool
	// AcceptedOut, if set, gets every purchase answered 202 (NDJSON, see
	// Accepted) once the wave is over.
	AcceptedOut io.Writer
	// Websockets, if positive, opens that many idle buyer websockets (the
	// first buyers') before the sale and holds them through the run.
	Websockets int
	Signer     *auth.Signer

	// The limits, each measured before the sale if set (see Run).
	// Ceiling measures bare reserve.lua calls (RedisCeiling).
	Ceiling func(ctx context.Context, users, stock, concurrency int) (time.Duration, error)
	// BareAPI starts the HTTP limit's bare handler (BareReserveAPI).
	BareAPI func(ctx context.Context, units, concurrency int) (*BareAPI, error)
	// Engine measures the Temporal engine's ceiling (TemporalEngine); run
	// names this run, for its task queue and workflow ids.
	Engine func(ctx context.Context, run string) (EngineCeiling, error)
	// NotMeasured says why a limit left nil above is not measured, by its
	// JSON name ("http_limit", "engine_ceiling"), for the report.
	NotMeasured map[string]string
	// CPU, if set, samples the CPU of the system's components and of the
	// bench at the phase boundaries.
	CPU *CPUMeter

	Progress io.Writer // progress bars; nil = none
}

// Latency is a latency summary in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Result is what a run measured.
type Result struct {
	Target      string `json:"target"`
	SaleID      string `json:"sale_id"`
	Users       int    `json:"users"`
	Stock       int    `json:"stock"`
	Requests    int    `json:"requests"`
	Concurrency int    `json:"concurrency"`
	Cores       int    `json:"cores"`
	LoadBefore  string `json:"load_average_before"`
	LoadAfter   string `json:"load_average_after"`

	AdmissionStart   time.Time      `json:"admission_started_at"`
	AdmissionSeconds float64        `json:"admission_seconds"`
	RequestsPerSec   float64        `json:"requests_per_second"`
	Latency          Latency        `json:"latency"`
	Outcomes         map[string]int `json:"outcomes"`
	Accepted         int            `json:"accepted"`

	CeilingSeconds  float64 `json:"redis_ceiling_seconds,omitempty"`
	AdmissionVsCeil float64 `json:"admission_vs_ceiling,omitempty"`
	// The HTTP limit, and admission's wall time and p99 as ratios to it.
	HTTPLimit       *HTTPLimit `json:"http_limit,omitempty"`
	AdmissionVsHTTP float64    `json:"admission_vs_http_limit,omitempty"`
	P99VsHTTP       float64    `json:"p99_vs_http_limit,omitempty"`
	// The Temporal engine's ceiling, and the saga's rate as a ratio to it.
	Engine       *EngineCeiling    `json:"engine_ceiling,omitempty"`
	SagaVsEngine float64           `json:"saga_vs_engine,omitempty"`
	NotMeasured  map[string]string `json:"not_measured,omitempty"`
	CPU          *CPU              `json:"cpu,omitempty"`

	CreatedSeconds  float64 `json:"all_orders_created_seconds"`
	OrdersPerSecond float64 `json:"saga_orders_per_second"`
	AllCreated      bool    `json:"all_orders_created"`
	AdmissionOnly   bool    `json:"admission_only,omitempty"`
	APIMemory       Memory  `json:"api_memory"`
	Paid            int     `json:"paid"`
	Cancelled       int     `json:"cancelled"`
	EndSeconds      float64 `json:"pay_cancel_settled_seconds,omitempty"`
	Stats           Stats   `json:"final_stats"`
	// Lost is the check of every 202 by its order id (not after
	// --admission-only: run `seckill bench --verify` on --accepted-out).
	Lost         *Lost    `json:"lost_202s,omitempty"`
	InvariantsOK bool     `json:"invariants_ok"`
	Violations   []string `json:"violations"`
}

// Stats is GET /v1/sales/{id}/stats, with the checks a run applies to it.
type Stats wire.SaleStats

func (s Stats) live() int {
	return s.Orders["PENDING"] + s.Orders["AWAITING_PAYMENT"] + s.Orders["PAID"]
}

// drift lists how far the sale is from settled: stock conserved, Redis equal
// to Postgres, and no order still between admission and its row.
func (s Stats) drift() []string {
	var d []string
	if s.DBStock+s.live() != s.Stock {
		d = append(d, fmt.Sprintf("conservation: db stock %d + live orders %d != %d", s.DBStock, s.live(), s.Stock))
	}
	if s.RedisRemaining != s.DBStock {
		d = append(d, fmt.Sprintf("redis remaining %d != db stock %d", s.RedisRemaining, s.DBStock))
	}
	if s.RedisBuyers != int64(s.live()) {
		d = append(d, fmt.Sprintf("redis buyers %d != live orders %d", s.RedisBuyers, s.live()))
	}
	if s.Pending != 0 || s.RelayBacklog != 0 {
		d = append(d, fmt.Sprintf("orders still on their way: pending %d, relay backlog %d", s.Pending, s.RelayBacklog))
	}
	return d
}

// Run runs the experiment: it prepares the buyers and the sale, measures
// the limits on the quiet system, runs the admission wave, then (unless
// AdmissionOnly) follows the sagas to their end, and checks the result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	c := newTarget(o.Target, o.Concurrency)
	r := &Result{Target: o.Target, Users: o.Users, Stock: o.Stock, Concurrency: o.Concurrency,
		Cores: runtime.NumCPU(), LoadBefore: loadAverage(), Outcomes: map[string]int{}, NotMeasured: o.NotMeasured}
	admin, err := o.Signer.Mint("bench-admin", auth.RoleAdmin, 2*time.Hour)
	if err != nil {
		return nil, err
	}
	run := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)

	defer c.sampleMemory(ctx, r, o.Progress)()
	// Tokens are minted before the sale opens, as real buyers log in early.
	tokens := make([]string, o.Users)
	userOf := make(map[string]string, o.Users) // token -> user id
	for i := range tokens {
		user := fmt.Sprintf("bench-%s-%d", run, i)
		if tokens[i], err = o.Signer.Mint(user, auth.RoleBuyer, 2*time.Hour); err != nil {
			return nil, err
		}
		userOf[tokens[i]] = user
	}
	if o.Websockets > 0 {
		closeSockets, err := c.holdSockets(ctx, r, tokens[:o.Websockets])
		if err != nil {
			return nil, err
		}
		defer closeSockets()
	}
	requests := o.requests()
	r.Requests = len(requests)
	if err := measureLimits(ctx, r, o, run, tokens, requests); err != nil {
		return nil, err
	}

	starts := time.Now().Add(o.StartDelay).Truncate(time.Millisecond)
	sale, err := c.api.WithToken(admin).CreateSale(ctx, wire.CreateSaleBody{
		Name: "bench " + run, PriceCents: 100, Stock: o.Stock, StartsAt: starts, EndsAt: starts.Add(time.Hour),
	})
	if err != nil {
		return nil, fmt.Errorf("create sale: %w", err)
	}
	r.SaleID = sale.ID
	if err := waitUntil(ctx, starts); err != nil {
		return nil, err
	}

	// CPU is sampled at the phase boundaries: just before the first
	// purchase, at the end of the wave, and when every order is created.
	var cpuStart, cpuWave cpuSample
	if o.CPU != nil {
		r.CPU = &CPU{Sources: o.CPU.Sources(), Unavailable: map[string]string{}}
		cpuStart = o.CPU.sample(ctx)
	}
	accepted, begin, err := c.admit(ctx, r, o, sale.ID, tokens, requests)
	if err != nil {
		return nil, err
	}
	if o.CPU != nil {
		cpuWave = o.CPU.sample(ctx)
		r.CPU.Admission = phase(cpuStart, cpuWave, r.CPU.Unavailable)
	}
	won := make([]Accepted, 0, len(accepted))
	for id, tok := range accepted {
		won = append(won, Accepted{SaleID: sale.ID, OrderID: id, UserID: userOf[tok]})
	}
	slices.SortFunc(won, func(a, b Accepted) int { return strings.Compare(a.OrderID, b.OrderID) })
	if o.AcceptedOut != nil {
		if err := WriteAccepted(o.AcceptedOut, won); err != nil {
			return nil, fmt.Errorf("write the accepted purchases: %w", err)
		}
	}
	// Overload experiments stop here; the sagas are still running.
	r.AdmissionOnly = o.AdmissionOnly
	if !o.AdmissionOnly {
		deadline := time.Now().Add(o.Wait)
		c.awaitCreated(ctx, r, o, sale.ID, admin, begin, deadline)
		if o.CPU != nil {
			r.CPU.Saga = phase(cpuWave, o.CPU.sample(ctx), r.CPU.Unavailable)
		}
		c.payAndCancel(ctx, r, o, sale.ID, admin, accepted, deadline)
		// Every 202 by its order id, not only their count: a loss shows
		// even where another order would make the count come out right.
		lost, err := VerifyAccepted(ctx, o.Target, o.Signer, won, o.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("verify the accepted purchases: %w", err)
		}
		r.Lost = &lost
	}
	if r.Stats, err = c.stats(ctx, sale.ID, admin); err != nil {
		return nil, fmt.Errorf("final stats: %w", err)
	}
	r.ratios()
	r.check()
	r.LoadAfter = loadAverage()
	return r, nil
}

// measureLimits measures the limits the run is compared with, on the quiet
// system before the sale: measured after it, they would compete with the
// sagas for the same cores. The engine goes first: its no-op workflows
// leave the server work (visibility) that is waited out before the rest.
func measureLimits(ctx context.Context, r *Result, o Options, run string, tokens []string, requests []int) error {
	if o.Engine != nil {
		e, err := o.Engine(ctx, run)
		if err != nil {
			return fmt.Errorf("temporal engine ceiling: %w", err)
		}
		r.Engine = &e
	}
	if o.Ceiling != nil {
		d, err := o.Ceiling(ctx, o.Users, o.Stock, o.Concurrency)
		if err != nil {
			return fmt.Errorf("redis ceiling: %w", err)
		}
		r.CeilingSeconds = d.Seconds()
	}
	if o.BareAPI != nil {
		l, err := measureHTTPLimit(ctx, o, tokens, requests)
		if err != nil {
			return fmt.Errorf("http limit: %w", err)
		}
		r.HTTPLimit = l
	}
	return nil
}

// ratios relates the run to the limits measured in it, and its CPU to
// the work done; a ratio with a side not measured is left 0.
func (r *Result) ratios() {
	div := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	r.AdmissionVsCeil = div(r.AdmissionSeconds, r.CeilingSeconds)
	if r.HTTPLimit != nil {
		r.AdmissionVsHTTP = div(r.AdmissionSeconds, r.HTTPLimit.Seconds)
		r.P99VsHTTP = div(r.Latency.P99, r.HTTPLimit.Latency.P99)
	}
	if r.Engine != nil && !r.AdmissionOnly {
		r.SagaVsEngine = div(r.OrdersPerSecond, r.Engine.WorkflowsPerSec)
	}
	if r.CPU == nil {
		return
	}
	if a := r.CPU.Admission; a != nil {
		r.CPU.AdmissionMsPerRequest = 1000 * div(a.SystemSeconds, float64(r.Requests))
		r.CPU.LoadGeneratorMsPerRequest = 1000 * div(a.LoadGeneratorSeconds, float64(r.Requests))
	}
	// Per order only when every order was created: otherwise the CPU
	// was spent on orders not all counted.
	if s := r.CPU.Saga; s != nil && r.AllCreated {
		r.CPU.SagaMsPerOrder = 1000 * div(s.SystemSeconds, float64(r.Accepted))
	}
}

func (o Options) validate() error {
	if o.Users <= 0 || o.Stock <= 0 || o.Concurrency <= 0 {
		return errors.New("users, stock and concurrency must be positive")
	}
	if o.Pay < 0 || o.Cancel < 0 || o.Pay+o.Cancel > 1 {
		return errors.New("--pay and --cancel are fractions that add up to at most 1")
	}
	if o.Websockets > o.Users {
		return fmt.Errorf("--websockets %d exceeds --users %d (one socket per buyer)", o.Websockets, o.Users)
	}
	return nil
}

// requests is the order in which buyers press "buy": every buyer once, plus
// DupRate repeated presses, shuffled.
func (o Options) requests() []int {
	requests := make([]int, 0, o.Users+int(float64(o.Users)*o.DupRate))
	for i := range o.Users {
		requests = append(requests, i)
	}
	for range int(float64(o.Users) * o.DupRate) {
		requests = append(requests, rand.IntN(o.Users))
	}
	rand.Shuffle(len(requests), func(i, j int) { requests[i], requests[j] = requests[j], requests[i] })
	return requests
}

// sampleMemory samples the api's memory through the whole run, if its
// /metrics says (an api behind a proxy may not expose it). The returned
// function stops it and records the peak.
func (c *target) sampleMemory(ctx context.Context, r *Result, progress io.Writer) (stop func()) {
	start, err := c.rss(ctx)
	if err != nil {
		if progress != nil {
			fmt.Fprintf(progress, "api memory not measured: %v\n", err)
		}
		return func() {}
	}
	r.APIMemory.StartMiB = start
	var peak atomic.Uint64
	peak.Store(math.Float64bits(start))
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() { c.watchRSS(wctx, &peak) })
	return func() {
		stopWatch()
		watch.Wait()
		r.APIMemory.PeakMiB = math.Float64frombits(peak.Load())
	}
}

// holdSockets opens one idle result websocket per token and records what
// they cost the api; the returned function closes them.
func (c *target) holdSockets(ctx context.Context, r *Result, tokens []string) (closeAll func(), err error) {
	socks, err := c.openSockets(ctx, tokens, 32)
	if err != nil {
		return nil, err
	}
	// Let the sockets' snapshots finish before reading the cost.
	if err := waitUntil(ctx, time.Now().Add(time.Second)); err != nil {
		socks.close()
		return nil, err
	}
	r.APIMemory.Websockets = len(tokens)
	if after, err := c.rss(ctx); err == nil && r.APIMemory.StartMiB > 0 {
		r.APIMemory.WebsocketsExtraMiB = after - r.APIMemory.StartMiB
	}
	return socks.close, nil
}

// waitUntil waits until t, or until ctx ends.
func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// admit runs the admission wave against the system and records it. It
// returns the accepted orders (order id → token) and when the wave began.
func (c *target) admit(ctx context.Context, r *Result, o Options, saleID string, tokens []string, requests []int) (map[string]string, time.Time, error) {
	w, begin, err := c.wave(ctx, o, saleID, tokens, requests, "admission")
	r.AdmissionStart = begin
	if err != nil {
		return nil, begin, err
	}
	r.AdmissionSeconds = w.seconds
	r.Outcomes = w.outcomes
	r.Accepted = len(w.accepted)
	r.RequestsPerSec = float64(len(requests)) / r.AdmissionSeconds
	r.Latency = summarize(w.latencies)
	return w.accepted, begin, nil
}

// waveResult is what one admission wave saw.
type waveResult struct {
	seconds   float64
	latencies []time.Duration
	outcomes  map[string]int
	accepted  map[string]string // order id -> token
}

// wave fires the purchases: Concurrency buyers press "buy" in the order of
// requests. The admission and the HTTP limit both run it, so that the
// client side costs the same in both. It returns when the wave began.
func (c *target) wave(ctx context.Context, o Options, saleID string, tokens []string, requests []int, what string) (waveResult, time.Time, error) {
	bar := newBar(o.Progress, len(requests), what)
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		w    = waveResult{latencies: make([]time.Duration, 0, len(requests)), outcomes: map[string]int{}, accepted: map[string]string{}}
	)
	begin := time.Now()
	for range o.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(requests) || ctx.Err() != nil {
					return
				}
				tok := tokens[requests[i]]
				t0 := time.Now()
				code, orderID := c.purchase(ctx, saleID, tok)
				d := time.Since(t0)
				mu.Lock()
				w.latencies = append(w.latencies, d)
				w.outcomes[code]++
				if orderID != "" && code == "ACCEPTED" {
					w.accepted[orderID] = tok
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
	wg.Wait()
	w.seconds = time.Since(begin).Seconds()
	bar.finish()
	return w, begin, ctx.Err()
}

// awaitCreated follows the stats until every accepted order is at
// AWAITING_PAYMENT, or until deadline.
func (c *target) awaitCreated(ctx context.Context, r *Result, o Options, saleID, admin string, begin, deadline time.Time) {
	bar := newBar(o.Progress, r.Accepted, "orders created")
	for {
		st, err := c.stats(ctx, saleID, admin)
		if err == nil {
			created := st.Orders["AWAITING_PAYMENT"] + st.Orders["PAID"] + st.Orders["CANCELLED"] + st.Orders["EXPIRED"] + st.Orders["FAILED"]
			bar.set(created)
			if created >= r.Accepted && st.Pending == 0 && st.RelayBacklog == 0 {
				r.AllCreated = st.Orders["AWAITING_PAYMENT"] == r.Accepted
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.CreatedSeconds = time.Since(begin).Seconds()
	bar.finish()
	if r.CreatedSeconds > 0 {
		r.OrdersPerSecond = float64(r.Accepted) / r.CreatedSeconds
	}
}

// payAndCancel pays and cancels the asked fractions of the accepted
// orders, driving their sagas to their ends, and waits for the sale to
// settle, until deadline.
func (c *target) payAndCancel(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, deadline time.Time) {
	if o.Pay <= 0 && o.Cancel <= 0 {
		return
	}
	ends := time.Now()
	r.Paid, r.Cancelled = c.settle(ctx, accepted, o, newBar(o.Progress, int(float64(r.Accepted)*(o.Pay+o.Cancel)), "pay/cancel"))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := c.stats(ctx, saleID, admin)
		// A cancelled order's row changes before its unit returns
		// (FinishOrder → RestoreStock → ReleaseReservation), so the
		// counts alone are not the end: wait for the stock to settle too.
		if err == nil && st.Orders["PAID"] == r.Paid && st.Orders["CANCELLED"] == r.Cancelled && len(st.drift()) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.EndSeconds = time.Since(ends).Seconds()
}

// check applies the invariants visible through the stats endpoint.
func (r *Result) check() {
	st := r.Stats
	violate := func(f string, a ...any) { r.Violations = append(r.Violations, fmt.Sprintf(f, a...)) }
	if st.live() > st.Stock {
		violate("oversold: %d live orders for %d units", st.live(), st.Stock)
	}
	if r.Accepted > r.Stock {
		violate("%d purchases accepted for %d units", r.Accepted, r.Stock)
	}
	if r.AdmissionOnly {
		// The sagas are still running: only what admission alone decides.
		r.InvariantsOK = len(r.Violations) == 0
		return
	}
	r.Violations = append(r.Violations, st.drift()...)
	if !r.AllCreated {
		violate("not every accepted order reached AWAITING_PAYMENT in time")
	}
	total := 0
	for _, n := range st.Orders {
		total += n
	}
	if total != r.Accepted {
		violate("%d order rows for %d accepted purchases (lost or extra orders)", total, r.Accepted)
	}
	if r.Lost != nil && r.Lost.Lost > 0 {
		violate("%d of %d accepted purchases have no order (lost 202s), e.g. %v", r.Lost.Lost, r.Lost.Checked, r.Lost.Sample)
	}
	r.InvariantsOK = len(r.Violations) == 0
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(q * float64(len(ds)-1))
		return float64(ds[i].Microseconds()) / 1000
	}
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// target is the api under load: its REST API, its /metrics and its
// websocket.
type target struct {
	base string
	http *http.Client
	api  *client.Client // anonymous: WithToken for each buyer
}

// newTarget returns a client of the api at base with connections enough
// for concurrency requests in flight.
func newTarget(base string, concurrency int) *target {
	hc := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: concurrency * 2, MaxIdleConnsPerHost: concurrency * 2, IdleConnTimeout: time.Minute},
	}
	return &target{base: strings.TrimRight(base, "/"), http: hc, api: client.New(base, "", hc)}
}

// purchase buys one unit and names the outcome: ACCEPTED, an error code,
// or HTTP_<status> / TRANSPORT.
func (c *target) purchase(ctx context.Context, saleID, token string) (code, orderID string) {
	p, err := c.api.WithToken(token).Purchase(ctx, saleID, "")
	var refused *client.Error
	switch {
	case err == nil:
		return "ACCEPTED", p.OrderID
	case !errors.As(err, &refused):
		return "TRANSPORT", ""
	case refused.Problem.Code != "":
		return refused.Problem.Code, ""
	}
	return fmt.Sprintf("HTTP_%d", refused.StatusCode), ""
}

func (c *target) stats(ctx context.Context, saleID, admin string) (Stats, error) {
	st, err := c.api.WithToken(admin).Stats(ctx, saleID)
	return Stats(st), err
}

// settle pays and cancels the asked fractions of the accepted orders.
func (c *target) settle(ctx context.Context, accepted map[string]string, o Options, bar *bar) (paid, cancelled int) {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	nPay := int(float64(len(ids)) * o.Pay)
	nCancel := int(float64(len(ids)) * o.Cancel)
	type job struct{ id, action string }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.Concurrency, 32) {
		wg.Go(func() {
			for j := range jobs {
				// An outcome not recorded yet (202) is recorded a moment later.
				buyer := c.api.WithToken(accepted[j.id])
				var err error
				if j.action == "pay" {
					_, err = buyer.Pay(ctx, j.id)
				} else {
					_, err = buyer.Cancel(ctx, j.id)
				}
				mu.Lock()
				if err == nil && j.action == "pay" {
					paid++
				} else if err == nil {
					cancelled++
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
	for i, id := range ids[:nPay+nCancel] {
		action := "pay"
		if i >= nPay {
			action = "cancel"
		}
		jobs <- job{id, action}
	}
	close(jobs)
	wg.Wait()
	bar.finish()
	return paid, cancelled
}

// bar wraps a progress bar that may be off.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(w io.Writer, total int, what string) *bar {
	if w == nil {
		return &bar{}
	}
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())}
}

func (b *bar) add() {
	if b.pb != nil {
		_ = b.pb.Add(1)
	}
}

func (b *bar) set(n int) {
	if b.pb != nil {
		_ = b.pb.Set(n)
	}
}

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
