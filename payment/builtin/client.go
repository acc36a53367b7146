package builtin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/redact"
	"github.com/seckill/seckill/payment"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is the service's URL with its prefix:
	// "http://127.0.0.1:8080/pay/".
	BaseURL string
	// SecretKey authenticates the calls; WebhookSecret verifies the
	// notifications. Never logged.
	SecretKey     string
	WebhookSecret string
	// HTTPClient makes the calls (default: one with a 10 s timeout).
	HTTPClient *http.Client
	// Tolerance is how old (or how far ahead of now) a notification's
	// signed timestamp may be (default 5 min); older is ErrStale, a
	// replay.
	Tolerance time.Duration
}

// Client is the adapter: payment.Provider over the Service's HTTP API, as
// an adapter of a provider elsewhere would be (docs/design.md §4.10).
type Client struct {
	cfg    ClientConfig
	base   *url.URL
	sealer *payment.Sealer
}

var _ payment.Provider = (*Client)(nil)

// NewClient returns a client of the service at cfg.BaseURL.
func NewClient(cfg ClientConfig) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("builtin payments client: base URL must be an absolute http(s) URL")
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	if cfg.SecretKey == "" || cfg.WebhookSecret == "" {
		return nil, errors.New("builtin payments client: a secret key and a webhook secret are required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = 5 * time.Minute
	}
	sealer, err := payment.NewSealer(Name, cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("builtin payments client: %w", err)
	}
	return &Client{cfg: cfg, base: base, sealer: sealer}, nil
}

// APIError is the service's answer to a refused call, wrapped in the
// error an adapter method returns beside payment.ErrRejected,
// ErrNotFound or ErrUnavailable. Code is stable: payment_not_found,
// payment_not_captured, payment_already_refunded,
// idempotency_key_reused, invalid_request, ...
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Name is "builtin".
func (c *Client) Name() string { return Name }

// Sealer seals the hosted pages' URLs, with a key derived from the secret
// key: the api and the worker share it.
func (c *Client) Sealer() *payment.Sealer { return c.sealer }

// Create creates a payment, idempotent by req.Key.
func (c *Client) Create(ctx context.Context, req payment.CreateRequest) (payment.Payment, error) {
	if req.Key == "" {
		return payment.Payment{}, fmt.Errorf("builtin: create a payment: no idempotency key: %w", payment.ErrRejected)
	}
	body := createBody{
		Amount: req.Amount.Minor, Currency: req.Amount.Currency,
		Metadata: apiMetadata{
			OrderID: strconv.FormatInt(req.OrderID, 10), SaleID: strconv.FormatInt(req.SaleID, 10), UserID: req.UserID,
		},
		ReturnURL: req.ReturnURL, ExpiresAt: req.ExpiresAt,
	}
	var out apiPayment
	if err := c.do(ctx, http.MethodPost, "payments", req.Key, body, &out); err != nil {
		return payment.Payment{}, err
	}
	return toPayment(out)
}

// Get reads a payment.
func (c *Client) Get(ctx context.Context, id string) (payment.Payment, error) {
	var out apiPayment
	if err := c.do(ctx, http.MethodGet, "payments/"+url.PathEscape(id), "", nil, &out); err != nil {
		return payment.Payment{}, err
	}
	return toPayment(out)
}

// Cancel cancels a payment not captured. The service answers a payment
// captured meanwhile with its captured state, which is returned as is,
// without an error: the caller decides (docs/design.md §4.10).
func (c *Client) Cancel(ctx context.Context, id string) (payment.Payment, error) {
	var out apiPayment
	if err := c.do(ctx, http.MethodPost, "payments/"+url.PathEscape(id)+"/cancel", "", nil, &out); err != nil {
		return payment.Payment{}, err
	}
	return toPayment(out)
}

// Refund refunds a captured payment whole, idempotent by key. A payment
// refunded under another key is ErrRejected with the APIError code
// payment_already_refunded.
func (c *Client) Refund(ctx context.Context, paymentID, key, reason string) (payment.Refund, error) {
	if key == "" {
		return payment.Refund{}, fmt.Errorf("builtin: refund %s: no idempotency key: %w", paymentID, payment.ErrRejected)
	}
	var out apiRefund
	if err := c.do(ctx, http.MethodPost, "payments/"+url.PathEscape(paymentID)+"/refund", key, refundBody{Reason: reason}, &out); err != nil {
		return payment.Refund{}, err
	}
	return toRefund(out), nil
}

// Captured lists the payments captured in [from, to), refunded since or
// not, reading every page.
func (c *Client) Captured(ctx context.Context, from, to time.Time) ([]payment.Payment, error) {
	var all []payment.Payment
	after := ""
	for {
		q := url.Values{
			"captured_from": {from.UTC().Format(time.RFC3339Nano)},
			"captured_to":   {to.UTC().Format(time.RFC3339Nano)},
			"limit":         {"1000"},
		}
		if after != "" {
			q.Set("after", after)
		}
		var page apiList
		if err := c.do(ctx, http.MethodGet, "payments?"+q.Encode(), "", nil, &page); err != nil {
			return nil, err
		}
		for _, w := range page.Data {
			p, err := toPayment(w)
			if err != nil {
				return nil, err
			}
			all = append(all, p)
		}
		if !page.HasMore || page.NextAfter == "" {
			return all, nil
		}
		after = page.NextAfter
	}
}

// Verify checks a notification's signature first, in constant time, then
// its age, then parses it. A missing or malformed signature header is
// ErrBadSignature, as a wrong signature is.
func (c *Client) Verify(header http.Header, body []byte, now time.Time) (payment.Event, error) {
	ts, sigs, ok := parseSignature(header.Get(SignatureHeader))
	if !ok {
		return payment.Event{}, fmt.Errorf("builtin: malformed %s header: %w", SignatureHeader, payment.ErrBadSignature)
	}
	want := signature(c.cfg.WebhookSecret, ts, body)
	valid := false
	for _, sig := range sigs {
		// hmac.Equal is constant time; every candidate is compared.
		valid = hmac.Equal(sig, want) || valid
	}
	if !valid {
		return payment.Event{}, fmt.Errorf("builtin: %w", payment.ErrBadSignature)
	}
	if age := now.Sub(time.Unix(ts, 0)); age > c.cfg.Tolerance || age < -c.cfg.Tolerance {
		return payment.Event{}, fmt.Errorf("builtin: notification signed %s from now: %w", age.Round(time.Second), payment.ErrStale)
	}
	var ev apiEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return payment.Event{}, fmt.Errorf("builtin: notification body: %w", err)
	}
	switch ev.Type {
	case "payment.captured", "payment.declined", "payment.canceled", "refund.succeeded":
	default:
		return payment.Event{}, fmt.Errorf("builtin: notification %s of type %q: %w", ev.ID, ev.Type, payment.ErrIgnored)
	}
	p, err := toPayment(ev.Data.Payment)
	if err != nil {
		return payment.Event{}, fmt.Errorf("builtin: notification %s: %w", ev.ID, err)
	}
	out := payment.Event{ID: ev.ID, At: ev.Created, Payment: p}
	if ev.Data.Refund != nil {
		rf := toRefund(*ev.Data.Refund)
		out.Refund = &rf
	}
	return out, nil
}

// parseSignature reads "t=<unix>,v1=<hex>[,v1=<hex>...]". Several v1
// values let a receiver roll its secret; unknown schemes are skipped.
func parseSignature(h string) (ts int64, sigs [][]byte, ok bool) {
	haveT := false
	for part := range strings.SplitSeq(h, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return 0, nil, false
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveT {
				return 0, nil, false
			}
			ts, haveT = n, true
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != 32 {
				return 0, nil, false
			}
			sigs = append(sigs, sig)
		}
	}
	return ts, sigs, haveT && len(sigs) > 0
}

// toPayment maps the wire's payment onto the port's.
func toPayment(w apiPayment) (payment.Payment, error) {
	order, err := strconv.ParseInt(w.Metadata.OrderID, 10, 64)
	if err != nil {
		return payment.Payment{}, fmt.Errorf("builtin: payment %s: order id %q: %w", w.ID, w.Metadata.OrderID, err)
	}
	state := payment.State(w.Status)
	switch state {
	case payment.Pending, payment.Captured, payment.Declined, payment.Canceled, payment.Refunded:
	default:
		return payment.Payment{}, fmt.Errorf("builtin: payment %s: unknown status %q", w.ID, w.Status)
	}
	p := payment.Payment{
		Provider: Name, ID: w.ID, OrderID: order, Amount: payment.Money{Minor: w.Amount, Currency: w.Currency},
		State: state, RedirectURL: w.CheckoutURL, Created: w.Created,
	}
	if (state == payment.Captured || state == payment.Refunded) && w.AmountCaptured > 0 {
		p.Captured = payment.Money{Minor: w.AmountCaptured, Currency: w.Currency}
	}
	return p, nil
}

func toRefund(w apiRefund) payment.Refund {
	return payment.Refund{
		Provider: Name, ID: w.ID, PaymentID: w.PaymentID, Amount: payment.Money{Minor: w.Amount, Currency: w.Currency},
		State: payment.RefundState(w.Status),
	}
}

// do makes one API call and decodes its answer into out, mapping the
// failures onto the port's errors: 429 *payment.RateLimitedError, 5xx and
// transport errors ErrUnavailable, 404 ErrNotFound, other 4xx ErrRejected.
func (c *Client) do(ctx context.Context, method, path, key string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base.String() + "api/" + path
	what := method + " " + strings.SplitN(path, "?", 2)[0]
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return redact.Error(fmt.Errorf("builtin: %s: %w", what, err), c.cfg.BaseURL)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.SecretKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		// The URL's password, if any, stays out; the key travels in a
		// header, which no transport error quotes.
		return fmt.Errorf("builtin: %s: %w: %w", what, payment.ErrUnavailable, redact.Error(err, c.cfg.BaseURL))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("builtin: %s: read the answer: %w: %w", what, payment.ErrUnavailable, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("builtin: %s: answer: %w: %w", what, payment.ErrUnavailable, err)
		}
		return nil
	}
	ae := &APIError{Status: resp.StatusCode, Code: "unknown", Message: http.StatusText(resp.StatusCode)}
	var eb apiErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
		ae.Code, ae.Message = eb.Error.Code, eb.Error.Message
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return &payment.RateLimitedError{Provider: Name, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case resp.StatusCode >= 500:
		return fmt.Errorf("builtin: %s: %w: %w", what, payment.ErrUnavailable, ae)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("builtin: %s: %w (%w): %w", what, payment.ErrNotFound, payment.ErrRejected, ae)
	default:
		return fmt.Errorf("builtin: %s: %w: %w", what, payment.ErrRejected, ae)
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; zero
// when absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// String masks the secrets, so a ClientConfig printed by mistake leaks none.
func (c ClientConfig) String() string {
	return fmt.Sprintf("builtin.ClientConfig{BaseURL:%q SecretKey:%s WebhookSecret:%s Tolerance:%s}",
		redact.URL(c.BaseURL), mask(c.SecretKey), mask(c.WebhookSecret), c.Tolerance)
}

// LogValue is String for log/slog.
func (c ClientConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }
