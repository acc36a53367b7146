// Package bench is seckill's load generator: the classic flash sale (U
// buyers race for S units) against a running system over real HTTP, timed
// and checked, plus the Redis ceiling it is measured against.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
)

// Options describe one run.
type Options struct {
	Target      string  // api base URL
	MetricsURL  string  // the api's /metrics (on its --metrics-addr), for its memory; "" = not measured
	Users       int     // buyers
	Stock       int     // units on sale
	Concurrency int     // requests in flight
	DupRate     float64 // fraction of buyers who send a second request
	Pay         float64 // fraction of accepted orders to pay (at the provider's hosted page where the api pays there: checkout.go)
	Cancel      float64 // fraction of accepted orders to cancel
	// Expire lets the orders neither paid nor cancelled expire, and
	// measures that too; it needs PaymentWindow, the sale's payment
	// timeout, longer than placing, paying and cancelling take.
	Expire        bool
	PaymentWindow time.Duration // 0: the deployment's default
	StartDelay    time.Duration
	Wait          time.Duration // how long to wait for the sagas
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
	// ReadStormRate, if positive, fires that many GET /v1/sales/{id} a
	// second at the sale through the admission wave (storm.go), from
	// ReadStormConcurrency connections of its own (0: the default). The
	// target must be on loopback.
	ReadStormRate        int
	ReadStormConcurrency int
	// RetryUnavailable makes the buyers told 503 (UNAVAILABLE,
	// UNCONFIRMED) retry with the same Idempotency-Key after the answer's
	// Retry-After (a second if it gave none, plus up to a quarter), until
	// they have a final answer or their next retry would be sent more than
	// RetryFor after the wave began (retry.go).
	RetryUnavailable bool
	RetryFor         time.Duration

	// The limits, each measured before the sale if set (see Run).
	// Ceiling measures bare reserve.lua calls (RedisCeiling).
	Ceiling func(ctx context.Context, users, stock, concurrency int) (time.Duration, error)
	// BareAPI starts the HTTP limit's bare handler (BareReserveAPI).
	BareAPI func(ctx context.Context, units, concurrency int) (*BareAPI, error)
	// EngineWorkflows, if positive, measures the Temporal engine's
	// ceiling for the orders with that many no-op workflows, through the
	// api's engine probe (EngineCeiling).
	EngineWorkflows int
	// NotMeasured says why a limit left nil above is not measured, by its
	// JSON name ("http_limit", "engine_ceiling"), for the report.
	NotMeasured map[string]string
	// CPU, if set, samples the CPU of the system's components and of the
	// bench at the phase boundaries.
	CPU *CPUMeter
	// PG, if set, reads the commits and WAL of Postgres databases at the
	// boundaries of the order's phases.
	PG *PGMeter

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
	Target string `json:"target"`
	SaleID string `json:"sale_id"`
	// SaleWorkflowsURL lists the sale's order workflows in the Temporal
	// Web UI (empty where the api names no UI).
	SaleWorkflowsURL string `json:"sale_workflows_url,omitempty"`
	Users            int    `json:"users"`
	Stock            int    `json:"stock"`
	Requests         int    `json:"requests"`
	Concurrency      int    `json:"concurrency"`
	Cores            int    `json:"cores"`
	LoadBefore       string `json:"load_average_before"`
	LoadAfter        string `json:"load_average_after"`

	AdmissionStart   time.Time      `json:"admission_started_at"`
	AdmissionSeconds float64        `json:"admission_seconds"`
	RequestsPerSec   float64        `json:"requests_per_second"`
	Latency          Latency        `json:"latency"`
	Outcomes         map[string]int `json:"outcomes"`
	Accepted         int            `json:"accepted"`
	// HeldUnconfirmed are the purchases answered UNCONFIRMED at the end
	// (no retry, or the buyer gave up) whose unit was taken all the same:
	// their orders are the sale's besides the Accepted ones.
	HeldUnconfirmed int `json:"held_unconfirmed,omitempty"`
	// ReadStorm is the reads fired through the wave (Options.ReadStormRate).
	ReadStorm *ReadStorm `json:"read_storm,omitempty"`
	// Unavailable is the wave's 503 answers and the buyers' retries, when
	// there were 503s or the buyers retried them (Outcomes then counts
	// each request's final answer).
	Unavailable *Unavailable `json:"unavailable,omitempty"`

	CeilingSeconds  float64 `json:"redis_ceiling_seconds,omitempty"`
	AdmissionVsCeil float64 `json:"admission_vs_ceiling,omitempty"`
	// The HTTP limit, and admission's wall time and p99 as ratios to it.
	HTTPLimit       *HTTPLimit `json:"http_limit,omitempty"`
	AdmissionVsHTTP float64    `json:"admission_vs_http_limit,omitempty"`
	P99VsHTTP       float64    `json:"p99_vs_http_limit,omitempty"`
	// The Temporal engine's ceiling, and the saga's rate as a ratio to it;
	// SagaLoad* are the load averages around the saga phase, to read
	// beside the ceiling's (EngineCeiling.LoadBefore, LoadAfter).
	Engine *EngineCeiling `json:"engine_ceiling,omitempty"`
	// EngineCleanup is the deletion of the probe's workflows, once the run
	// has measured everything (EngineProbeBody.Keep).
	EngineCleanup  *ProbeCleanup     `json:"engine_probe_cleanup,omitempty"`
	SagaVsEngine   float64           `json:"saga_vs_engine,omitempty"`
	SagaLoadBefore string            `json:"saga_load_average_before,omitempty"`
	SagaLoadAfter  string            `json:"saga_load_average_after,omitempty"`
	NotMeasured    map[string]string `json:"not_measured,omitempty"`
	CPU            *CPU              `json:"cpu,omitempty"`

	CreatedSeconds  float64 `json:"all_orders_created_seconds"`
	OrdersPerSecond float64 `json:"saga_orders_per_second"`
	AllCreated      bool    `json:"all_orders_created"`
	AdmissionOnly   bool    `json:"admission_only,omitempty"`
	APIMemory       Memory  `json:"api_memory"`
	Paid            int     `json:"paid"`
	Cancelled       int     `json:"cancelled"`
	EndSeconds      float64 `json:"pay_cancel_settled_seconds,omitempty"`
	Stats           Stats   `json:"final_stats"`
	// Phases are the order's life, phase by phase: place, pay, cancel,
	// expire (those the run had).
	Phases []OrderPhase `json:"phases,omitempty"`
	// Lost is the check of every 202 by its order id (not after
	// --admission-only: run `seckill bench --verify` on --accepted-out).
	Lost         *Lost    `json:"lost_202s,omitempty"`
	InvariantsOK bool     `json:"invariants_ok"`
	Violations   []string `json:"violations"`
}

// Stats is GET /v1/sales/{id}/stats, with the checks a run applies to it.
type Stats wire.SaleStats

// orders is how many orders the wave made: one per 202, and one per
// purchase left unconfirmed that held its unit.
func (r *Result) orders() int { return r.Accepted + r.HeldUnconfirmed }

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
	c.metrics = o.MetricsURL
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
	if o.CPU != nil {
		r.CPU = &CPU{Sources: o.CPU.Sources(), Unavailable: map[string]string{}}
	}
	if err := c.measureLimits(ctx, r, o, admin, tokens, requests); err != nil {
		return nil, err
	}

	starts := time.Now().Add(o.StartDelay).Truncate(time.Millisecond)
	sale, err := c.api.WithToken(admin).CreateSale(ctx, wire.CreateSaleBody{
		Name: "bench " + run, PriceCents: 100, Stock: o.Stock, StartsAt: starts, EndsAt: starts.Add(time.Hour),
		PaymentTimeoutSeconds: int(o.PaymentWindow.Seconds()),
	})
	if err != nil {
		return nil, fmt.Errorf("create sale: %w", err)
	}
	r.SaleID = sale.ID
	r.SaleWorkflowsURL = c.saleWorkflowsURL(ctx, sale.ID)
	if err := waitUntil(ctx, starts); err != nil {
		return nil, err
	}

	// CPU is sampled at the phase boundaries: just before the first
	// purchase, at the end of the wave, when every order is created, and
	// around each later phase of the orders' life.
	preWave := o.probe(ctx)
	w, begin, err := c.admit(ctx, r, o, sale.ID, tokens, requests)
	if err != nil {
		return nil, err
	}
	accepted := w.accepted
	wave := o.probe(ctx)
	if o.CPU != nil {
		r.CPU.Admission = phase(*preWave.cpu, *wave.cpu, r.CPU.Unavailable)
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
	if o.AdmissionOnly {
		if err := c.countHeld(ctx, r, o, sale.ID, admin, w.unconfirmed, userOf); err != nil {
			return nil, err
		}
	} else {
		deadline := time.Now().Add(o.Wait)
		r.SagaLoadBefore = loadAverage()
		c.awaitCreated(ctx, r, o, sale.ID, admin, begin, deadline)
		r.SagaLoadAfter = loadAverage()
		created := o.probe(ctx)
		if o.CPU != nil {
			r.CPU.Saga = phase(*wave.cpu, *created.cpu, r.CPU.Unavailable)
		}
		if err := c.countHeld(ctx, r, o, sale.ID, admin, w.unconfirmed, userOf); err != nil {
			return nil, err
		}
		// Placing's CPU is the saga's, from the end of the wave (what the
		// relays start during the wave counts in admission); its Postgres
		// writes are counted from before the wave, since admission
		// writes none.
		from := wave
		from.pg = preWave.pg
		r.Phases = append(r.Phases, newPhase(PhasePlace, r.orders(), r.AllCreated, from, created, nil, r.cpuUnavailable()))
		if err := c.lifePhases(ctx, r, o, sale.ID, admin, accepted, begin, deadline); err != nil {
			return nil, err
		}
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
	if r.Engine != nil && !r.Engine.Legacy {
		// Measured everything: the probe's workflows may go now.
		cleanup, err := c.deleteProbes(ctx, admin)
		if err != nil {
			cleanup.Error = err.Error()
		}
		r.EngineCleanup = &cleanup
	}
	return r, nil
}

func (o Options) validate() error {
	if o.Users <= 0 || o.Stock <= 0 || o.Concurrency <= 0 {
		return errors.New("users, stock and concurrency must be positive")
	}
	if o.Pay < 0 || o.Cancel < 0 || o.Pay+o.Cancel > 1 {
		return errors.New("--pay and --cancel are fractions that add up to at most 1")
	}
	if o.Expire && o.PaymentWindow < 10*time.Second {
		return errors.New("--expire needs --payment-window (at least 10s), longer than placing, paying and cancelling take")
	}
	if o.PaymentWindow != 0 && (o.PaymentWindow < 10*time.Second || o.PaymentWindow > 24*time.Hour) {
		return errors.New("--payment-window is 10s to 24h")
	}
	if o.ReadStormRate < 0 || o.ReadStormConcurrency < 0 {
		return errors.New("--read-storm-rate and --read-storm-concurrency must not be negative")
	}
	if o.ReadStormRate > 0 {
		if err := loopbackOnly(o.Target); err != nil {
			return err
		}
	}
	if o.RetryUnavailable && o.RetryFor <= 0 {
		return errors.New("--retry-unavailable needs a positive --retry-for")
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
