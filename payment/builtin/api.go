package builtin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/payment"
)

// The provider API's wire format: what a real provider's REST API looks
// like, so that the Client is an adapter like any other. Ids of seckill's
// records travel as strings in metadata, as providers keep metadata.

type apiMetadata struct {
	OrderID string `json:"order_id"`
	SaleID  string `json:"sale_id"`
	UserID  string `json:"user_id"`
}

type apiPayment struct {
	Object             string      `json:"object"` // "payment"
	ID                 string      `json:"id"`
	Amount             int64       `json:"amount"`
	Currency           string      `json:"currency"`
	AmountCaptured     int64       `json:"amount_captured"`
	Status             string      `json:"status"`
	CancellationReason string      `json:"cancellation_reason,omitempty"`
	Metadata           apiMetadata `json:"metadata"`
	CheckoutURL        string      `json:"checkout_url"`
	ReturnURL          string      `json:"return_url"`
	ExpiresAt          time.Time   `json:"expires_at"`
	Created            time.Time   `json:"created"`
	CapturedAt         *time.Time  `json:"captured_at,omitempty"`
}

type apiRefund struct {
	Object    string    `json:"object"` // "refund"
	ID        string    `json:"id"`
	PaymentID string    `json:"payment_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason"`
	Created   time.Time `json:"created"`
}

// apiEvent is a notification's body. Type is payment.captured,
// payment.declined, payment.canceled or refund.succeeded.
type apiEvent struct {
	Object  string    `json:"object"` // "event"
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created time.Time `json:"created"`
	Data    eventData `json:"data"`
}

type eventData struct {
	Payment apiPayment `json:"payment"`
	Refund  *apiRefund `json:"refund,omitempty"`
}

type apiList struct {
	Object    string       `json:"object"` // "list"
	Data      []apiPayment `json:"data"`
	HasMore   bool         `json:"has_more"`
	NextAfter string       `json:"next_after,omitempty"`
}

type apiErrorBody struct {
	Error apiError `json:"error"`
}

// apiError is an error answer: a stable code, and a message for people.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func apiErr(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

type createBody struct {
	Amount    int64       `json:"amount"`
	Currency  string      `json:"currency"`
	Metadata  apiMetadata `json:"metadata"`
	ReturnURL string      `json:"return_url"`
	ExpiresAt time.Time   `json:"expires_at"`
}

type refundBody struct {
	Reason string `json:"reason"`
}

func (s *Service) wire(r record) apiPayment {
	return apiPayment{
		Object: "payment", ID: r.ID, Amount: r.Amount.Minor, Currency: r.Amount.Currency, AmountCaptured: r.Captured,
		Status: string(r.State), CancellationReason: r.CancelReason,
		Metadata: apiMetadata{
			OrderID: strconv.FormatInt(r.OrderID, 10), SaleID: strconv.FormatInt(r.SaleID, 10), UserID: r.UserID,
		},
		CheckoutURL: s.checkoutURL(r.ID), ReturnURL: r.ReturnURL, ExpiresAt: r.ExpiresAt, Created: r.Created,
		CapturedAt: r.CapturedAt,
	}
}

func wireRefund(r refundRecord) apiRefund {
	return apiRefund{
		Object: "refund", ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount.Minor, Currency: r.Amount.Currency,
		Status: string(r.State), Reason: r.Reason, Created: r.Created,
	}
}

// routes registers the API and the hosted page under the prefix.
func (s *Service) routes() {
	p := s.cfg.Prefix
	api := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		s.mux.Handle(strings.Replace(pattern, " ", " "+p+"api/", 1), s.authenticated(s.faulty(h)))
	}
	api("POST payments", s.createPayment)
	api("GET payments", s.listCaptured)
	api("GET payments/{id}", s.getPayment)
	api("POST payments/{id}/cancel", s.cancelPayment)
	api("POST payments/{id}/refund", s.refundPayment)
	if s.cfg.Controls {
		control := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
			// Not faulty: the controls switch the faults off.
			s.mux.Handle(strings.Replace(pattern, " ", " "+p+"api/", 1), s.authenticated(h))
		}
		control("GET controls", s.getControls)
		control("PUT controls", s.putControls)
		control("POST payments/{id}/capture_late", s.captureLateAPI)
	}
	s.mux.Handle(p+"api/", s.authenticated(func(w http.ResponseWriter, r *http.Request) error {
		return apiErr(http.StatusNotFound, "no_route", "no route %s %s", r.Method, r.URL.Path)
	}))
	s.mux.HandleFunc("GET "+p+"checkout/{id}", s.checkoutPage)
	s.mux.HandleFunc("POST "+p+"checkout/{id}", s.checkoutAction)
}

// authenticated lets through the requests that bear the secret key,
// compared in constant time, and writes h's error as JSON.
func (s *Service) authenticated(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	want := []byte("Bearer " + s.cfg.SecretKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="builtinpay"`)
			writeError(w, apiErr(http.StatusUnauthorized, "unauthorized", "missing or wrong secret key"))
			return
		}
		if err := h(w, r); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				s.log.ErrorContext(r.Context(), "builtin payments: api", "method", r.Method, "path", r.URL.Path, "err", err)
				ae = apiErr(http.StatusInternalServerError, "internal", "internal error")
			}
			writeError(w, ae)
		}
	})
}

// faulty answers as a provider in trouble while the controls say so.
func (s *Service) faulty(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		c := s.Controls()
		switch c.APIStatus {
		case http.StatusServiceUnavailable:
			return apiErr(http.StatusServiceUnavailable, "provider_unavailable", "the provider is down (control)")
		case http.StatusTooManyRequests:
			if c.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(c.RetryAfter.Seconds())), 10))
			}
			return apiErr(http.StatusTooManyRequests, "rate_limited", "too many requests (control)")
		}
		return h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, apiErrorBody{Error: *e})
}

// decode reads a JSON body of at most 64 KiB, refusing unknown fields.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiErr(http.StatusBadRequest, "invalid_json", "request body: %v", err)
	}
	return nil
}

// idempotencyKey is the request's Idempotency-Key, required.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		return "", apiErr(http.StatusBadRequest, "idempotency_key_required", "an Idempotency-Key header of 1 to 255 bytes is required")
	}
	return key, nil
}

func (s *Service) createPayment(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var body createBody
	if err := decode(r, &body); err != nil {
		return err
	}
	rec, err := s.validCreate(body)
	if err != nil {
		return err
	}
	body.ExpiresAt = rec.ExpiresAt
	canonical, _ := json.Marshal(body)
	sum := sha256.Sum256(canonical)
	rec.ID, rec.Key, rec.RequestHash = newID("pay_"), key, hex.EncodeToString(sum[:])
	rec.FormToken, rec.Created = newID(""), s.now().UTC()

	got, replayed, err := s.insertPayment(r.Context(), rec)
	if err != nil {
		return err
	}
	if got.RequestHash != rec.RequestHash {
		// The key answers one request only: a different body under it is
		// the caller's bug, never a second payment.
		return apiErr(http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if got, err = s.expireIfDue(r, got); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wire(got))
	return nil
}

// validCreate checks a create's body and returns the payment it asks for.
func (s *Service) validCreate(b createBody) (record, error) {
	bad := func(format string, args ...any) (record, error) {
		return record{}, apiErr(http.StatusUnprocessableEntity, "invalid_request", format, args...)
	}
	if b.Amount <= 0 {
		return bad("amount must be a positive number of minor units")
	}
	if !payment.ValidCurrency(b.Currency) {
		return bad("currency must be an ISO 4217 code: three upper-case letters")
	}
	order, err := strconv.ParseInt(b.Metadata.OrderID, 10, 64)
	if err != nil || order <= 0 {
		return bad("metadata.order_id must be a positive integer, as a string")
	}
	sale, err := strconv.ParseInt(b.Metadata.SaleID, 10, 64)
	if err != nil || sale < 0 {
		return bad("metadata.sale_id must be a non-negative integer, as a string")
	}
	if b.Metadata.UserID == "" || len(b.Metadata.UserID) > 255 {
		return bad("metadata.user_id must be 1 to 255 bytes")
	}
	if u, err := url.Parse(b.ReturnURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(b.ReturnURL) > 2048 {
		return bad("return_url must be an absolute http(s) URL")
	}
	if b.ExpiresAt.IsZero() {
		return bad("expires_at is required")
	}
	return record{
		OrderID: order, SaleID: sale, UserID: b.Metadata.UserID,
		Amount:    payment.Money{Minor: b.Amount, Currency: b.Currency},
		ReturnURL: b.ReturnURL,
		// Stored to the microsecond: the replay's hash must match.
		ExpiresAt: b.ExpiresAt.UTC().Truncate(time.Microsecond),
	}, nil
}

// load reads payment id, expiring it first if its window has passed.
func (s *Service) load(r *http.Request, id string) (record, error) {
	rec, err := getPayment(r.Context(), s.db, id)
	if errors.Is(err, errNoPayment) {
		return rec, apiErr(http.StatusNotFound, "payment_not_found", "no payment %q", id)
	}
	if err != nil {
		return rec, err
	}
	return s.expireIfDue(r, rec)
}

// expireIfDue cancels a pending payment whose window has passed, as a
// provider expires one by itself; its page can no longer pay it.
func (s *Service) expireIfDue(r *http.Request, rec record) (record, error) {
	if !rec.expired(s.now()) {
		return rec, nil
	}
	got, err := s.cancel(r.Context(), rec.ID, "expired")
	if err != nil || !got.LateCapture {
		return got, err
	}
	return getPayment(r.Context(), s.db, rec.ID) // captured after all
}

func (s *Service) getPayment(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wire(rec))
	return nil
}

// cancelPayment cancels a pending payment. Any other answers 200 with
// the payment as it stands, captured included: real providers report the
// state, and the caller decides what a capture means (design §4.10).
func (s *Service) cancelPayment(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	got, err := s.cancel(r.Context(), rec.ID, "requested")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wire(got))
	return nil
}

func (s *Service) refundPayment(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var body refundBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Reason) > 500 {
		return apiErr(http.StatusUnprocessableEntity, "invalid_request", "reason must be at most 500 bytes")
	}
	id := r.PathValue("id")
	if _, err := s.load(r, id); err != nil {
		return err
	}
	rf, _, err := s.refund(r.Context(), id, key, body.Reason)
	switch {
	case errors.Is(err, errRefundKeyReused):
		return apiErr(http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used for another payment's refund")
	case errors.Is(err, errAlreadyRefunded):
		return apiErr(http.StatusConflict, "payment_already_refunded", "payment %s was already refunded (under another Idempotency-Key)", id)
	case errors.Is(err, errNotCaptured):
		return apiErr(http.StatusConflict, "payment_not_captured", "payment %s is not captured: only a captured payment can be refunded", id)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, wireRefund(rf))
	return nil
}

// listCaptured lists the payments captured in [captured_from, captured_to),
// refunded since or not, oldest capture first, a page at a time: limit (at
// most 1000) and the previous page's next_after.
func (s *Service) listCaptured(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	from, err1 := time.Parse(time.RFC3339Nano, q.Get("captured_from"))
	to, err2 := time.Parse(time.RFC3339Nano, q.Get("captured_to"))
	if err1 != nil || err2 != nil {
		return apiErr(http.StatusBadRequest, "invalid_request", "captured_from and captured_to must be RFC 3339 times")
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return apiErr(http.StatusBadRequest, "invalid_request", "limit must be 1 to 1000")
		}
		limit = n
	}
	afterAt, afterID := micros(from)-1, ""
	if v := q.Get("after"); v != "" {
		at, id, ok := strings.Cut(v, ".")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return apiErr(http.StatusBadRequest, "invalid_request", "after must be a next_after of an earlier page")
		}
		afterAt, afterID = n, id
	}
	rows, err := s.db.QueryContext(r.Context(), `SELECT `+paymentColumns+` FROM builtinpay_payments
		WHERE captured_at >= $1 AND captured_at < $2 AND (captured_at > $3 OR (captured_at = $3 AND id > $4))
		ORDER BY captured_at, id LIMIT $5`, micros(from), micros(to), afterAt, afterID, limit+1)
	if err != nil {
		return err
	}
	defer rows.Close()
	list := apiList{Object: "list", Data: []apiPayment{}}
	for rows.Next() {
		rec, err := scanPayment(rows)
		if err != nil {
			return err
		}
		if len(list.Data) == limit {
			list.HasMore = true
			break
		}
		list.Data = append(list.Data, s.wire(rec))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if list.HasMore {
		last := list.Data[len(list.Data)-1]
		list.NextAfter = fmt.Sprintf("%d.%s", micros(*last.CapturedAt), last.ID)
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}
