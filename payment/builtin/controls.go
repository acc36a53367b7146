package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill/payment"
)

// Controls make the service misbehave the ways real providers do, for the
// tests, the chaos and interleaving tests and the demo. They exist only
// when Config.Controls is set, and are reached three ways: the Go methods
// SetControls, Controls and CaptureLate; the API (GET and PUT
// <prefix>api/controls with this JSON, POST
// <prefix>api/payments/{id}/capture_late), for tests that run seckill as
// a process; and the hosted page's "Pay late" button, which captures a
// pending payment right after it is cancelled (by the shop, or by its
// window's end; the cancel is answered "canceled") and a cancelled or
// expired one at once.
type Controls struct {
	// NotifyDelay holds each new notification back this long before its
	// first attempt (slow notifications).
	NotifyDelay time.Duration `json:"notify_delay"`
	// NotifyHold holds every notification until cleared; then they go
	// out together, which NotifyOutOfOrder reverses.
	NotifyHold bool `json:"notify_hold"`
	// NotifyTwice delivers every notification twice: the same id and
	// body, signed anew.
	NotifyTwice bool `json:"notify_twice"`
	// NotifyOutOfOrder sends the notifications due together newest
	// first (with NotifyHold or NotifyDelay, a payment's refund before its
	// capture).
	NotifyOutOfOrder bool `json:"notify_out_of_order"`
	// APIStatus makes every API call but the controls' answer 503
	// (provider down) or 429 (rate limited, with RetryAfter as
	// Retry-After, in whole seconds, when set); 0 answers normally.
	APIStatus  int           `json:"api_status"`
	RetryAfter time.Duration `json:"retry_after"`
}

// ErrNoControls: the controls are off (Config.Controls).
var ErrNoControls = errors.New("builtin payments: controls are off")

// Controls returns the controls in force (all off when disabled).
func (s *Service) Controls() Controls {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controls
}

// SetControls replaces the controls in force.
func (s *Service) SetControls(c Controls) error {
	if !s.cfg.Controls {
		return ErrNoControls
	}
	if c.APIStatus != 0 && c.APIStatus != http.StatusServiceUnavailable && c.APIStatus != http.StatusTooManyRequests {
		return fmt.Errorf("builtin payments: api status %d: only 0, 503 and 429", c.APIStatus)
	}
	if c.NotifyDelay < 0 || c.RetryAfter < 0 {
		return errors.New("builtin payments: negative duration in controls")
	}
	s.mu.Lock()
	s.controls = c
	s.mu.Unlock()
	s.notifyNow() // a hold lifted: send what it held
	return nil
}

// CaptureLate captures payment id even though it was cancelled or its
// window passed: the race a real provider has, where a buyer's payment and
// the shop's cancel cross and the capture wins after the cancel was
// answered. A pending payment is captured as by Pay. It returns the
// payment as it stands; one declined, captured or refunded is left so.
func (s *Service) CaptureLate(ctx context.Context, id string) (payment.Payment, error) {
	if !s.cfg.Controls {
		return payment.Payment{}, ErrNoControls
	}
	rec, _, err := s.transition(ctx, id, move{
		to: payment.Captured, from: []payment.State{payment.Pending, payment.Canceled},
	})
	if errors.Is(err, errNoPayment) {
		return payment.Payment{}, fmt.Errorf("builtin payments: %s: %w", id, payment.ErrNotFound)
	}
	if err != nil {
		return payment.Payment{}, err
	}
	return toPayment(s.wire(rec))
}

func (s *Service) getControls(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.Controls())
	return nil
}

func (s *Service) putControls(w http.ResponseWriter, r *http.Request) error {
	var c Controls
	if err := decode(r, &c); err != nil {
		return err
	}
	if err := s.SetControls(c); err != nil {
		return apiErr(http.StatusUnprocessableEntity, "invalid_request", "%v", err)
	}
	writeJSON(w, http.StatusOK, s.Controls())
	return nil
}

func (s *Service) captureLateAPI(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := getPayment(r.Context(), s.db, id); errors.Is(err, errNoPayment) {
		return apiErr(http.StatusNotFound, "payment_not_found", "no payment %q", id)
	}
	p, err := s.CaptureLate(r.Context(), id)
	if err != nil {
		return err
	}
	rec, err := getPayment(r.Context(), s.db, p.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wire(rec))
	return nil
}

// UnmarshalJSON takes the durations as Go writes them ("1.5s") as well as
// in nanoseconds, so a shell script can PUT the controls.
func (c *Controls) UnmarshalJSON(b []byte) error {
	type plain Controls
	var aux struct {
		plain
		NotifyDelay any `json:"notify_delay"`
		RetryAfter  any `json:"retry_after"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = Controls(aux.plain)
	var err error
	if c.NotifyDelay, err = duration(aux.NotifyDelay); err != nil {
		return fmt.Errorf("notify_delay: %w", err)
	}
	if c.RetryAfter, err = duration(aux.RetryAfter); err != nil {
		return fmt.Errorf("retry_after: %w", err)
	}
	return nil
}

func duration(v any) (time.Duration, error) {
	switch v := v.(type) {
	case nil:
		return 0, nil
	case float64:
		return time.Duration(v), nil
	case string:
		return time.ParseDuration(v)
	}
	return 0, fmt.Errorf("want a duration such as \"1.5s\" or nanoseconds, got %v", v)
}
