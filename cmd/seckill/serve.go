package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/web"
)

// AuthFlags hold the token secrets: the current one, which mints and
// verifies, and during a rotation the previous one, which still verifies
// (README, "Rotating the token secret"). Each comes from the environment
// or a file; on the command line ps would show it to every user of the
// host, and main warns.
type AuthFlags struct {
	JWTSecret             string `name:"jwt-secret" env:"SECKILL_JWT_SECRET" secret:"" help:"HS256 secret for bearer tokens, at least 32 bytes. Pass it in the environment (or --jwt-secret-file): on the command line ps shows it. Never logged."`
	JWTSecretFile         string `name:"jwt-secret-file" env:"SECKILL_JWT_SECRET_FILE" help:"Read --jwt-secret from this file (a trailing newline is dropped), e.g. a mounted Docker or Kubernetes secret."`
	JWTPreviousSecret     string `name:"jwt-previous-secret" env:"SECKILL_JWT_PREVIOUS_SECRET" secret:"" help:"During a rotation: the secret being replaced, whose tokens still verify (new ones are signed with --jwt-secret). Remove it once its tokens have expired."`
	JWTPreviousSecretFile string `name:"jwt-previous-secret-file" env:"SECKILL_JWT_PREVIOUS_SECRET_FILE" help:"Read --jwt-previous-secret from this file."`
}

// set reports whether a current secret is configured.
func (a AuthFlags) set() bool { return a.JWTSecret != "" || a.JWTSecretFile != "" }

func (a AuthFlags) signer() (*auth.Signer, error) {
	current, err := secretFrom("jwt-secret", "SECKILL_JWT_SECRET", a.JWTSecret, a.JWTSecretFile)
	if err != nil {
		return nil, err
	}
	if current == "" {
		return nil, errors.New("--jwt-secret-file (SECKILL_JWT_SECRET_FILE) or SECKILL_JWT_SECRET is required (seckill token and seckill bench find a seckill dev's own in ./.seckill when run where it runs)")
	}
	previous, err := secretFrom("jwt-previous-secret", "SECKILL_JWT_PREVIOUS_SECRET", a.JWTPreviousSecret, a.JWTPreviousSecretFile)
	if err != nil {
		return nil, err
	}
	if previous == "" {
		return auth.NewSigner(current)
	}
	return auth.NewSigner(current, previous)
}

// clientSigner is signer for the commands that mint tokens for a running
// system (token, bench): given no secret, they take that of the `seckill
// dev` whose data directory is here, and say so on stderr.
func (a AuthFlags) clientSigner() (*auth.Signer, error) {
	if !a.set() {
		if path := devSecretHere(); path != "" {
			fmt.Fprintf(os.Stderr, "seckill: using the token secret of the seckill dev here (%s)\n", path)
			a.JWTSecretFile = path
		}
	}
	return a.signer()
}

// secretFrom is a secret given by value or by file (not both: which one
// wins would be a guess). A file's trailing newline, which editors and
// `echo` add, is not part of the secret.
func secretFrom(flag, env, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("--%s (%s) and --%s-file (%s_FILE) are both set: give one", flag, env, flag, env)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", flag, err)
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return "", fmt.Errorf("--%s-file %s is empty", flag, file)
	}
	return secret, nil
}

// APIFlags tune the api.
type APIFlags struct {
	HTTPAddr       string   `name:"http-addr" env:"SECKILL_HTTP_ADDR" default:"${http_addr}" help:"Address the api listens on."`
	AllowedOrigins []string `name:"allowed-origins" env:"SECKILL_ALLOWED_ORIGINS" sep:"," help:"Origins allowed to open websockets (comma-separated); default: same origin only."`
	UserRate       int      `name:"user-rate" env:"SECKILL_USER_RATE" default:"5" help:"Purchase requests per second per buyer and sale (0 = no limit)."`
	SaleRate       int      `name:"sale-rate" env:"SECKILL_SALE_RATE" default:"100000" help:"Purchase requests per second per sale (0 = no limit)."`
	WSConnectRate  int      `name:"ws-connect-rate" env:"SECKILL_WS_CONNECT_RATE" default:"5" help:"Websocket connects per second per user (0 = no limit)."`
	WSPerUser      int      `name:"ws-per-user" env:"SECKILL_WS_PER_USER" default:"8" help:"Websockets one user may hold open on this instance; beyond it a new one is closed at once with code 4008 (0 = no cap)."`
	WSMax          int      `name:"ws-max" env:"SECKILL_WS_MAX" default:"20000" help:"Websockets open on this instance in all; beyond it a new one is closed at once with code 4008 (0 = no cap)."`
	IPRate         int      `name:"ip-rate" env:"SECKILL_IP_RATE" default:"0" help:"Purchases and websocket connects per second per client address (0 = no limit; behind a proxy set --trusted-proxies)."`
	TrustedProxies []string `name:"trusted-proxies" env:"SECKILL_TRUSTED_PROXIES" sep:"," help:"CIDRs of proxies whose X-Forwarded-For names the client (comma-separated)."`
	MaxInFlight    int      `name:"max-in-flight" env:"SECKILL_MAX_IN_FLIGHT" default:"512" help:"Purchases processed at once; beyond it the api answers 503 at once."`
	MaxExports     int      `name:"max-exports" env:"SECKILL_MAX_EXPORTS" default:"4" help:"Exports of a sale's orders streaming at once on this instance; beyond it an export answers 429 with Retry-After (0 = the default)."`
	RelayFlags
	RelayYield    time.Duration `name:"relay-yield" env:"SECKILL_RELAY_YIELD" default:"15s" help:"How long the relay may hold workflow starts back while purchases are in flight (admission first; 0 = never)."`
	TemporalUIURL string        `name:"temporal-ui-url" env:"SECKILL_TEMPORAL_UI_URL" help:"Base URL of the Temporal Web UI, for links from orders to their workflow (dev: the embedded UI)."`
	CurrencyFlags
	PublicURL        string `name:"public-url" env:"SECKILL_PUBLIC_URL" help:"The api's origin as browsers and payment providers reach it (https://shop.example.com): the built-in provider's hosted page and notification URL. Default: the address --http-addr binds (loopback for an unspecified host)."`
	PaymentReturnURL string `name:"payment-return-url" env:"SECKILL_PAYMENT_RETURN_URL" help:"Where a provider's hosted page sends the buyer back (the order's id added as order_id). Default: the demo page, --public-url's /."`
}

// CurrencyFlags name the deployment's default currency.
type CurrencyFlags struct {
	DefaultCurrency string `name:"default-currency" env:"SECKILL_DEFAULT_CURRENCY" default:"USD" help:"ISO 4217 currency of a sale created without one, and (seckill migrate) of the sales made before sales had one."`
}

// currency checks the flag: an ISO 4217 code.
func (f CurrencyFlags) currency() (string, error) {
	code, err := domain.ParseCurrency(f.DefaultCurrency)
	if err != nil {
		return "", fmt.Errorf("--default-currency: %w", err)
	}
	return code, nil
}

// RelayFlags tune a relay, in an api instance or in a worker.
type RelayFlags struct {
	PaymentTimeout time.Duration `name:"payment-timeout" env:"SECKILL_PAYMENT_TIMEOUT" default:"15m" help:"How long a buyer has to pay (for orders of sales that set no payment timeout of their own)."`
	RelayMinIdle   time.Duration `name:"relay-min-idle" env:"SECKILL_RELAY_MIN_IDLE" default:"30s" help:"How long an intent may stay unacknowledged by a relay before another takes it over."`
	// A fault-injection hook for the chaos tests: the relay waits this long
	// between reading intents and starting their workflows, widening the
	// window in which a crashed api leaves intents for another to reclaim.
	RelayStartDelay time.Duration `name:"relay-start-delay" env:"SECKILL_RELAY_START_DELAY" hidden:"" help:"Test hook: pause between reading intents and starting workflows."`
	// Where the orders a relay starts pay (OrderInput.Provider).
	PaymentFlags
}

func (f RelayFlags) options() relay.Options {
	return relay.Options{MinIdle: f.RelayMinIdle, PaymentTimeout: f.PaymentTimeout, BeforeStart: pause(f.RelayStartDelay),
		PaymentProvider: f.provider(), PaymentGrace: f.PaymentGrace}
}

func (f APIFlags) config(devTokens bool) (api.Config, error) {
	currency, err := f.currency()
	if err != nil {
		return api.Config{}, err
	}
	var proxies []netip.Prefix
	for _, p := range f.TrustedProxies {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return api.Config{}, fmt.Errorf("--trusted-proxies: %w", err)
		}
		proxies = append(proxies, prefix)
	}
	return api.Config{
		IPRate: noLimitIfZero(f.IPRate), TrustedProxies: proxies, MaxInFlight: f.MaxInFlight, MaxExports: f.MaxExports,
		UserRate: noLimitIfZero(f.UserRate), SaleRate: noLimitIfZero(f.SaleRate), WSConnectRate: noLimitIfZero(f.WSConnectRate),
		WSPerUser: noLimitIfZero(f.WSPerUser), WSMax: noLimitIfZero(f.WSMax),
		AllowedOrigins: f.AllowedOrigins,
		DevTokens:      devTokens, TemporalUIURL: f.TemporalUIURL, DefaultCurrency: currency,
		Relay:           f.relayOptions(),
		PaymentProvider: f.provider(), PaymentGrace: f.PaymentGrace,
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
	APIFlags    `set:"http_addr=:8080" set:"payment_provider=none"`
	Relay       bool   `name:"relay" env:"SECKILL_RELAY" default:"true" help:"Run a relay in this instance; --relay=false where workers run the relays (seckill worker --relay), so that starts are eager."`
	MetricsAddr string `name:"metrics-addr" env:"SECKILL_METRICS_ADDR" default:":9091" help:"Where the api serves /metrics, apart from --http-addr so that a proxy of the api does not publish it (empty = nowhere). Keep it off the public network."`
}

func (c *ServeCmd) Run(ctx context.Context) error {
	signer, err := c.signer()
	if err != nil {
		return err
	}
	if err := c.PaymentFlags.check(); err != nil {
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
	d.warnUnfenced(ctx)
	cfg, err := c.APIFlags.config(false)
	if err != nil {
		return err
	}
	cfg.TemporalNamespace = c.TemporalNamespace
	cfg.NoRelay = !c.Relay
	if cfg.NoRelay {
		slog.Warn("this instance runs no relay: its orders start only where a worker runs with --relay")
	}
	// Bound first: the built-in provider's URLs default to the address.
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.HTTPAddr, err)
	}
	pay, err := c.APIFlags.payments(d, &cfg, hostPort(ln.Addr()), false)
	if err != nil {
		ln.Close()
		return err
	}
	srv, stop, err := startAPI(ctx, d, signer, cfg, pay)
	if err != nil {
		ln.Close()
		return err
	}
	defer stop()
	srv.Mux().Handle("GET /", web.Handler())
	serveMetrics(ctx, c.MetricsAddr, srv.Registry())
	return serveOn(ctx, ln, srv.Handler(), nil)
}

// apiPayments are an api's payment providers: the adapters whose
// notifications it verifies, and the built-in service it serves (nil
// unless --payment-provider=builtin).
type apiPayments struct {
	providers map[string]payment.Provider
	builtin   *builtin.Service
}

// payments sets up an api's payments on cfg for the api listening at
// listening (host:port), with the built-in service's test controls on
// for dev.
func (f APIFlags) payments(d *deps, cfg *api.Config, listening string, controls bool) (apiPayments, error) {
	pub, err := publicURL(f.PublicURL, listening)
	if err != nil {
		return apiPayments{}, err
	}
	cfg.PayReturnURL = f.PaymentReturnURL
	if cfg.PayReturnURL == "" {
		cfg.PayReturnURL = pub + "/"
	}
	provs, err := f.providers(pub + api.PayPrefix)
	if err != nil {
		return apiPayments{}, err
	}
	svc, err := f.builtinService(d.store, pub, controls)
	if err != nil {
		return apiPayments{}, err
	}
	if svc != nil {
		slog.Info("payments at the built-in provider", "pay_url", pub+api.PayPrefix, "controls", controls)
	} else if p := f.provider(); p != "" {
		slog.Info("payments at a provider", "provider", p, "notify_url", pub+"/v1/payments/"+p+"/notify")
	}
	return apiPayments{providers: provs, builtin: svc}, nil
}

// startAPI builds an api server on connected services and starts its
// background work (relay, websocket hub). stop ends that work.
func startAPI(ctx context.Context, d *deps, signer *auth.Signer, cfg api.Config, pay apiPayments) (*api.Server, func(), error) {
	lease, err := orderid.LeaseNode(ctx, d.redis, 30*time.Second, d.ack)
	if err != nil {
		return nil, nil, fmt.Errorf("lease an order id node: %w", err)
	}
	srv := api.New(cfg, api.Deps{
		Store: d.store, Stock: d.stock, Temporal: d.temporal, Signer: signer, IDs: orderid.Leased(lease),
		Registry: d.registry, Tracing: d.tracing, Payments: pay.providers, BuiltinPay: pay.builtin,
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
	return serveOn(ctx, ln, h, ready)
}

// serveMetrics serves reg at /metrics on addr (none if empty) until ctx
// ends: the process's internal listener, which no proxy publishes, apart
// from the api's port. It returns the bound address, "" if none. A
// listener that fails is logged, not fatal: the process's work does not
// depend on being scraped, and Prometheus reports the target down.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry) net.Addr {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		slog.Error("metrics endpoint: not serving /metrics", "addr", addr, "err", err)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	go func() {
		if err := serveOn(ctx, ln, mux, nil); err != nil {
			slog.Error("metrics endpoint", "addr", addr, "err", err)
		}
	}()
	return ln.Addr()
}

// serveOn is serveHTTP on a bound listener.
func serveOn(ctx context.Context, ln net.Listener, h http.Handler, ready func(net.Addr)) error {
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
