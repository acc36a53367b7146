package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"

	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/worker"
)

// Services are the addresses of the real services. Commands that need
// them embed this struct.
type Services struct {
	DatabaseURL       string   `name:"database-url" env:"DATABASE_URL" help:"Postgres URL (postgres://user:pass@host:5432/db?sslmode=disable), or sqlite:PATH for the embedded database."`
	RedisAddr         string   `name:"redis-addr" env:"REDIS_ADDR" default:"127.0.0.1:6379" help:"Redis address host:port, or a redis:// URL."`
	RedlockAddrs      []string `name:"redlock-addrs" env:"SECKILL_REDLOCK_ADDRS" sep:"," help:"Independent Redis nodes for Redlock (comma-separated); default: the main Redis only."`
	TemporalAddress   string   `name:"temporal-address" env:"TEMPORAL_ADDRESS" default:"127.0.0.1:7233" help:"Temporal frontend host:port."`
	TemporalNamespace string   `name:"temporal-namespace" env:"TEMPORAL_NAMESPACE" default:"default" help:"Temporal namespace."`
}

// deps are the connected services.
type deps struct {
	registry *prometheus.Registry // this process's metrics
	store    *store.Store
	redis    redis.UniversalClient
	lockers  []redis.UniversalClient
	stock    *stock.Stock
	events   *push.Publisher
	temporal client.Client
	tracing  trace.TracerProvider // nil: tracing off (setupTracing)
}

func (d *deps) Close() {
	if d.temporal != nil {
		d.temporal.Close()
	}
	for _, l := range d.lockers {
		l.Close()
	}
	if d.redis != nil {
		d.redis.Close()
	}
	if d.store != nil {
		d.store.Close()
	}
}

func redisOptions(addr string) (*redis.Options, error) {
	if strings.Contains(addr, "://") {
		return redis.ParseURL(addr)
	}
	return &redis.Options{Addr: addr}, nil
}

func openRedis(addr string) (*redis.Client, error) {
	opts, err := redisOptions(addr)
	if err != nil {
		return nil, fmt.Errorf("redis address %q: %w", addr, err)
	}
	// Admission runs many short scripts at once; the relay holds blocking
	// reads too. The default pool (10 per CPU) is too small for a sale.
	opts.PoolSize = 256
	opts.MinIdleConns = 8
	return redis.NewClient(opts), nil
}

// connect opens the services the command needs. Temporal is lazy: an api
// must come up, and keep admitting buyers, while Temporal is down. tp, if
// set, traces the Temporal client's calls (starts, updates) and is handed
// to what the command builds on deps.
func (s Services) connect(ctx context.Context, needTemporal bool, tp trace.TracerProvider) (*deps, error) {
	d := &deps{registry: prometheus.NewRegistry(), tracing: tp}
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.DatabaseURL == "" {
		return nil, fmt.Errorf("--database-url (DATABASE_URL) is required")
	}
	var err error
	if d.store, err = store.Open(ctx, s.DatabaseURL); err != nil {
		return nil, err
	}
	rdb, err := openRedis(s.RedisAddr)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.redis = rdb
	pools := []redsyncredis.Pool{goredis.NewPool(rdb)}
	for _, addr := range s.RedlockAddrs {
		l, err := openRedis(addr)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.lockers = append(d.lockers, l)
		pools = append(pools, goredis.NewPool(l))
	}
	if len(s.RedlockAddrs) > 0 {
		pools = pools[1:] // the listed nodes are the quorum
	}
	d.stock = stock.New(rdb, redsync.New(pools...))
	d.events = push.NewPublisher(rdb)
	d.registry.MustRegister(collectors.NewDBStatsCollector(d.store.DB(), "seckill"), redisPoolCollector(rdb))
	if needTemporal {
		var interceptors []interceptor.ClientInterceptor
		if tp != nil {
			interceptors = append(interceptors, worker.ClientTracing(tp))
		}
		d.temporal, err = client.NewLazyClient(client.Options{
			HostPort:       s.TemporalAddress,
			Namespace:      s.TemporalNamespace,
			Logger:         sdklog.NewStructuredLogger(slog.Default().With("component", "temporal-sdk")),
			MetricsHandler: temporalMetrics(d.registry),
			Interceptors:   interceptors,
		})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("temporal client: %w", err)
		}
	}
	return d, nil
}

// waitTemporal blocks until the Temporal frontend answers or ctx ends.
func waitTemporal(ctx context.Context, c client.Client) error {
	for logged := false; ; {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CheckHealth(cctx, &client.CheckHealthRequest{})
		cancel()
		if err == nil {
			return nil
		}
		if !logged {
			slog.Warn("waiting for Temporal", "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal not reachable: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// temporalMetrics sends the Temporal SDK's metrics (workflow task and
// activity latencies, poller counts, ...) to the process's registry.
func temporalMetrics(reg *prometheus.Registry) client.MetricsHandler {
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg})
	scope, _ := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope))
}

// redisPoolCollector exposes the Redis connection pool's counters.
func redisPoolCollector(rdb *redis.Client) prometheus.Collector {
	return &poolCollector{rdb: rdb, desc: map[string]*prometheus.Desc{
		"hits":        prometheus.NewDesc("seckill_redis_pool_hits_total", "Connections reused from the pool.", nil, nil),
		"misses":      prometheus.NewDesc("seckill_redis_pool_misses_total", "Connections the pool had to open.", nil, nil),
		"timeouts":    prometheus.NewDesc("seckill_redis_pool_timeouts_total", "Waits for a connection that timed out.", nil, nil),
		"total_conns": prometheus.NewDesc("seckill_redis_pool_connections", "Open connections.", nil, nil),
		"idle_conns":  prometheus.NewDesc("seckill_redis_pool_idle_connections", "Idle connections.", nil, nil),
	}}
}

type poolCollector struct {
	rdb  *redis.Client
	desc map[string]*prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.rdb.PoolStats()
	ch <- prometheus.MustNewConstMetric(c.desc["hits"], prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(c.desc["misses"], prometheus.CounterValue, float64(st.Misses))
	ch <- prometheus.MustNewConstMetric(c.desc["timeouts"], prometheus.CounterValue, float64(st.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.desc["total_conns"], prometheus.GaugeValue, float64(st.TotalConns))
	ch <- prometheus.MustNewConstMetric(c.desc["idle_conns"], prometheus.GaugeValue, float64(st.IdleConns))
}
