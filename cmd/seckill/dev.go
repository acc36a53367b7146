package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the embedded database of dev mode

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/devstack"
	"github.com/seckill/seckill/internal/redact"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/web"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// DevCmd runs everything in one process with nothing installed: an
// embedded Temporal server with its Web UI, an in-process Redis
// (miniredis) and an embedded SQLite database, unless DATABASE_URL,
// REDIS_ADDR or TEMPORAL_ADDRESS point at real ones.
type DevCmd struct {
	AuthFlags
	// Loopback by default: dev mints tokens for anyone who asks
	// (POST /v1/dev/token), admins included.
	// Orders pay at the built-in provider: a buyer goes through a real
	// hosted page and back, offline.
	APIFlags `embed:"" set:"http_addr=127.0.0.1:8080" set:"payment_provider=builtin"`
	CacheFlags

	DatabaseURL       string        `name:"database-url" env:"DATABASE_URL" secret:"url" help:"Use this database instead of the embedded one."`
	RedisAddr         string        `name:"redis-addr" env:"REDIS_ADDR" secret:"url" help:"Use this Redis instead of the in-process one."`
	TemporalAddress   string        `name:"temporal-address" env:"TEMPORAL_ADDRESS" help:"Use this Temporal instead of the embedded one."`
	TemporalNamespace string        `name:"temporal-namespace" env:"TEMPORAL_NAMESPACE" default:"default" help:"Temporal namespace."`
	TemporalPort      int           `name:"temporal-port" env:"SECKILL_TEMPORAL_PORT" default:"7233" help:"Port of the embedded Temporal frontend (0 = any free port)."`
	UIPort            int           `name:"ui-port" env:"SECKILL_UI_PORT" default:"8233" help:"Port of the embedded Temporal Web UI (0 = any free port)."`
	DataDir           string        `name:"data-dir" env:"SECKILL_DATA_DIR" default:"${default_data_dir}" help:"Where the embedded database and Temporal keep their state."`
	Memory            bool          `name:"memory" env:"SECKILL_MEMORY" help:"Keep nothing on disk (the embedded database and Temporal in memory)."`
	Reset             bool          `name:"reset" env:"SECKILL_RESET" help:"Delete what --data-dir kept (sales, orders, workflows, the token secret) before starting: a fresh start."`
	MetricsAddr       string        `name:"metrics-addr" env:"SECKILL_METRICS_ADDR" default:"127.0.0.1:9091" help:"Where the process serves /metrics (loopback by default; empty = nowhere)."`
	SeedStock         int           `name:"seed-stock" env:"SECKILL_SEED_STOCK" default:"100" help:"Units of the demo sale seeded at start (0 = no demo sale)."`
	ReconcileInterval time.Duration `name:"reconcile-interval" env:"SECKILL_RECONCILE_INTERVAL" default:"30s" help:"How often dev repairs Redis/Postgres drift of live sales and remembers the purchases admitted since (0 = never)."`
	Verbose           bool          `name:"verbose" env:"SECKILL_VERBOSE" help:"Log the embedded Temporal server at info level instead of warn."`
	PaymentReconcileFlags
}

func (c *DevCmd) Run(ctx context.Context) error {
	started := time.Now()
	if !c.Memory {
		if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		unlock, err := lockDataDir(c.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
		if err := prepareDataDir(c.DataDir, c.Reset); err != nil {
			return err
		}
	}
	if !c.AuthFlags.set() {
		if c.Memory {
			c.JWTSecret = auth.RandomSecret() // tokens printed below die with the process
		} else {
			// Kept with the data, so the tokens outlive a restart as the
			// orders do, and `seckill token` and `seckill bench` run here
			// find it.
			file, err := devSecret(c.DataDir)
			if err != nil {
				return err
			}
			c.JWTSecretFile = file
		}
	}
	signer, err := c.signer()
	if err != nil {
		return err
	}
	if err := c.devPaymentSecrets(c.DataDir, c.Memory); err != nil {
		return err
	}
	if err := c.PaymentFlags.check(); err != nil {
		return err
	}
	if err := c.PaymentReconcileFlags.check(c.PaymentGrace); err != nil {
		return err
	}

	// The process has one sticky cache, made by its first worker: the
	// embedded server's own system workers start before the saga's.
	worker.SetStickyCache(c.StickyCache)
	svc := Services{
		DatabaseURL: c.DatabaseURL, RedisAddr: c.RedisAddr,
		TemporalAddress: c.TemporalAddress, TemporalNamespace: c.TemporalNamespace,
	}
	temporalUI := ""
	if svc.TemporalAddress == "" {
		opts := devstack.TemporalOptions{
			Port: c.TemporalPort, UIPort: c.UIPort, Namespace: c.TemporalNamespace,
			SearchAttributes: workflows.SearchAttributeTypes, LogLevel: "warn",
			Logger: slog.Default().With("component", "temporal-server"),
		}
		if c.Verbose {
			opts.LogLevel = "info"
		}
		if !c.Memory {
			opts.DBFile = filepath.Join(c.DataDir, "temporal.db")
		}
		t, err := devstack.StartTemporal(ctx, opts)
		if err != nil {
			return fmt.Errorf("embedded temporal: %w", err)
		}
		defer func() {
			if err := t.Stop(); err != nil {
				slog.Warn("stop embedded temporal", "err", err)
			}
		}()
		svc.TemporalAddress, temporalUI = t.FrontendAddress(), t.UIURL()
	}
	if svc.RedisAddr == "" {
		// It keeps nothing across restarts: sales are warmed again from the
		// database below.
		r, err := devstack.StartRedis()
		if err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		defer r.Stop()
		svc.RedisAddr = r.Addr()
	}
	if svc.DatabaseURL == "" {
		svc.DatabaseURL = "sqlite:" + filepath.Join(c.DataDir, "seckill.db")
		if c.Memory {
			svc.DatabaseURL = "sqlite::memory:"
		}
	}

	// One process runs the api and the worker: one service, seckill-dev.
	tp, stopTracing, err := setupTracing(ctx, "seckill-dev")
	if err != nil {
		return err
	}
	defer stopTracing()
	d, err := svc.connect(ctx, true, tp)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.store.Migrate(ctx); err != nil {
		return err
	}
	if _, err := d.store.FillCurrency(ctx, c.DefaultCurrency); err != nil {
		return err
	}
	if err := builtin.Migrate(ctx, d.store.DB()); err != nil {
		return err
	}
	// Bound before the worker starts: the built-in provider is reached at
	// the api's address, by the worker's activities too.
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.HTTPAddr, err)
	}
	defer ln.Close()
	devTokens := listensOnLoopback(c.HTTPAddr)
	cfg, err := c.APIFlags.config(devTokens)
	if err != nil {
		return err
	}
	// The worker below shares the relay's client and starts first.
	cfg.EagerStarts = true
	// The built-in provider's test controls ("Pay late" on its page) are
	// a dev's: never on serve.
	pay, err := c.APIFlags.payments(d, &cfg, hostPort(ln.Addr()), true)
	if err != nil {
		return err
	}
	// The embedded server creates its namespace with them; an external
	// one, or an older embedded database, may lack them.
	if err := worker.RegisterSearchAttributes(ctx, d.temporal, c.TemporalNamespace); err != nil {
		return err
	}

	w := worker.New(d.temporal, &activities.Activities{Store: d.store, Stock: d.stock, Events: d.events, Metrics: activities.NewMetrics(d.registry),
		Payments: pay.providers}, worker.Options{Tracing: d.tracing, PaymentRate: c.PaymentRate})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	// The in-process Redis dies with the process and its only relay, so
	// an admission it no longer holds, without a row or a workflow, is lost
	// at once: no relay elsewhere can still be starting it.
	lostAfter := time.Duration(0)
	if c.RedisAddr == "" {
		lostAfter = -1
	}
	runReconciler(ctx, d, c.ReconcileInterval, 24*time.Hour, lostAfter, reconcilePayments{pay.providers, c.PaymentReconcileFlags})

	if !devTokens {
		slog.Warn("seckill dev listens beyond loopback: anyone who reaches it can use its demo sale and the Temporal UI's links; POST /v1/dev/token, which mints tokens for anyone, is off (use the tokens printed below or `seckill token`)",
			"http_addr", c.HTTPAddr)
	}
	cfg.TemporalNamespace = c.TemporalNamespace
	if cfg.TemporalUIURL == "" {
		cfg.TemporalUIURL = temporalUI
	}
	srv, stopAPI, err := startAPI(ctx, d, signer, cfg, pay)
	if err != nil {
		return err
	}
	defer stopAPI()
	srv.Mux().Handle("GET /", web.Handler())
	if err := warmAll(ctx, d.store, srv.Warm); err != nil {
		return err
	}
	demo, err := c.seed(ctx, d.store, srv.Warm)
	if err != nil {
		return err
	}
	metricsAddr := serveMetrics(ctx, c.MetricsAddr, d.registry)

	err = serveOn(ctx, ln, srv.Handler(), func(addr net.Addr) {
		base := "http://" + hostPort(addr)
		buyer, _ := signer.Mint("demo-buyer", auth.RoleBuyer, auth.MaxTTL(auth.RoleBuyer))
		admin, _ := signer.Mint("demo-admin", auth.RoleAdmin, auth.MaxTTL(auth.RoleAdmin))
		var b strings.Builder
		fmt.Fprintf(&b, "\nseckill dev is ready (%.1fs)\n\n", time.Since(started).Seconds())
		fmt.Fprintf(&b, "  Demo page      %s/\n", base)
		fmt.Fprintf(&b, "  API            %s/v1\n", base)
		fmt.Fprintf(&b, "  API docs       %s/docs\n", base)
		fmt.Fprintf(&b, "  Websocket      %s/v1/ws?access_token=<token>\n", strings.Replace(base, "http", "ws", 1))
		if pay.builtin != nil {
			fmt.Fprintf(&b, "  Payments       %s%s (the built-in provider: pay sends the buyer to its page)\n", base, api.PayPrefix)
		}
		if temporalUI != "" {
			fmt.Fprintf(&b, "  Temporal UI    %s/namespaces/%s/workflows\n", temporalUI, c.TemporalNamespace)
		}
		fmt.Fprintf(&b, "  Temporal       %s\n", svc.TemporalAddress)
		fmt.Fprintf(&b, "  Redis          %s\n", redact.URL(svc.RedisAddr))
		if metricsAddr != nil {
			fmt.Fprintf(&b, "  Metrics        http://%s/metrics\n", hostPort(metricsAddr))
		}
		if demo != "" {
			fmt.Fprintf(&b, "  Demo sale      %s\n", demo)
		}
		if c.Memory {
			fmt.Fprintf(&b, "  Data           none kept (--memory): everything, tokens included, ends with this process\n")
		} else {
			fmt.Fprintf(&b, "  Data           %s (sales, orders, workflows, the token secret: all kept across restarts)\n", c.DataDir)
		}
		fmt.Fprintf(&b, "\n  export BUYER_TOKEN=%s\n  export ADMIN_TOKEN=%s\n\n", buyer, admin)
		fmt.Print(b.String())
	})
	if c.RedisAddr == "" {
		// The api admits no more; the relay and the worker still run
		// (their deferred stops come after this).
		drainAdmissions(d.stock, d.store, devStopTimeout)
	}
	return err
}

// devStopTimeout bounds how long a stopping `seckill dev` waits for the
// orders it admitted to be placed (drainAdmissions).
const devStopTimeout = 30 * time.Second

// seed creates the demo sale, starting a minute from now, unless one is
// still upcoming or running from an earlier start.
func (c *DevCmd) seed(ctx context.Context, st *store.Store, warm func(context.Context, int64) error) (string, error) {
	if c.SeedStock <= 0 {
		return "", nil
	}
	sales, err := st.Sales(ctx, 0, 20)
	if err != nil {
		return "", err
	}
	for _, s := range sales {
		if time.Now().Before(s.EndsAt) {
			return fmt.Sprintf("id %d %q, %d units, %s to %s", s.ID, s.Name, s.TotalStock, s.StartsAt.Local().Format(time.TimeOnly), s.EndsAt.Local().Format(time.TimeOnly)), nil
		}
	}
	start := time.Now().Add(time.Minute).Truncate(time.Second)
	s, err := st.CreateSale(ctx, store.NewSale{
		Name: "Demo phone", PriceCents: 49900, Currency: c.DefaultCurrency, Stock: c.SeedStock,
		StartsAt: start, EndsAt: start.Add(time.Hour),
	})
	if err != nil {
		return "", err
	}
	if err := warm(ctx, s.ID); err != nil {
		return "", err
	}
	return fmt.Sprintf("id %d %q, %d units, starts %s", s.ID, s.Name, s.TotalStock, start.Local().Format(time.TimeOnly)), nil
}

// warmAll loads every sale that has not ended into Redis (an in-process
// Redis starts empty).
func warmAll(ctx context.Context, st *store.Store, warm func(context.Context, int64) error) error {
	sales, err := st.OpenSales(ctx, time.Now())
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sales {
		errs = append(errs, warm(ctx, s.ID))
	}
	return errors.Join(errs...)
}

// listensOnLoopback reports whether a listen address (host:port) binds
// loopback only; ":8080" binds every interface.
func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && loopbackOnly(host)
}

func hostPort(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok || t.IP.IsUnspecified() {
		if ok {
			return fmt.Sprintf("127.0.0.1:%d", t.Port)
		}
	}
	return a.String()
}
