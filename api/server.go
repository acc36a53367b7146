// Package api is seckill's public face: the REST API under /v1 (huma v2,
// OpenAPI 3.1, problem+json errors), the websocket result channel and
// health checks. Its metrics are in Registry, which the binary serves on
// an internal listener, never on the public handler. Every api instance
// also runs a relay, which turns admitted orders into workflows.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Config tunes the api. Zero values take the defaults of withDefaults.
type Config struct {
	// UserRate and SaleRate bound purchase requests per second per buyer
	// (on one sale) and per sale; 0 takes the default, a negative value
	// disables the limit.
	UserRate int
	SaleRate int
	// WSConnectRate bounds websocket connects per second per user (same
	// convention).
	WSConnectRate int
	// WSPerUser and WSMax cap the websockets open on this instance, of one
	// buyer (default 8) and in all (default 20,000); a socket beyond either
	// is closed at once with push.CloseTooManySockets. Same convention: 0
	// takes the default, a negative value removes the cap.
	WSPerUser int
	WSMax     int
	// IPRate bounds purchase requests and websocket connects per second per
	// client address; 0 or negative: no limit (the default, since behind a
	// proxy every request comes from the proxy unless TrustedProxies says
	// whose X-Forwarded-For to believe).
	IPRate int
	// TrustedProxies are the addresses whose X-Forwarded-For names the
	// client.
	TrustedProxies []netip.Prefix
	// MaxInFlight bounds purchases being processed at once; beyond it the
	// api answers 503 at once instead of queueing without bound. Default 512.
	MaxInFlight int
	// MaxExports bounds the exports streaming at once on this instance;
	// beyond it an export answers 429 with Retry-After. Each holds a
	// connection to its client and reads the database a page at a time.
	// Default 4.
	MaxExports int
	// ExportWriteTimeout bounds how long an export waits for its client to
	// take a page (the page written and flushed); a client that takes
	// longer is cut off, and its export ends. Default 30s.
	ExportWriteTimeout time.Duration
	// SoldOutTTL bounds how long the local sold-out flag of a sale is
	// trusted without a restock event.
	SoldOutTTL time.Duration
	// PayWait is how long pay and cancel wait for the workflow to record the
	// change before answering 202 instead of 200.
	PayWait time.Duration
	// AllowedOrigins may open websockets; empty means same origin only.
	AllowedOrigins []string
	// DevTokens enables POST /v1/dev/token, which mints tokens for anyone.
	// Dev mode only.
	DevTokens bool
	// TemporalUIURL is the Temporal Web UI's base URL and TemporalNamespace
	// the namespace of the order workflows, so clients can link an order
	// to its workflow page.
	TemporalUIURL     string
	TemporalNamespace string
	// LineRefresh is how often websockets are told the new places in line
	// of their buyers' PENDING orders; default 3s (push.Options).
	LineRefresh time.Duration
	// Relay options of the relay this instance runs.
	Relay relay.Options
	// DefaultCurrency is the ISO 4217 currency of a sale created without
	// one; "" is domain.DefaultCurrency.
	DefaultCurrency string
	// SaleCacheTTL is how long an instance trusts its copy of a sale's
	// row for GET /v1/sales/{id} (readCache): default 1s; negative: no
	// copy, every read queries the database.
	SaleCacheTTL time.Duration
	// ShelfCacheTTL is how long it trusts its copy of a sale's live state
	// in Redis (remaining stock, end) for the same reads: default 100ms;
	// negative: every read asks Redis.
	ShelfCacheTTL time.Duration
	// PaymentProvider is the payment provider new orders pay at
	// (relay.Options.PaymentProvider, which this sets on Relay): "builtin",
	// "stripe", or "" to pay without one (pay decides PAID). With one, pay
	// sends the buyer's client to the provider, and the provider's
	// notifications (POST /v1/payments/{provider}/notify) decide.
	// PaymentGrace is the orders' OrderInput.PaymentGrace.
	PaymentProvider string
	PaymentGrace    time.Duration
	// PayReturnURL is where the provider's hosted page sends the buyer
	// back, the order's id added as order_id (the demo page, say).
	PayReturnURL string
	// NoRelay: this instance runs no relay, and its orders are started by
	// the relays of other processes (`seckill worker --relay`, where the
	// starts are eager; docs/design.md §5).
	NoRelay bool
	// EagerStarts: the relay's starts are eager (relay.NewEagerTemporalStarter).
	// Only where a worker shares Deps.Temporal and was started before Run,
	// as in `seckill dev`: elsewhere there is no worker to hand a first
	// workflow task to, and an eager start races with the lazy client's
	// first use.
	EagerStarts bool
}

func (c *Config) withDefaults() {
	if c.UserRate == 0 {
		c.UserRate = 5
	}
	if c.SaleRate == 0 {
		c.SaleRate = 100_000
	}
	if c.WSConnectRate == 0 {
		c.WSConnectRate = 5
	}
	if c.WSPerUser == 0 {
		c.WSPerUser = 8
	}
	if c.WSMax == 0 {
		c.WSMax = 20_000
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 512
	}
	if c.MaxExports <= 0 {
		c.MaxExports = 4
	}
	if c.ExportWriteTimeout <= 0 {
		c.ExportWriteTimeout = 30 * time.Second
	}
	if c.SoldOutTTL == 0 {
		c.SoldOutTTL = 2 * time.Second
	}
	if c.PayWait == 0 {
		c.PayWait = 5 * time.Second
	}
	if c.SaleCacheTTL == 0 {
		c.SaleCacheTTL = time.Second
	}
	if c.ShelfCacheTTL == 0 {
		c.ShelfCacheTTL = 100 * time.Millisecond
	}
}

// Deps are the services the api uses.
type Deps struct {
	Store    *store.Store
	Stock    *stock.Stock
	Temporal client.Client
	Signer   *auth.Signer
	IDs      *orderid.Generator
	// Registry gets the api's metrics; the process adds its own
	// (Temporal SDK, pools, worker) and serves it at /metrics on its
	// internal listener (--metrics-addr). Nil: a new one.
	Registry *prometheus.Registry
	// Tracing, if set, traces requests (otelhttp), the reservation of each
	// purchase and the relay's workflow starts; Temporal should then carry
	// the trace on (worker.ClientTracing on the Temporal client). Nil: no
	// tracing, and the purchase path does nothing more.
	Tracing trace.TracerProvider
	// Payments are the payment providers whose notifications this api
	// takes, by Name(): those orders may pay at.
	Payments map[string]payment.Provider
	// BuiltinPay, if set, is the built-in payment service: mounted under
	// PayPrefix, its notifications sent by Run.
	BuiltinPay *builtin.Service
}

// PayPrefix is where the built-in payment service is mounted: its API
// and hosted page, the provider's and not seckill's API (no bearer token,
// not in the OpenAPI document).
const PayPrefix = "/pay/"

// Server is one api instance.
type Server struct {
	cfg     Config
	deps    Deps
	api     huma.API
	mux     *http.ServeMux
	handler http.Handler // mux, traced when tracing is on
	hub     *push.Hub
	relay   *relay.Relay
	orders  *orders.Service
	// inFlight holds a token per purchase being processed.
	inFlight chan struct{}
	// exports holds a token per export streaming (saleorders.go).
	exports chan struct{}
	// lastPurchase is when the last purchase was let in (Unix ns): bulk
	// reads yield to a wave that is still coming (saleorders.go).
	lastPurchase atomic.Int64
	metrics      *metrics
	reg          *prometheus.Registry
	// sales and shelves are the short-lived copies of the sale rows and
	// of their live state in Redis that the public reads use
	// (readcache.go).
	sales   *readCache[*ent.Sale]
	shelves *readCache[stock.Shelf]
	// currencies keeps each sale's currency, which never changes, once
	// read (currencyOf): sale id → ISO 4217 code.
	currencies sync.Map
	// cancels are the cancelled sales whose open orders this instance is
	// cancelling in the background (operator.go).
	cancels *cancellations
}

// New builds a Server; call Run to start its background work and mount
// Handler on an http.Server.
func New(cfg Config, deps Deps) *Server {
	cfg.withDefaults()
	s := &Server{
		cfg:  cfg,
		deps: deps,
		mux:  http.NewServeMux(),
		reg:  deps.Registry,
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Relay.Metrics == nil {
		cfg.Relay.Metrics = s.reg
	}
	if cfg.Relay.Tracing == nil {
		cfg.Relay.Tracing = deps.Tracing
	}
	if cfg.Relay.PaymentProvider == "" {
		cfg.Relay.PaymentProvider, cfg.Relay.PaymentGrace = cfg.PaymentProvider, cfg.PaymentGrace
	}
	s.cancels = newCancellations()
	s.sales = newReadCache(cfg.SaleCacheTTL, deps.Store.Sale, func(err error) bool { return errors.Is(err, domain.ErrUnknownSale) })
	s.shelves = newReadCache(cfg.ShelfCacheTTL, s.shelf, nil)
	s.inFlight = make(chan struct{}, cfg.MaxInFlight)
	s.exports = make(chan struct{}, cfg.MaxExports)
	if cfg.Relay.Busy == nil {
		// The relay holds its starts back while purchases are in flight
		// here (for at most Relay.MaxYield): admission first.
		cfg.Relay.Busy = func() bool { return len(s.inFlight) > 0 }
	}
	var tracer trace.Tracer // nil: tracing off
	if deps.Tracing != nil {
		tracer = deps.Tracing.Tracer("github.com/seckill/seckill/api")
	}
	s.orders = orders.New(orders.Config{
		IPRate: cfg.IPRate, UserRate: cfg.UserRate, SaleRate: cfg.SaleRate,
		SoldOutTTL: cfg.SoldOutTTL, PayWait: cfg.PayWait,
		PaymentProvider: cfg.PaymentProvider, ReturnURL: cfg.PayReturnURL,
	}, orders.Deps{Store: deps.Store, Stock: deps.Stock, Temporal: deps.Temporal, IDs: deps.IDs, Tracer: tracer})
	s.hub = push.NewHub(deps.Stock.Client(), s.snapshot, push.Options{
		AllowedOrigins: cfg.AllowedOrigins, Line: s.orders.Places, LineRefresh: cfg.LineRefresh,
		MaxSocketsPerUser: max(cfg.WSPerUser, 0), MaxSockets: max(cfg.WSMax, 0),
	})
	if !cfg.NoRelay {
		if cfg.Relay.Fenced == nil {
			cfg.Relay.Fenced = deps.Store.RememberFenced
		}
		newStarter := relay.NewTemporalStarter
		if cfg.EagerStarts {
			newStarter = relay.NewEagerTemporalStarter
		}
		s.relay = relay.New(deps.Stock, newStarter(deps.Temporal), cfg.Relay)
	}
	s.metrics = newMetrics(s.reg, s)

	hc := huma.DefaultConfig("seckill", "1.0.0")
	hc.CreateHooks = nil // no $schema fields: the wire format is exactly the documented one
	describe(&hc)
	// /docs is the web package's, with its renderer in the binary: huma's
	// own page loads it from a CDN, and is blank offline.
	hc.DocsPath = ""
	s.api = humago.New(s.mux, hc)
	s.api.UseMiddleware(s.shed, s.authenticate, keepURL)
	s.registerSales()
	s.registerOperator()
	s.registerRefunds()
	s.registerOrders()
	s.registerSaleOrders()
	s.registerHealth()
	s.registerInfo()
	s.registerProbe()
	s.registerPayments()
	if cfg.DevTokens {
		s.registerDevTokens()
	}
	s.mux.HandleFunc("GET /v1/ws", s.serveWS)
	if deps.BuiltinPay != nil {
		// A plain handler beside huma's: the provider's own API (its
		// bearer is the provider's secret key) and hosted page. Method by
		// method, so that it does not clash with the binary's "GET /".
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			s.mux.Handle(method+" "+PayPrefix, deps.BuiltinPay)
		}
	}
	// No /metrics here: the handler is what a proxy publishes, and a
	// scrape costs Redis a read per live sale (the relay backlog), so
	// anyone could make the api read Redis at will; the series also
	// describe the system to whoever asks. The binary serves Registry on
	// its own listener.
	s.handler = s.mux
	if deps.Tracing != nil {
		s.handler = otelhttp.NewHandler(s.mux, "seckill-api",
			otelhttp.WithTracerProvider(deps.Tracing),
			otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
			// Probes would bury the orders.
			otelhttp.WithFilter(func(r *http.Request) bool {
				switch r.URL.Path {
				case "/healthz", "/readyz":
					return false
				}
				return true
			}),
			otelhttp.WithSpanNameFormatter(func(op string, r *http.Request) string {
				if r.Pattern != "" {
					return r.Pattern // "POST /v1/sales/{id}/orders", once the mux has routed it
				}
				return r.Method + " " + op
			}))
	}
	return s
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Mux lets the binary add routes (the demo page) beside the API.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// OpenAPI is the API description.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Registry is where the api's metrics live; the binary adds the Temporal
// SDK's and the worker's to it, and serves it on its internal listener.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Relay is the relay this instance runs; nil with Config.NoRelay.
func (s *Server) Relay() *relay.Relay { return s.relay }

// Run runs the background work: the relay, the websocket hub, the
// restock listener and the cancellations of cancelled sales (resumed on
// start). It returns when ctx ends.
func (s *Server) Run(ctx context.Context) error {
	tasks := map[string]func(context.Context) error{
		"hub":           s.hub.Run,
		"restock":       s.orders.ListenRestock,
		"cancellations": s.runCancellations,
	}
	if s.relay != nil {
		tasks["relay"] = s.relay.Run
	}
	if s.deps.BuiltinPay != nil {
		tasks["builtin payments"] = s.deps.BuiltinPay.Run
	}
	var wg sync.WaitGroup
	for name, run := range tasks {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				slog.Error("api background task stopped", "task", name, "err", err)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
