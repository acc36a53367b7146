package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/internal/redisconf"
)

// BenchCmd runs the classic flash sale against a running system.
type BenchCmd struct {
	AuthFlags
	Target      string        `name:"target" env:"SECKILL_API" default:"http://127.0.0.1:8080" help:"Base URL of the api."`
	MetricsURL  string        `name:"metrics-url" env:"SECKILL_API_METRICS_URL" default:"http://127.0.0.1:9091/metrics" help:"The api's /metrics, on its --metrics-addr (not on --target), for its memory and CPU; empty = not measured. The default is seckill dev's."`
	Users       int           `name:"users" default:"30000" help:"Buyers."`
	Stock       int           `name:"stock" default:"20000" help:"Units on sale."`
	Concurrency int           `name:"concurrency" default:"64" help:"Requests in flight."`
	DupRate     float64       `name:"dup-rate" default:"0" help:"Fraction of buyers who send a second request."`
	Pay         float64       `name:"pay" default:"0" help:"Fraction of accepted orders to pay. Where the api takes payments at a provider, each is paid as a buyer does: its hosted page loaded and its Pay form submitted (builtin; a stripe client_secret stops the run with an error)."`
	Cancel      float64       `name:"cancel" default:"0" help:"Fraction of accepted orders to cancel."`
	Expire      bool          `name:"expire" help:"Let the orders neither paid nor cancelled expire, and measure that phase too (needs --payment-window)."`
	PayWindow   time.Duration `name:"payment-window" help:"The sale's payment timeout (10s to 24h; default: the deployment's). With --expire, longer than placing, paying and cancelling take, so the phases do not overlap."`
	StartDelay  time.Duration `name:"start-delay" default:"3s" help:"The sale opens this long after it is created."`
	Wait        time.Duration `name:"wait" default:"15m" help:"How long to wait for every order's saga, and for the engine probe."`
	Admission   bool          `name:"admission-only" help:"Stop after the purchases (overload experiments); the sagas are not awaited."`
	AcceptedOut string        `name:"accepted-out" type:"path" help:"Write every purchase answered 202 (sale, order and buyer ids, one JSON object a line) here, for a later --verify."`
	Verify      string        `name:"verify" type:"existingfile" help:"Run no sale: read a file of --accepted-out and check that the api has an order for every 202 in it (exit 1 on a lost one)."`
	Websockets  int           `name:"websockets" default:"0" help:"Hold this many idle buyer websockets open through the run and report what they cost the api's memory."`
	ReadStorm   int           `name:"read-storm-rate" default:"0" help:"Fire this many GET /v1/sales/{id} a second at the sale through the admission wave (the crowd refreshing the sale page; loopback --target only) and report their latency."`
	StormConns  int           `name:"read-storm-concurrency" default:"64" help:"Reads of the read storm in flight (its own connections)."`
	Retry       bool          `name:"retry-unavailable" env:"SECKILL_BENCH_RETRY_UNAVAILABLE" help:"Buyers answered 503 (UNAVAILABLE, UNCONFIRMED) retry with the same Idempotency-Key after the answer's Retry-After (1s if none), until a final answer or --retry-for; the report gives the window of 503 answers, their codes, the retries and the units left unsold."`
	RetryFor    time.Duration `name:"retry-for" env:"SECKILL_BENCH_RETRY_FOR" default:"60s" help:"With --retry-unavailable: a buyer gives up rather than send a retry later than this after the wave began; the wave ends when every buyer has a final answer or has given up."`
	RedisAddr   string        `name:"redis-addr" env:"REDIS_ADDR" secret:"url" help:"The system's Redis, to measure the bare reserve.lua ceiling and the HTTP limit on it (optional)."`
	CeilingDB   int           `name:"ceiling-db" default:"15" help:"Redis database for the scratch sales of the ceiling and the HTTP limit."`

	EngineWorkflows int `name:"engine-workflows" default:"1000" help:"No-op workflows of the engine ceiling, started by the api's engine probe before the sale (0 = not measured)."`

	CPU  []string `name:"cpu" sep:"none" placeholder:"NAME=SOURCE" help:"A component whose CPU to sample, repeatable; SOURCE is an http(s) /metrics URL, redis, pid:N or comm:NAME. Default: api=<metrics-url>, redis (with --redis-addr) and postgres=comm:postgres (if running here)."`
	PG   []string `name:"pg" sep:"none" placeholder:"NAME=URL" help:"A Postgres database whose commits and WAL each phase of the orders' life reports per order, repeatable (e.g. seckill=postgres://…/seckill, temporal=…, visibility=…); a password is better in PGPASSWORD or ~/.pgpass than on the command line."`
	JSON bool     `name:"json" help:"Print the result as one JSON object."`
}

func (c *BenchCmd) Run(ctx context.Context) error {
	signer, err := c.clientSigner()
	if err != nil {
		return err
	}
	if c.Verify != "" {
		return c.verify(ctx, signer)
	}
	opts := bench.Options{
		Target: c.Target, MetricsURL: c.MetricsURL, Users: c.Users, Stock: c.Stock, Concurrency: c.Concurrency,
		DupRate: c.DupRate, Pay: c.Pay, Cancel: c.Cancel, Expire: c.Expire, PaymentWindow: c.PayWindow, StartDelay: c.StartDelay, Wait: c.Wait, AdmissionOnly: c.Admission, Websockets: c.Websockets,
		ReadStormRate: c.ReadStorm, ReadStormConcurrency: c.StormConns, RetryUnavailable: c.Retry, RetryFor: c.RetryFor,
		Signer: signer, Progress: os.Stderr, NotMeasured: map[string]string{},
	}
	var ro *redis.Options
	if c.RedisAddr != "" {
		if ro, err = redisconf.Options(c.RedisAddr); err != nil {
			return err
		}
		opts.Ceiling = bench.RedisCeiling(ro, c.CeilingDB)
		opts.BareAPI = bench.BareReserveAPI(ro, c.CeilingDB)
	} else {
		opts.NotMeasured["http_limit"] = "needs --redis-addr"
	}
	if c.EngineWorkflows > 0 {
		opts.EngineWorkflows = c.EngineWorkflows
	} else {
		opts.NotMeasured["engine_ceiling"] = "--engine-workflows 0"
	}
	sources := bench.DefaultCPUSources(c.MetricsURL, ro != nil, bench.TargetDatabase(ctx, c.Target))
	if len(c.CPU) > 0 {
		if sources, err = bench.ParseCPUSources(c.CPU); err != nil {
			return err
		}
	}
	if opts.CPU, err = bench.NewCPUMeter(sources, ro); err != nil {
		return err
	}
	defer opts.CPU.Close()
	if len(c.PG) > 0 {
		pgs, err := bench.ParsePGSources(c.PG)
		if err != nil {
			return err
		}
		if opts.PG, err = bench.NewPGMeter(pgs); err != nil {
			return err
		}
		defer opts.PG.Close()
	}
	if c.AcceptedOut != "" {
		f, err := os.Create(c.AcceptedOut)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.AcceptedOut = f
	}
	r, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		fmt.Print(r.Table())
	}
	if !r.InvariantsOK {
		return &exitError{code: 1, err: errors.New("the run violated an invariant")}
	}
	return nil
}

// verify checks a file of --accepted-out against the api: every 202 must
// have its order.
func (c *BenchCmd) verify(ctx context.Context, signer *auth.Signer) error {
	f, err := os.Open(c.Verify)
	if err != nil {
		return err
	}
	defer f.Close()
	list, err := bench.ReadAccepted(f)
	if err != nil {
		return err
	}
	lost, err := bench.VerifyAccepted(ctx, c.Target, signer, list, c.Concurrency)
	if err != nil {
		return err
	}
	if c.JSON {
		if err := json.NewEncoder(os.Stdout).Encode(lost); err != nil {
			return err
		}
	} else {
		fmt.Printf("checked %d accepted purchases: %d without an order\n", lost.Checked, lost.Lost)
	}
	if lost.Lost > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d purchases answered 202 have no order, e.g. %v", lost.Lost, lost.Sample)}
	}
	return nil
}
