package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/payment/stripe"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/worker"
)

const secret = "test-secret-test-secret-test-secret"

// system is a running seckill against real Postgres, Redis and Temporal,
// served over real HTTP.
type system struct {
	t        *testing.T
	url      string
	store    *store.Store
	stock    *stock.Stock
	redis    *redis.Client
	temporal *testenv.Temporal
	tc       client.Client
	signer   *auth.Signer
	srv      *api.Server
	tracing  trace.TracerProvider
	stopW    func() // stops the worker (once)
	stopAPI  func() // stops the api serving url (once), as a crash of its process would
	// payService is the built-in payment service (options.builtinPay), payments
	// the adapters of the api and the worker.
	payService  *builtin.Service
	payments    map[string]payment.Provider
	sagaMetrics *activities.Metrics // the worker's (options.metrics)
}

type options struct {
	temporalDown bool   // Temporal is not started
	redisAddr    string // Redis the api uses instead of the test one
	cfg          api.Config
	tracing      trace.TracerProvider // traces the api, the Temporal client and the worker
	temporalArgs []string             // more arguments of `seckill temporal`
	// builtinPay: orders pay at the built-in provider, served by the api
	// under /pay/ with its test controls on.
	builtinPay bool
	// stripePay: orders pay at Stripe, as the Stripe adapter sees it
	// against stripe-mock (testenv.StripeMockURL).
	stripePay bool
	// metrics: the worker's saga series and its workflows' counters
	// (worker.MetricsHandler) are registered there, as in seckill worker.
	metrics *prometheus.Registry
}

// The built-in provider's secrets in the tests.
const (
	paySecretKey     = "test-pay-secret-key"
	payWebhookSecret = "test-pay-webhook-secret"
)

func start(t *testing.T, o options) *system {
	t.Helper()
	s := &system{t: t, store: testenv.Store(t), tracing: o.tracing}
	s.redis, _ = testenv.Redis(t)
	apiRedis := s.redis
	if o.redisAddr != "" {
		apiRedis = redis.NewClient(&redis.Options{Addr: o.redisAddr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { apiRedis.Close() })
	}
	s.stock = stock.New(s.redis, redsync.New(goredis.NewPool(s.redis)))
	apiStock := stock.New(apiRedis, redsync.New(goredis.NewPool(apiRedis)))
	s.temporal = testenv.NewTemporal(t)
	s.temporal.Args = o.temporalArgs
	if !o.temporalDown {
		s.temporal.Start()
	}
	s.tc = s.temporal.Client()
	if o.tracing != nil {
		tc, err := client.NewLazyClient(client.Options{HostPort: s.temporal.Address(),
			Interceptors: []interceptor.ClientInterceptor{worker.ClientTracing(o.tracing)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		s.tc = tc
	}
	var err error
	if s.signer, err = auth.NewSigner(secret); err != nil {
		t.Fatal(err)
	}
	// Listening before the api exists: the built-in provider's URLs are
	// the api's own.
	hs := httptest.NewUnstartedServer(nil)
	s.url = "http://" + hs.Listener.Addr().String()
	if o.builtinPay {
		s.startBuiltinPay()
		o.cfg.PaymentProvider = builtin.Name
		o.cfg.PayReturnURL = s.url + "/"
	}
	if o.stripePay {
		s.startStripePay()
		o.cfg.PaymentProvider = stripe.Name
	}
	if o.metrics != nil {
		tc, err := client.NewLazyClient(client.Options{HostPort: s.temporal.Address(),
			MetricsHandler: worker.MetricsHandler(nil, o.metrics)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		s.tc, s.sagaMetrics = tc, activities.NewMetrics(o.metrics)
	}
	if !o.temporalDown {
		s.startWorker()
	}
	srv := api.New(o.cfg, api.Deps{Store: s.store, Stock: apiStock, Temporal: s.tc, Signer: s.signer, IDs: orderid.New(1), Tracing: o.tracing,
		Payments: s.payments, BuiltinPay: s.payService})
	s.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// srv, not s.srv: a test may start another api (newAPI) and replace it.
	go func() { _ = srv.Run(ctx); close(done) }()
	hs.Config.Handler = srv.Handler()
	hs.Start()
	s.stopAPI = sync.OnceFunc(func() { hs.Close(); cancel(); <-done })
	t.Cleanup(s.stopAPI)
	return s
}

// startBuiltinPay makes the built-in payment service the api serves at
// s.url, its tables in the test's database, its notifications retried
// fast, and the adapter the worker and the api use.
func (s *system) startBuiltinPay() {
	s.t.Helper()
	svc, err := builtin.New(builtin.Config{
		DB: s.store.DB(), Prefix: api.PayPrefix, BaseURL: s.url, SecretKey: paySecretKey,
		WebhookURL: s.url + "/v1/payments/builtin/notify", WebhookSecret: payWebhookSecret,
		RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Poll: 100 * time.Millisecond, Controls: true,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := svc.Migrate(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	c, err := builtin.NewClient(builtin.ClientConfig{BaseURL: s.url + api.PayPrefix, SecretKey: paySecretKey, WebhookSecret: payWebhookSecret})
	if err != nil {
		s.t.Fatal(err)
	}
	s.payService, s.payments = svc, map[string]payment.Provider{builtin.Name: c}
}

// The Stripe adapter's secrets in the tests: stripe-mock takes any key of
// the right shape, and the notifications are signed with the webhook one.
const (
	stripeSecretKey     = "sk_test_seckillNotARealKey0123456789"
	stripeWebhookSecret = "whsec_seckillNotARealSecret"
)

// startStripePay makes the Stripe adapter, against stripe-mock, the
// provider of the worker and the api.
func (s *system) startStripePay() {
	s.t.Helper()
	p, err := stripe.New(stripe.Config{SecretKey: stripeSecretKey, WebhookSecret: stripeWebhookSecret, URL: testenv.StripeMockURL(s.t)})
	if err != nil {
		s.t.Fatal(err)
	}
	s.payments = map[string]payment.Provider{stripe.Name: p}
}

// admissionOnly is the api over real Postgres and Redis with a Temporal
// client that points nowhere: enough for everything that does not start or
// update workflows (sale creation, admission, input decoding).
func admissionOnly(tb testing.TB, cfg api.Config) (*api.Server, *store.Store, *auth.Signer) {
	tb.Helper()
	return admissionOnlyOn(tb, cfg, testenv.Store(tb))
}

// admissionOnlyOn is admissionOnly over the store db (SQLite, say).
func admissionOnlyOn(tb testing.TB, cfg api.Config, db *store.Store) (*api.Server, *store.Store, *auth.Signer) {
	tb.Helper()
	rdb, _ := testenv.Redis(tb)
	signer, err := auth.NewSigner(secret)
	if err != nil {
		tb.Fatal(err)
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))})
	if err != nil {
		tb.Fatal(err)
	}
	srv := api.New(cfg, api.Deps{
		Store: db, Stock: stock.New(rdb, redsync.New(goredis.NewPool(rdb))), Temporal: tc, Signer: signer, IDs: orderid.New(2),
	})
	return srv, db, signer
}

// startWorker runs the order saga worker (it needs Temporal up to start).
func (s *system) startWorker() {
	s.t.Helper()
	w := worker.New(s.tc, &activities.Activities{Store: s.store, Stock: s.stock, Events: push.NewPublisher(s.redis), Payments: s.payments,
		Metrics: s.sagaMetrics},
		worker.Options{Tracing: s.tracing})
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.stopW = sync.OnceFunc(w.Stop)
	s.t.Cleanup(s.stopW)
}

func (s *system) token(user, role string) string {
	s.t.Helper()
	tok, err := s.signer.Mint(user, role, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// response is an HTTP answer with its decoded JSON body.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) problem(t *testing.T) wire.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("content type %q, want application/problem+json (body %s)", ct, r.body)
	}
	var p wire.Problem
	r.decode(t, &p)
	return p
}

func (s *system) do(method, path, token string, body any, header ...string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// createSale creates a sale that is open now.
func (s *system) createSale(units int) wire.Sale {
	s.t.Helper()
	return s.createSaleWith(map[string]any{"stock": units})
}

// createSaleWith creates a sale open now for an hour, "flash phone" at
// 19900, with fields replacing or adding to those.
func (s *system) createSaleWith(fields map[string]any) wire.Sale {
	s.t.Helper()
	body := map[string]any{
		"name": "flash phone", "price_cents": 19900,
		"starts_at": time.Now().Add(-time.Second), "ends_at": time.Now().Add(time.Hour),
	}
	maps.Copy(body, fields)
	r := s.do("POST", "/v1/sales", s.token("ops", auth.RoleAdmin), body)
	if r.status != http.StatusCreated {
		s.t.Fatalf("create sale: %d %s", r.status, r.body)
	}
	var sale wire.Sale
	r.decode(s.t, &sale)
	return sale
}

func (s *system) sale(id string) wire.Sale {
	s.t.Helper()
	r := s.do("GET", "/v1/sales/"+id, "", nil)
	if r.status != http.StatusOK {
		s.t.Fatalf("get sale: %d %s", r.status, r.body)
	}
	var sale wire.Sale
	r.decode(s.t, &sale)
	return sale
}

func (s *system) buy(saleID, user string) response {
	s.t.Helper()
	return s.do("POST", "/v1/sales/"+saleID+"/orders", s.token(user, auth.RoleBuyer), nil)
}

func (s *system) getOrder(id, user string) (wire.Order, response) {
	s.t.Helper()
	r := s.do("GET", "/v1/orders/"+id, s.token(user, auth.RoleBuyer), nil)
	var o wire.Order
	if r.status == http.StatusOK {
		r.decode(s.t, &o)
	}
	return o, r
}

// waitStatus waits until the order reaches status.
func (s *system) waitStatus(id, user string, status domain.Status) {
	s.t.Helper()
	testenv.Eventually(s.t, 2*time.Minute, func() error {
		o, r := s.getOrder(id, user)
		if r.status != http.StatusOK || o.Status != status {
			return fmt.Errorf("order %s: %d %s, want %s", id, r.status, o.Status, status)
		}
		return nil
	})
}

// socket is a buyer's websocket, collecting events.
type socket struct {
	conn   *websocket.Conn
	events chan domain.Event
}

func (s *system) connect(user string) *socket {
	s.t.Helper()
	u := "ws" + strings.TrimPrefix(s.url, "http") + "/v1/ws?access_token=" + s.token(user, auth.RoleBuyer)
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		s.t.Fatalf("websocket for %s: %v (%v)", user, err, resp)
	}
	sk := &socket{conn: conn, events: make(chan domain.Event, 256)}
	go func() {
		defer close(sk.events)
		for {
			var e domain.Event
			if err := conn.ReadJSON(&e); err != nil {
				return
			}
			sk.events <- e
		}
	}()
	s.t.Cleanup(func() { conn.Close() })
	return sk
}

// await returns the first event of order with status, failing after two
// minutes.
func (sk *socket) await(t *testing.T, orderID string, status domain.Status) domain.Event {
	t.Helper()
	return awaitEvent(t, sk, orderID, string(status), func(e domain.Event) bool { return e.Status == status })
}
