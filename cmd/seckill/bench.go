package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/internal/redisconf"
)

// BenchCmd runs the classic flash sale against a running system.
type BenchCmd struct {
	AuthFlags
	Target      string        `name:"target" env:"SECKILL_API" default:"http://127.0.0.1:8080" help:"Base URL of the api."`
	Users       int           `name:"users" default:"30000" help:"Buyers."`
	Stock       int           `name:"stock" default:"20000" help:"Units on sale."`
	Concurrency int           `name:"concurrency" default:"64" help:"Requests in flight."`
	DupRate     float64       `name:"dup-rate" default:"0" help:"Fraction of buyers who send a second request."`
	Pay         float64       `name:"pay" default:"0" help:"Fraction of accepted orders to pay."`
	Cancel      float64       `name:"cancel" default:"0" help:"Fraction of accepted orders to cancel."`
	StartDelay  time.Duration `name:"start-delay" default:"3s" help:"The sale opens this long after it is created."`
	Wait        time.Duration `name:"wait" default:"15m" help:"How long to wait for every order's saga, and for the engine ceiling's workflows."`
	Admission   bool          `name:"admission-only" help:"Stop after the purchases (overload experiments); the sagas are not awaited."`
	Websockets  int           `name:"websockets" default:"0" help:"Hold this many idle buyer websockets open through the run and report what they cost the api's memory."`
	RedisAddr   string        `name:"redis-addr" env:"REDIS_ADDR" help:"The system's Redis, to measure the bare reserve.lua ceiling and the HTTP limit on it (optional)."`
	CeilingDB   int           `name:"ceiling-db" default:"15" help:"Redis database for the scratch sales of the ceiling and the HTTP limit."`

	TemporalAddress   string `name:"temporal-address" env:"TEMPORAL_ADDRESS" help:"The system's Temporal frontend host:port, to measure the engine's ceiling on it with no-op workflows (optional)."`
	TemporalNamespace string `name:"temporal-namespace" env:"TEMPORAL_NAMESPACE" default:"default" help:"Temporal namespace of the engine ceiling's workflows."`
	EngineWorkflows   int    `name:"engine-workflows" default:"1000" help:"No-op workflows of the engine ceiling (0 = not measured)."`

	CPU  []string `name:"cpu" sep:"none" placeholder:"NAME=SOURCE" help:"A component whose CPU to sample, repeatable; SOURCE is an http(s) /metrics URL, redis, pid:N or comm:NAME. Default: api=<target>/metrics, redis (with --redis-addr) and postgres=comm:postgres (if running here)."`
	JSON bool     `name:"json" help:"Print the result as one JSON object."`
}

func (c *BenchCmd) Run(ctx context.Context) error {
	signer, err := c.signer()
	if err != nil {
		return err
	}
	opts := bench.Options{
		Target: c.Target, Users: c.Users, Stock: c.Stock, Concurrency: c.Concurrency,
		DupRate: c.DupRate, Pay: c.Pay, Cancel: c.Cancel, StartDelay: c.StartDelay, Wait: c.Wait, AdmissionOnly: c.Admission, Websockets: c.Websockets,
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
	switch {
	case c.EngineWorkflows <= 0:
		opts.NotMeasured["engine_ceiling"] = "--engine-workflows 0"
	case c.TemporalAddress == "":
		opts.NotMeasured["engine_ceiling"] = "needs --temporal-address"
	default:
		opts.Engine = bench.TemporalEngine(bench.Engine{Address: c.TemporalAddress, Namespace: c.TemporalNamespace, Workflows: c.EngineWorkflows, Wait: c.Wait})
	}
	sources := bench.DefaultCPUSources(c.Target, ro != nil)
	if len(c.CPU) > 0 {
		if sources, err = bench.ParseCPUSources(c.CPU); err != nil {
			return err
		}
	}
	if opts.CPU, err = bench.NewCPUMeter(sources, ro); err != nil {
		return err
	}
	defer opts.CPU.Close()
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
