package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/web"
)

// AuthFlags hold the token secret.
type AuthFlags struct {
	JWTSecret string `name:"jwt-secret" env:"SECKILL_JWT_SECRET" help:"HS256 secret for bearer tokens, at least 32 bytes. Never logged."`
}

func (a AuthFlags) signer() (*auth.Signer, error) {
	if a.JWTSecret == "" {
		return nil, errors.New("--jwt-secret (SECKILL_JWT_SECRET) is required")
	}
	return auth.NewSigner(a.JWTSecret)
}

// APIFlags tune the api.
type APIFlags struct {
	HTTPAddr       string   `name:"http-addr" env:"SECKILL_HTTP_ADDR" default:":8080" help:"Address the api listens on."`
	AllowedOrigins []string `name:"allowed-origins" env:"SECKILL_ALLOWED_ORIGINS" sep:"," help:"Origins allowed to open websockets (comma-separated); default: same origin only."`
	UserRate       int      `name:"user-rate" env:"SECKILL_USER_RATE" default:"5" help:"Purchase requests per second per buyer and sale (0 = no limit)."`
	SaleRate       int      `name:"sale-rate" env:"SECKILL_SALE_RATE" default:"100000" help:"Purchase requests per second per sale (0 = no limit)."`
	WSConnectRate  int      `name:"ws-connect-rate" env:"SECKILL_WS_CONNECT_RATE" default:"5" help:"Websocket connects per second per user (0 = no limit)."`
	WSPerUser      int      `name:"ws-per-user" env:"SECKILL_WS_PER_USER" default:"8" help:"Websockets one user may hold open on this instance; beyond it a new one is closed at once with code 4008 (0 = no cap)."`
	WSMax          int      `name:"ws-max" env:"SECKILL_WS_MAX" default:"20000" help:"Websockets open on this instance in all; beyond it a new one is closed at once with code 4008 (0 = no cap)."`
	IPRate         int      `name:"ip-rate" env:"SECKILL_IP_RATE" default:"0" help:"Purchases and websocket connects per second per client address (0 = no limit; behind a proxy set --trusted-proxies)."`
	TrustedProxies []string `name:"trusted-proxies" env:"SECKILL_TRUSTED_PROXIES" sep:"," help:"CIDRs of proxies whose X-Forwarded-For names the client (comma-separated)."`
	MaxInFlight    int      `name:"max-in-flight" env:"SECKILL_MAX_IN_FLIGHT" default:"512" help:"Purchases processed at once; beyond it the api answers 503 at once."`
	RelayFlags
	RelayYield    time.Duration `name:"relay-yield" env:"SECKILL_RELAY_YIELD" default:"15s" help:"How long the relay may hold workflow starts back while purchases are in flight (admission first; 0 = never)."`
	TemporalUIURL string        `name:"temporal-ui-url" env:"SECKILL_TEMPORAL_UI_URL" help:"Base URL of the Temporal Web UI, for links from orders to their workflow (dev: the embedded UI)."`
}

// RelayFlags tune a relay, in an api instance or in a worker.
type RelayFlags struct {
	PaymentTimeout time.Duration `name:"payment-timeout" env:"SECKILL_PAYMENT_TIMEOUT" default:"15m" help:"How long a buyer has to pay (for orders of sales that set no payment timeout of their own)."`
	RelayMinIdle   time.Duration `name:"relay-min-idle" env:"SECKILL_RELAY_MIN_IDLE" default:"30s" help:"How long an intent may stay unacknowledged by a relay before another takes it over."`
	// A fault-injection hook for the chaos tests: the relay waits this long
	// between reading intents and starting their workflows, widening the
	// window in which a crashed api leaves intents for another to reclaim.
	RelayStartDelay time.Duration `name:"relay-start-delay" env:"SECKILL_RELAY_START_DELAY" hidden:"" help:"Test hook: pause between reading intents and starting workflows."`
}

func (f RelayFlags) options() relay.Options {
	return relay.Options{MinIdle: f.RelayMinIdle, PaymentTimeout: f.PaymentTimeout, BeforeStart: pause(f.RelayStartDelay)}
}

func (f APIFlags) config(devTokens bool) (api.Config, error) {
	var proxies []netip.Prefix
	for _, p := range f.TrustedProxies {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return api.Config{}, fmt.Errorf("--trusted-proxies: %w", err)
		}
		proxies = append(proxies, prefix)
	}
	return api.Config{
		IPRate: noLimitIfZero(f.IPRate), TrustedProxies: proxies, MaxInFlight: f.MaxInFlight,
		UserRate: noLimitIfZero(f.UserRate), SaleRate: noLimitIfZero(f.SaleRate), WSConnectRate: noLimitIfZero(f.WSConnectRate),
		WSPerUser: noLimitIfZero(f.WSPerUser), WSMax: noLimitIfZero(f.WSMax),
		AllowedOrigins: f.AllowedOrigins,
		DevTokens:      devTokens, TemporalUIURL: f.TemporalUIURL,
		Relay: f.relayOptions(),
	}, nil
}

func (f APIFlags) relayOptions() relay.Options {
	o := f.RelayFlags.options()
	o.MaxYield = f.RelayYield
	return o
}

// ServeCmd runs an api instance (with its relay, unless --relay=false).
type ServeCmd struct {
	Services
	AuthFlags
	APIFlags
	Relay bool `name:"relay" env:"SECKILL_RELAY" default:"true" help:"Run a relay in this instance; --relay=false where workers run the relays (seckill worker --relay), so that starts are eager."`
}

func (c *ServeCmd) Run(ctx context.Context) error {
	signer, err := c.signer()
	if err != nil {
		return err
	}
	tp, stopTracing, err := setupTracing(ctx, "seckill-api")
	if err != nil {
		return err
	}
	defer stopTracing()
	d, err := c.connect(ctx, true, tp)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg, err := c.APIFlags.config(false)
	if err != nil {
		return err
	}
	cfg.TemporalNamespace = c.TemporalNamespace
	cfg.NoRelay = !c.Relay
	if cfg.NoRelay {
		slog.Warn("this instance runs no relay: its orders start only where a worker runs with --relay")
	}
	srv, stop, err := startAPI(ctx, d, signer, cfg)
	if err != nil {
		return err
	}
	defer stop()
	srv.Mux().Handle("GET /", web.Handler())
	return serveHTTP(ctx, c.HTTPAddr, srv.Handler(), nil)
}

// startAPI builds an api server on connected services and starts its
// background work (relay, websocket hub). stop ends that work.
func startAPI(ctx context.Context, d *deps, signer *auth.Signer, cfg api.Config) (*api.Server, func(), error) {
	lease, err := orderid.LeaseNode(ctx, d.redis, 30*time.Second, d.ack)
	if err != nil {
		return nil, nil, fmt.Errorf("lease an order id node: %w", err)
	}
	srv := api.New(cfg, api.Deps{
		Store: d.store, Stock: d.stock, Temporal: d.temporal, Signer: signer, IDs: orderid.Leased(lease),
		Registry: d.registry, Tracing: d.tracing,
	})
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(bctx) })
	stop := func() {
		cancel()
		wg.Wait()
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		_ = lease.Close(cctx)
	}
	return srv, stop, nil
}

// serveHTTP serves h on addr until ctx ends, then lets in-flight requests
// finish for up to 10 s. ready, if set, gets the bound address.
func serveHTTP(ctx context.Context, addr string, h http.Handler, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	slog.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	slog.Info("http server stopped", "addr", ln.Addr().String())
	return nil
}

// pause returns a relay hook that waits d (nil for no wait).
func pause(d time.Duration) func(context.Context, []int64) {
	if d <= 0 {
		return nil
	}
	return func(ctx context.Context, _ []int64) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// noLimitIfZero maps the flags' "0 = no limit" to the api's convention
// (0 = default, negative = no limit).
func noLimitIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
