// Package builtin is the payment provider inside the seckill binary
// (docs/design.md §4.10): a small payment service with its own records, a
// hosted pay page and signed notifications sent from an outbox, and the
// adapter (Client) that implements payment.Provider against it over HTTP,
// exactly as a real provider's adapter would. `seckill dev`, the tests, the
// demo page and the bench pay through it, offline; the workflow cannot
// tell it from Stripe, so what it tests is what runs against Stripe.
//
// Routes under Config.Prefix (say /pay/). The API takes
// "Authorization: Bearer <secret key>" and answers JSON, errors as
// {"error": {"code", "message"}} with a stable code:
//
//	POST <prefix>api/payments               create (Idempotency-Key required)
//	GET  <prefix>api/payments/{id}          read
//	POST <prefix>api/payments/{id}/cancel   cancel; a captured one answers 200, captured
//	POST <prefix>api/payments/{id}/refund   refund whole (Idempotency-Key required)
//	GET  <prefix>api/payments?captured_from=&captured_to=[&limit=&after=]
//	                                        the captures of [from, to), a page at a time
//	GET|PUT <prefix>api/controls            the test controls (Config.Controls only)
//	POST <prefix>api/payments/{id}/capture_late  (Config.Controls only)
//	GET|POST <prefix>checkout/{id}          the hosted pay page and its buttons
//
// The service keeps its records in its own tables (builtinpay_*), through
// database/sql rather than ent: they are the provider's records, not
// seckill's, and they sit in seckill's database only because a provider in
// the binary needs somewhere durable to live.
package builtin

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/redact"
)

// Name is the provider's name, as payment.Provider.Name answers it.
const Name = "builtin"

// Config configures a Service.
type Config struct {
	// DB holds the service's tables (Migrate creates them): Postgres
	// (github.com/lib/pq) or SQLite (modernc.org/sqlite).
	DB *sql.DB
	// Prefix is the path the service is mounted under, with its slashes:
	// "/pay/". Routes are <Prefix>api/..., <Prefix>checkout/<id>.
	Prefix string
	// BaseURL is the public origin a buyer's browser reaches the service
	// at ("http://localhost:8080"); the hosted page's URL is
	// BaseURL + Prefix + "checkout/<id>".
	BaseURL string
	// SecretKey authenticates the provider API (Authorization: Bearer).
	SecretKey string
	// WebhookURL receives the notifications; WebhookSecret signs them.
	WebhookURL    string
	WebhookSecret string
	// HTTPClient sends the notifications (default: one that does not
	// follow redirects, as providers do not). Each attempt is cut off
	// after 10 s whatever its timeout.
	HTTPClient *http.Client
	// RetryMin and RetryMax bound the backoff between a notification's
	// attempts: it doubles from RetryMin up to RetryMax (defaults 1 s and
	// 1 min), and never gives up.
	RetryMin, RetryMax time.Duration
	// Poll is how often the sender looks at the outbox when nothing woke
	// it (events another instance wrote, expiries; default 1 s).
	Poll time.Duration
	// SendConcurrency caps the notifications in flight (default 16).
	SendConcurrency int
	// Controls enables the test and demo controls (controls.go). Off in
	// production: they make the provider misbehave on request.
	Controls bool
	// Now is the service's clock (default time.Now); tests move it to
	// expire payments.
	Now func() time.Time
	// Logger logs deliveries that fail (default slog.Default()). Secrets
	// are never logged.
	Logger *slog.Logger
}

// Service is the built-in payment service: an http.Handler to mount under
// Config.Prefix, and a notification sender to Run.
type Service struct {
	cfg  Config
	db   *sql.DB
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{} // a state change committed: send its event now
	mux  *http.ServeMux

	mu       sync.Mutex
	controls Controls
}

// New returns a service over cfg.DB. Call Migrate before serving.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("builtin payments: no database")
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("builtin payments: prefix %q must start and end with /", cfg.Prefix)
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("builtin payments: base URL must be an absolute http(s) URL")
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	if cfg.SecretKey == "" {
		return nil, errors.New("builtin payments: no secret key")
	}
	if cfg.WebhookURL != "" {
		if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("builtin payments: webhook URL must be an absolute http(s) URL")
		}
		if cfg.WebhookSecret == "" {
			return nil, errors.New("builtin payments: a webhook URL needs a webhook secret")
		}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(time.Minute, cfg.RetryMin)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.SendConcurrency <= 0 {
		cfg.SendConcurrency = 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		cfg:  cfg,
		db:   cfg.DB,
		log:  cfg.Logger.With("provider", Name),
		now:  cfg.Now,
		wake: make(chan struct{}, 1),
		mux:  http.NewServeMux(),
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the provider API and the hosted page (routes in
// api.go and checkout.go).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// checkoutURL is the hosted page of payment id.
func (s *Service) checkoutURL(id string) string {
	return s.cfg.BaseURL + s.cfg.Prefix + "checkout/" + id
}

// notifyNow wakes the sender after a commit that wrote an event.
func (s *Service) notifyNow() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// newID is a random id with a prefix saying what it names. A payment's id
// is also what makes its hosted page unguessable, as a provider's checkout
// URL is: 128 random bits.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}

// String masks the secrets, so a Config printed by mistake leaks none.
func (c Config) String() string {
	return fmt.Sprintf("builtin.Config{Prefix:%q BaseURL:%q WebhookURL:%q SecretKey:%s WebhookSecret:%s Controls:%t}",
		c.Prefix, c.BaseURL, redact.URL(c.WebhookURL), mask(c.SecretKey), mask(c.WebhookSecret), c.Controls)
}

// LogValue is String for log/slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

func mask(secret string) string {
	if secret == "" {
		return `""`
	}
	return redact.Mask
}
