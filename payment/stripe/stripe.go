// Package stripe is the payment port's adapter for Stripe's PaymentIntents
// (docs/design.md §4.10), through github.com/stripe/stripe-go.
//
// A payment is a PaymentIntent with automatic payment methods: Create
// answers its client secret, and the buyer's client completes it with
// Stripe.js. Not Checkout Sessions: a session cannot expire sooner than 30
// minutes, and the order's workflow cancels the payment at its own deadline
// anyway (Cancel), so a PaymentIntent, which never expires by itself, loses
// nothing.
//
// Intent statuses map onto payment.State as follows:
//
//	requires_payment_method      Pending: created, nothing paid yet
//	  with last_payment_error    Declined: a confirmation failed (see below)
//	requires_confirmation        Pending: a payment method is attached, the client has not confirmed
//	requires_action              Pending: the buyer must authenticate (3-D Secure, a redirect)
//	processing                   Pending: the method settles asynchronously; money is not taken yet
//	requires_capture             Pending: authorized, not captured; seckill creates intents with
//	                             automatic capture, so only a manually captured intent stops here,
//	                             and authorized money is not captured money
//	succeeded                    Captured, with amount_received in the intent's currency
//	canceled                     Canceled
//	anything newer               Pending: not final, so the workflow keeps asking and cancels at the deadline
//
// Declined: Stripe puts an intent whose confirmation failed back to
// requires_payment_method with last_payment_error set (the field is cleared
// by any later update), so the failure can be told from the object, and the
// port's Declined ("this payment failed, the buyer may pay again with a new
// payment") is what the buyer's client shows. Stripe itself would let the
// same client secret confirm again: a caller that creates a new payment
// after a decline cancels the declined one first (Cancel does cancel it at
// Stripe), or accepts its later capture.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/seckill/seckill/payment"
)

// Name is the provider's name in URLs, metrics and an order's record.
const Name = "stripe"

// APIVersion is the Stripe API version this adapter speaks: the library's,
// sent on every request. Webhook endpoints are created with it (see
// Verify), and the tests run stripe-mock built from the same OpenAPI
// version (internal/testenv.StripeMockVersion).
const APIVersion = stripego.APIVersion

// Config is what the adapter needs; the command wiring fills it from the
// environment (the secrets never come from flags, which show in ps).
// Its String and LogValue redact both secrets.
type Config struct {
	// SecretKey is the API key (sk_live_…, sk_test_…, or a restricted
	// rk_… with PaymentIntents and Refunds write access).
	SecretKey string
	// WebhookSecret is the webhook endpoint's signing secret (whsec_…).
	WebhookSecret string
	// URL replaces Stripe's API base URL: stripe-mock's in tests. Empty
	// is Stripe's own.
	URL string
	// HTTPClient calls Stripe; nil is the library's (80 s timeout). The
	// caller's context bounds each call in any case.
	HTTPClient *http.Client
	// Tolerance is how long after signing a notification is accepted;
	// zero is the library's default, 5 minutes (Stripe's own advice).
	Tolerance time.Duration
}

func (c Config) String() string {
	return fmt.Sprintf("stripe.Config{SecretKey:%s WebhookSecret:%s URL:%q Tolerance:%s}",
		redacted(c.SecretKey), redacted(c.WebhookSecret), c.URL, c.Tolerance)
}

// GoString keeps %#v from printing the secrets too.
func (c Config) GoString() string { return c.String() }

// LogValue keeps the secrets out of slog output.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("secret_key", redacted(c.SecretKey)),
		slog.String("webhook_secret", redacted(c.WebhookSecret)),
		slog.String("url", c.URL),
		slog.Duration("tolerance", c.Tolerance),
	)
}

func redacted(secret string) string {
	if secret == "" {
		return "(unset)"
	}
	return "(redacted)"
}

// Provider is Stripe as a payment.Provider.
type Provider struct {
	client        *stripego.Client
	secretKey     string
	webhookSecret string
	tolerance     time.Duration
	sealer        *payment.Sealer
}

var _ payment.Provider = (*Provider)(nil)

// New returns the adapter. Both secrets are required: a provider that can
// take payments but not verify their notifications would leave orders to
// the deadline's read alone.
func New(cfg Config) (*Provider, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripe: no secret key (STRIPE_SECRET_KEY)")
	}
	if cfg.WebhookSecret == "" {
		return nil, errors.New("stripe: no webhook signing secret (STRIPE_WEBHOOK_SECRET)")
	}
	bc := &stripego.BackendConfig{
		HTTPClient: cfg.HTTPClient,
		// No retries in the library: the workflow's activity retries own
		// retrying (with its backoff, its rate limit and its deadline), and
		// the library's retries sleep without watching the context. Every
		// write carries an idempotency key, so the activity's retry of a
		// request whose answer was lost is safe.
		MaxNetworkRetries: stripego.Int64(0),
		// Silent: errors come back to the caller, who logs them with the
		// order; the library's own log lines would repeat them.
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if cfg.URL != "" {
		bc.URL = stripego.String(strings.TrimSuffix(cfg.URL, "/"))
	}
	tolerance := cfg.Tolerance
	if tolerance <= 0 {
		tolerance = defaultTolerance
	}
	sealer, err := payment.NewSealer(Name, cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	return &Provider{
		sealer:        sealer,
		client:        stripego.NewClient(cfg.SecretKey, stripego.WithBackends(stripego.NewBackendsWithConfig(bc))),
		secretKey:     cfg.SecretKey,
		webhookSecret: cfg.WebhookSecret,
		tolerance:     tolerance,
	}, nil
}

func (p *Provider) Name() string { return Name }

// Sealer seals the intents' client secrets, with a key derived from the
// secret key. An api and a worker given different keys (restricted keys
// of their own) cannot open each other's seals: every pay then reads the
// intent from Stripe again (docs/design.md §4.10).
func (p *Provider) Sealer() *payment.Sealer { return p.sealer }

// Metadata keys on every intent seckill creates: a notification or a
// reconciliation finds the order from the intent alone.
const (
	metaOrderID = "order_id"
	metaSaleID  = "sale_id"
	metaUserID  = "user_id"
	// metaReason on a refund: seckill's reason, whatever Stripe's is.
	metaReason = "seckill_reason"
)

// Create creates a PaymentIntent, idempotent by req.Key (Stripe keeps an
// idempotency key for at least 24 hours; a retry later than that would
// create a second intent, which the workflow's retries never are).
// req.ReturnURL is not sent: the buyer's client passes it when it confirms
// with Stripe.js. req.ExpiresAt neither: an intent does not expire, and the
// workflow cancels it at the deadline.
func (p *Provider) Create(ctx context.Context, req payment.CreateRequest) (payment.Payment, error) {
	switch {
	case req.Key == "":
		return payment.Payment{}, fmt.Errorf("stripe: create payment: %w: no idempotency key", payment.ErrRejected)
	case req.Amount.Minor <= 0:
		return payment.Payment{}, fmt.Errorf("stripe: create payment: %w: amount %s is not positive", payment.ErrRejected, req.Amount)
	case !payment.ValidCurrency(req.Amount.Currency):
		return payment.Payment{}, fmt.Errorf("stripe: create payment: %w: currency %q is not an ISO 4217 code", payment.ErrRejected, req.Amount.Currency)
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:   stripego.Int64(req.Amount.Minor),
		Currency: stripego.String(strings.ToLower(req.Amount.Currency)),
		AutomaticPaymentMethods: &stripego.PaymentIntentCreateAutomaticPaymentMethodsParams{
			Enabled: stripego.Bool(true),
		},
		Metadata: map[string]string{
			metaOrderID: strconv.FormatInt(req.OrderID, 10),
			metaSaleID:  strconv.FormatInt(req.SaleID, 10),
			metaUserID:  req.UserID,
		},
	}
	params.IdempotencyKey = stripego.String(req.Key)
	pi, err := p.client.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return payment.Payment{}, p.fail("create payment", err)
	}
	pay := toPayment(pi)
	pay.ClientSecret = pi.ClientSecret
	return pay, nil
}

// Get retrieves an intent.
func (p *Provider) Get(ctx context.Context, id string) (payment.Payment, error) {
	pi, err := p.client.V1PaymentIntents.Retrieve(ctx, id, nil)
	if err != nil {
		return payment.Payment{}, p.fail("get payment "+id, err)
	}
	pay := toPayment(pi)
	pay.ClientSecret = pi.ClientSecret
	return pay, nil
}

// ErrProcessing: Cancel found the intent processing (a payment method that
// settles asynchronously); Stripe cannot cancel it, and it will end
// captured or failed. It wraps payment.ErrUnavailable, so the workflow
// treats it as a provider that cannot answer yet: it holds the unit for the
// grace and asks again.
var ErrProcessing = fmt.Errorf("%w: the payment is processing at Stripe and cannot be cancelled yet", payment.ErrUnavailable)

// Cancel cancels an intent (reason "abandoned": the buyer did not pay in
// the window). Stripe refuses to cancel an intent that succeeded, was
// cancelled already or is processing, with payment_intent_unexpected_state;
// the intent as it stands then is the answer: Captured or Canceled with no
// error, processing with ErrProcessing.
func (p *Provider) Cancel(ctx context.Context, id string) (payment.Payment, error) {
	params := &stripego.PaymentIntentCancelParams{CancellationReason: stripego.String("abandoned")}
	pi, err := p.client.V1PaymentIntents.Cancel(ctx, id, params)
	if err == nil {
		return toPayment(pi), nil
	}
	var se *stripego.Error
	if !errors.As(err, &se) || se.Code != stripego.ErrorCodePaymentIntentUnexpectedState {
		return payment.Payment{}, p.fail("cancel payment "+id, err)
	}
	// Stripe's error carries the intent; read it when it does not.
	pi = se.PaymentIntent
	if pi == nil || pi.ID == "" || pi.Status == "" {
		if pi, err = p.client.V1PaymentIntents.Retrieve(ctx, id, nil); err != nil {
			return payment.Payment{}, p.fail("cancel payment "+id+": read it after Stripe refused", err)
		}
	}
	pay := toPayment(pi)
	if pay.State == payment.Pending {
		return pay, fmt.Errorf("stripe: cancel payment %s (%s): %w", id, pi.Status, ErrProcessing)
	}
	return pay, nil
}

// Refund refunds an intent's captured amount whole (no amount sent: Stripe
// refunds what remains), idempotent by key. Stripe's reason takes three
// values: seckill's reason passes through when it is "duplicate" (a second
// capture) or "requested_by_customer"; never "fraudulent", which makes
// Radar block the card, an operator's call in the Dashboard. The reason as
// seckill gave it is always in the refund's metadata (seckill_reason).
func (p *Provider) Refund(ctx context.Context, paymentID, key, reason string) (payment.Refund, error) {
	if key == "" {
		return payment.Refund{}, fmt.Errorf("stripe: refund %s: %w: no idempotency key", paymentID, payment.ErrRejected)
	}
	params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(paymentID)}
	params.IdempotencyKey = stripego.String(key)
	switch stripego.RefundReason(reason) {
	case stripego.RefundReasonDuplicate, stripego.RefundReasonRequestedByCustomer:
		params.Reason = stripego.String(reason)
	}
	if reason != "" {
		params.Metadata = map[string]string{metaReason: reason}
	}
	r, err := p.client.V1Refunds.Create(ctx, params)
	if err != nil {
		return payment.Refund{}, p.fail("refund "+paymentID, err)
	}
	return toRefund(r), nil
}

// Captured lists the intents that succeeded among those created in
// [from, to), to the second, rounded outward. Stripe's list filters by
// creation time only (an intent records no capture time), so the caller's
// range must reach back to the creation of every payment that could have
// been captured in the period it reconciles: for a sale, from the sale's
// start (no payment is created before it) to its end plus the payment
// window (the last order admitted creates its last payment within it).
// Pages of 100, through the library's auto-paginating iterator.
func (p *Provider) Captured(ctx context.Context, from, to time.Time) ([]payment.Payment, error) {
	lt := to.Unix()
	if to.After(time.Unix(lt, 0)) {
		lt++
	}
	params := &stripego.PaymentIntentListParams{
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: from.Unix(), LesserThan: lt},
	}
	params.Limit = stripego.Int64(100)
	var out []payment.Payment
	for pi, err := range p.client.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return nil, p.fail("list payments", err)
		}
		if pi.Status == stripego.PaymentIntentStatusSucceeded {
			out = append(out, toPayment(pi))
		}
	}
	return out, nil
}

// stateOf maps an intent's status (see the package comment).
func stateOf(pi *stripego.PaymentIntent) payment.State {
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		return payment.Captured
	case stripego.PaymentIntentStatusCanceled:
		return payment.Canceled
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			return payment.Declined
		}
	}
	return payment.Pending
}

// toPayment maps an intent, without its client secret (only the buyer's
// client needs it: Create and Get add it).
func toPayment(pi *stripego.PaymentIntent) payment.Payment {
	cur := strings.ToUpper(string(pi.Currency))
	pay := payment.Payment{
		Provider: Name,
		ID:       pi.ID,
		Amount:   payment.Money{Minor: pi.Amount, Currency: cur},
		State:    stateOf(pi),
		Created:  time.Unix(pi.Created, 0).UTC(),
	}
	// An intent seckill did not create has no order: OrderID stays 0, and
	// the reconciliation refunds a capture no order knows.
	if id, err := strconv.ParseInt(pi.Metadata[metaOrderID], 10, 64); err == nil {
		pay.OrderID = id
	}
	if pay.State == payment.Captured {
		pay.Captured = payment.Money{Minor: pi.AmountReceived, Currency: cur}
	}
	return pay
}

func toRefund(r *stripego.Refund) payment.Refund {
	out := payment.Refund{
		Provider: Name,
		ID:       r.ID,
		Amount:   payment.Money{Minor: r.Amount, Currency: strings.ToUpper(string(r.Currency))},
	}
	if r.PaymentIntent != nil {
		out.PaymentID = r.PaymentIntent.ID
	}
	switch r.Status {
	case stripego.RefundStatusSucceeded:
		out.State = payment.RefundSucceeded
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		out.State = payment.RefundFailed
	default: // pending, requires_action (the buyer must give bank details)
		out.State = payment.RefundPending
	}
	return out
}
