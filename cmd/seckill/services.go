package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"

	"github.com/seckill/seckill/internal/redact"
	"github.com/seckill/seckill/internal/redisconf"
	"github.com/seckill/seckill/internal/temporalconf"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/worker"
)

// Services are the addresses of the real services. Commands that need
// them embed this struct.
type Services struct {
	DatabaseURL       string        `name:"database-url" env:"DATABASE_URL" secret:"url" help:"Postgres URL (postgres://user:pass@host:5432/db?sslmode=disable), or sqlite:PATH for the embedded database."`
	RedisAddr         string        `name:"redis-addr" env:"REDIS_ADDR" default:"127.0.0.1:6379" secret:"url" help:"Redis address host:port, a redis:// URL, or Sentinel's: redis://SENTINEL:26379?master_name=NAME&addr=SENTINEL2:26379&addr=... (go-redis's failover URL)."`
	RedisSentinels    []string      `name:"redis-sentinels" env:"REDIS_SENTINELS" sep:"," help:"Sentinel addresses (comma-separated): Redis is the primary they name --redis-master, followed across failovers; --redis-addr is then unused."`
	RedisMaster       string        `name:"redis-master" env:"REDIS_MASTER" default:"seckill" help:"The master name the Sentinels monitor."`
	AdmitAck          string        `name:"admit-ack" env:"SECKILL_ADMIT_ACK" enum:"none,replica" default:"none" help:"replica: a purchase is answered 202, and an order-id lease, an operator change or a sale's warm-up counts, only once a Redis replica holds it (WAIT); unconfirmed purchases answer 503 UNCONFIRMED."`
	AdmitAckReplicas  int           `name:"admit-ack-replicas" env:"SECKILL_ADMIT_ACK_REPLICAS" default:"1" help:"How many Redis replicas must hold a write with --admit-ack=replica. More than one survives more partitions, but admission stops while fewer are up (docs/design.md §3.13)."`
	AdmitAckTimeout   time.Duration `name:"admit-ack-timeout" env:"SECKILL_ADMIT_ACK_TIMEOUT" default:"1s" help:"How long a write waits for its replica with --admit-ack=replica."`
	AdmitFence        string        `name:"admit-fence" env:"SECKILL_ADMIT_FENCE" default:"auto" secret:"url" help:"With --admit-ack=replica, a write counts only while a majority of the Sentinels confirm the primary it went to (docs/design.md §3.13, the fence). auto: when Redis is reached through Sentinels; off; or a Sentinel URL (redis://SENTINEL:26379?master_name=NAME&addr=...) to ask when --redis-addr is a fixed address (a proxy or virtual IP that follows the primary)."`
	RedlockAddrs      []string      `name:"redlock-addrs" env:"SECKILL_REDLOCK_ADDRS" sep:"," help:"Independent Redis nodes for Redlock (comma-separated); default: the main Redis only."`
	TemporalAddress   string        `name:"temporal-address" env:"TEMPORAL_ADDRESS" default:"127.0.0.1:7233" help:"Temporal frontend host:port."`
	TemporalNamespace string        `name:"temporal-namespace" env:"TEMPORAL_NAMESPACE" default:"default" help:"Temporal namespace."`
	TemporalConn
}

// TemporalConn is how a process reaches Temporal besides its address: TLS,
// mTLS, an API key (internal/temporalconf). The environment variables are
// the Temporal CLI's.
type TemporalConn struct {
	TemporalTLS           string `name:"temporal-tls" env:"TEMPORAL_TLS" enum:"auto,on,off" default:"auto" help:"TLS to Temporal: on, off, or auto (on with a CA, a client certificate or an API key)."`
	TemporalTLSCA         string `name:"temporal-tls-ca" env:"TEMPORAL_TLS_CA" type:"existingfile" help:"CA certificate (PEM) that verifies Temporal's; default: the system's roots."`
	TemporalTLSCert       string `name:"temporal-tls-cert" env:"TEMPORAL_TLS_CERT" type:"existingfile" help:"Client certificate (PEM) for mTLS, with --temporal-tls-key."`
	TemporalTLSKey        string `name:"temporal-tls-key" env:"TEMPORAL_TLS_KEY" type:"existingfile" help:"Private key (PEM) of --temporal-tls-cert."`
	TemporalTLSServerName string `name:"temporal-tls-server-name" env:"TEMPORAL_TLS_SERVER_NAME" help:"Name Temporal's certificate must carry; default: the host of --temporal-address."`
	TemporalAPIKey        string `name:"temporal-api-key" env:"TEMPORAL_API_KEY" secret:"" help:"API key sent as a bearer token on every Temporal call (Temporal Cloud). A secret: pass it in the environment."`
	TemporalCompression   string `name:"temporal-compression" env:"SECKILL_TEMPORAL_COMPRESSION" enum:"none,gzip" default:"none" help:"Compress the calls to Temporal: none, or gzip (the SDK's default), which spends CPU at both ends to save bandwidth to a distant server."`
}

// apply sets the connection options and credentials of o.
func (c TemporalConn) apply(o *client.Options) error {
	return temporalconf.Settings{
		TLS: c.TemporalTLS, CAFile: c.TemporalTLSCA, CertFile: c.TemporalTLSCert, KeyFile: c.TemporalTLSKey,
		ServerName: c.TemporalTLSServerName, APIKey: c.TemporalAPIKey, Compression: c.TemporalCompression,
	}.Apply(o)
}

// deps are the connected services.
type deps struct {
	registry *prometheus.Registry // this process's metrics
	store    *store.Store
	redis    redis.UniversalClient
	ack      redisack.Policy // what a write that must survive a failover waits for
	fence    *redisack.Fence // nil: none (ack.Fence)
	unfence  context.CancelFunc
	// fenceHolds is 1 while writes may be acknowledged: always without
	// a fence, so dashboards and alerts read one series everywhere.
	fenceHolds prometheus.Gauge
	lockers    []redis.UniversalClient
	stock      *stock.Stock
	events     *push.Publisher
	temporal   client.Client
	tracing    trace.TracerProvider // nil: tracing off (setupTracing)
}

func (d *deps) Close() {
	if d.fence != nil {
		d.unfence()
		d.fence.Close()
	}
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

// openRedis opens the main Redis: the primary the Sentinels name, if
// there are Sentinels, or addr.
func (s Services) openRedis() (*redis.Client, error) {
	if len(s.RedisSentinels) > 0 {
		return redisconf.OpenFailover(&redis.FailoverOptions{MasterName: s.RedisMaster, SentinelAddrs: s.RedisSentinels}), nil
	}
	return redisconf.Open(s.RedisAddr)
}

// ackPolicy is the acknowledgement the flags ask for, counted in reg. The
// series are exported, at zero, without acknowledgement too, so that the
// dashboard and alerts read the same names on every deployment.
func (s Services) ackPolicy(reg prometheus.Registerer) redisack.Policy {
	waits := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "seckill_redis_ack_seconds",
		Help:    "How long writes waited for their Redis replica (WAIT), confirmed or not: the replication lag as this process sees it.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	unconfirmed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_redis_unacknowledged_total",
		Help: "Writes no replica confirmed within --admit-ack-timeout (purchases among them answered 503 UNCONFIRMED).",
	})
	reg.MustRegister(waits, unconfirmed)
	if s.AdmitAck != "replica" {
		return redisack.Policy{}
	}
	return redisack.Policy{Replicas: s.AdmitAckReplicas, Timeout: s.AdmitAckTimeout, Observe: func(d time.Duration, ok bool) {
		waits.Observe(d.Seconds())
		if !ok {
			unconfirmed.Inc()
		}
	}}
}

// sentinels are the Sentinels the fence asks (--admit-fence), or ok false
// for no fence.
func (s Services) sentinels() (redisconf.Sentinels, bool, error) {
	switch {
	case s.AdmitFence == "off":
		return redisconf.Sentinels{}, false, nil
	case s.AdmitFence != "auto" && s.AdmitFence != "": // "": a command that sets no flags (dev)
		sn, ok, err := redisconf.SentinelsOf(s.AdmitFence)
		if err == nil && !ok {
			err = errors.New("want auto, off or a Sentinel URL (redis://SENTINEL:26379?master_name=NAME&addr=SENTINEL2:26379)")
		}
		if err == nil && s.AdmitAck != "replica" {
			err = errors.New("a fence needs --admit-ack=replica: without acknowledgement no write waits for anything")
		}
		if err != nil {
			return sn, false, fmt.Errorf("--admit-fence: %w", err)
		}
		return sn, true, nil
	case s.AdmitAck != "replica":
		return redisconf.Sentinels{}, false, nil
	case len(s.RedisSentinels) > 0:
		return redisconf.Sentinels{Master: s.RedisMaster, Addrs: s.RedisSentinels}, true, nil
	}
	return redisconf.SentinelsOf(s.RedisAddr)
}

// startFence starts the fence (redisack.Fence) the flags ask for, after a
// first check, and sets it on d's policy and d.fenceHolds. A first check
// that fails is logged, not fatal: the process comes up, and its
// acknowledged writes wait for the Sentinels to confirm the primary.
func (s Services) startFence(ctx context.Context, d *deps) error {
	sn, ok, err := s.sentinels()
	if err != nil || !ok {
		return err
	}
	d.fenceHolds.Set(0) // until the first check passes
	d.fence = redisack.NewFence(d.redis, sn.Master, sn.Addrs, sn.Options)
	d.fence.OnChange = func(ok bool, why string) {
		if ok {
			d.fenceHolds.Set(1)
			slog.Info("the Sentinels confirm the Redis primary: acknowledged writes count", "sentinels", len(sn.Addrs))
			return
		}
		d.fenceHolds.Set(0)
		slog.Warn("the Sentinels do not confirm the Redis primary: no write is acknowledged until they do", "why", why)
	}
	var fctx context.Context
	fctx, d.unfence = context.WithCancel(context.WithoutCancel(ctx))
	if err := d.fence.Check(ctx); err != nil {
		d.fence.OnChange(false, err.Error()) // the first check says so even though nothing changed
	}
	d.ack.Fence = d.fence
	go d.fence.Run(fctx)
	return nil
}

// warnUnfenced logs, for a process that acknowledges writes, whether the
// primary can go on acknowledging writes a failover loses (redisack
// Policy.Bound): serve and worker call it once connected.
func (d *deps) warnUnfenced(ctx context.Context) {
	if msg := d.ack.Bound(ctx, d.redis); msg != "" {
		slog.Warn(msg)
	}
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
	rdb, err := s.openRedis()
	if err != nil {
		d.Close()
		return nil, err
	}
	d.redis = rdb
	d.ack = s.ackPolicy(d.registry)
	if s.AdmitAck == "replica" && s.AdmitAckTimeout <= 0 {
		d.Close()
		return nil, fmt.Errorf("--admit-ack-timeout must be positive, not %v", s.AdmitAckTimeout)
	}
	if s.AdmitAck == "replica" && s.AdmitAckReplicas < 1 {
		d.Close()
		return nil, fmt.Errorf("--admit-ack-replicas must be 1 or more, not %d", s.AdmitAckReplicas)
	}
	if err := d.ack.Fits(rdb.Options().ReadTimeout); err != nil {
		d.Close()
		return nil, fmt.Errorf("--admit-ack-timeout: %w", err)
	}
	d.fenceHolds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_redis_fence_holds",
		Help: "0 while the fence stops acknowledged writes (the Sentinels do not confirm the Redis primary this process writes to), 1 otherwise, and always without a fence (docs/design.md §3.13).",
	})
	d.fenceHolds.Set(1)
	d.registry.MustRegister(d.fenceHolds)
	if err := s.startFence(ctx, d); err != nil {
		d.Close()
		return nil, err
	}
	pools := []redsyncredis.Pool{goredis.NewPool(rdb)}
	for _, addr := range s.RedlockAddrs {
		l, err := redisconf.Open(addr)
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
	d.stock.Acknowledge(d.ack)
	d.events = push.NewPublisher(rdb)
	d.registry.MustRegister(collectors.NewDBStatsCollector(d.store.DB(), "seckill"), redisPoolCollector(rdb))
	if needTemporal {
		var interceptors []interceptor.ClientInterceptor
		if tp != nil {
			interceptors = append(interceptors, worker.ClientTracing(tp))
		}
		opts := client.Options{
			HostPort:       s.TemporalAddress,
			Namespace:      s.TemporalNamespace,
			Logger:         sdklog.NewStructuredLogger(slog.Default().With("component", "temporal-sdk")),
			MetricsHandler: worker.MetricsHandler(temporalMetrics(d.registry), d.registry),
			Interceptors:   interceptors,
		}
		if err = s.TemporalConn.apply(&opts); err == nil {
			d.temporal, err = client.NewLazyClient(opts)
		}
		if err != nil {
			d.Close()
			return nil, redact.Error(fmt.Errorf("temporal client: %w", err), s.TemporalAddress)
		}
	}
	return d, nil
}

// waitTemporal blocks until the Temporal frontend answers and has the
// namespace, or ctx ends. A server started a moment before (README
// "Production by hand" starts it in the background) answers its health
// check before it has created the namespace: a NotFound is waited out too.
func waitTemporal(ctx context.Context, c client.Client, namespace string) error {
	for logged := false; ; {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CheckHealth(cctx, &client.CheckHealthRequest{})
		if err == nil {
			// Not DescribeNamespace, which reads the database: the calls
			// that follow go through the frontend's namespace cache, which
			// learns of a new namespace up to seconds later.
			_, err = c.OperatorService().ListSearchAttributes(cctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
			if !errors.As(err, new(*serviceerror.NamespaceNotFound)) {
				// Ready, or an answer (a refusal) that waiting does not
				// change: the caller's next call says what it is.
				err = nil
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if !logged {
			slog.Warn("waiting for Temporal", "namespace", namespace, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal not ready: %w", err)
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
