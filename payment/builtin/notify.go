package builtin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/redact"
)

// SignatureHeader carries a notification's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the webhook
// secret>". The timestamp is signed with the body, so an old notification
// cannot be replayed with a fresh time.
const SignatureHeader = "Builtinpay-Signature"

// Sign returns the SignatureHeader value of body signed at t with secret.
// Tests of a notification endpoint build signed bodies with it.
func Sign(secret string, t time.Time, body []byte) string {
	return fmt.Sprintf("t=%d,v1=%s", t.Unix(), hex.EncodeToString(signature(secret, t.Unix(), body)))
}

func signature(secret string, unix int64, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(unix, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// claimBatch is how many notifications one round of the sender takes.
const claimBatch = 256

// sendTimeout cuts off one attempt; a claim outlasts it, so a slow
// receiver does not get the notification from two instances at once.
const (
	sendTimeout = 10 * time.Second
	claimLease  = 3 * sendTimeout
)

// outgoing is a claimed notification.
type outgoing struct {
	id, paymentID, body string
	attempts            int
	created             int64
}

// Run sends the outbox's notifications to the webhook URL until ctx ends,
// each until the receiver answers 2xx (at least once: a receiver must
// take repeats, which carry the same event id), retrying with backoff from
// RetryMin doubling to RetryMax. It also expires the pending payments whose
// window passed. Every instance over the same database may run one: a
// notification is claimed before it is sent, so two instances do not
// send it at once, and one claimed by an instance that died is taken over
// once the claim lapses. It returns nil when ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.cfg.WebhookURL == "" {
		return fmt.Errorf("builtin payments: no webhook URL to send notifications to")
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var swept time.Time
	for {
		if now := time.Now(); now.Sub(swept) >= s.cfg.Poll {
			swept = now
			if err := s.expireDue(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "builtin payments: expire payments", "err", err)
			}
		}
		wait := s.cfg.Poll
		more, next, err := s.sendDue(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.WarnContext(ctx, "builtin payments: send notifications", "err", redact.Error(err, s.cfg.WebhookURL))
		case more:
			wait = 0
		case !next.IsZero():
			wait = min(wait, max(0, time.Until(next)))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// expireDue cancels the pending payments whose window has passed, so
// their notification goes out though nobody looks at them.
func (s *Service) expireDue(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM builtinpay_payments
		WHERE state = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT 100`, micros(s.now()))
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := s.cancel(ctx, id, "expired"); err != nil {
			return err
		}
	}
	return nil
}

// sendDue claims the notifications due and sends them: those of one
// payment one after another in the order they happened (reversed by
// NotifyOutOfOrder), different payments' at once, up to SendConcurrency.
// It reports whether more may be due at once, and else when the next one
// is.
func (s *Service) sendDue(ctx context.Context) (more bool, next time.Time, err error) {
	c := s.Controls()
	if c.NotifyHold {
		return false, time.Time{}, nil // SetControls wakes the sender when the hold lifts
	}
	// A claim cut off by a stop might commit unread, and leave its
	// notifications to wait out the lease; it is short, so it finishes.
	batch, err := s.claim(context.WithoutCancel(ctx))
	if err != nil {
		return false, time.Time{}, err
	}
	more = len(batch) == claimBatch
	byPayment := map[string][]outgoing{}
	var order []string
	for _, o := range batch {
		if _, ok := byPayment[o.paymentID]; !ok {
			order = append(order, o.paymentID)
		}
		byPayment[o.paymentID] = append(byPayment[o.paymentID], o)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.cfg.SendConcurrency)
	for _, pid := range order {
		events := byPayment[pid]
		if c.NotifyOutOfOrder {
			slices.Reverse(events)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.sendInTurn(ctx, events, c.NotifyTwice)
		})
	}
	wg.Wait()
	var due *int64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM builtinpay_events WHERE delivered_at IS NULL`).Scan(&due); err != nil {
		return more, time.Time{}, err
	}
	if due != nil {
		next = fromMicros(*due)
	}
	return more, next, nil
}

// claim takes the due notifications for this instance: their next attempt
// moves past the time a send may take, so no other instance takes them
// meanwhile, and one that this instance dies sending is taken over then.
func (s *Service) claim(ctx context.Context) ([]outgoing, error) {
	now := time.Now()
	lease := now.Add(claimLease)
	rows, err := s.db.QueryContext(ctx, `UPDATE builtinpay_events SET next_attempt_at = $1
		WHERE id IN (SELECT id FROM builtinpay_events WHERE delivered_at IS NULL AND next_attempt_at <= $2
		             ORDER BY next_attempt_at, id LIMIT $3)
		  AND delivered_at IS NULL AND next_attempt_at <= $2
		RETURNING id, payment_id, body, attempts, created_at`, micros(lease), micros(now), claimBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var batch []outgoing
	for rows.Next() {
		var o outgoing
		if err := rows.Scan(&o.id, &o.paymentID, &o.body, &o.attempts, &o.created); err != nil {
			return nil, err
		}
		batch = append(batch, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(batch, func(a, b outgoing) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.id, b.id))
	})
	return batch, nil
}

// sendInTurn sends one payment's notifications in turn. After a failure
// the rest wait for the failed one's retry, so a receiver that comes back
// gets them in the order they were due.
func (s *Service) sendInTurn(ctx context.Context, events []outgoing, twice bool) {
	// The bookkeeping outlives a cancelled ctx, so a stop mid-send
	// leaves the outbox saying what was delivered.
	bg := context.WithoutCancel(ctx)
	for i, o := range events {
		err := s.send(ctx, o)
		if err == nil && twice {
			_ = s.send(ctx, o) // a repeat; the first was delivered
		}
		now := time.Now()
		if err == nil {
			if _, err := s.db.ExecContext(bg, `UPDATE builtinpay_events SET delivered_at = $1, attempts = attempts + 1, last_error = ''
				WHERE id = $2`, micros(now), o.id); err != nil {
				s.log.WarnContext(ctx, "builtin payments: record a delivery", "event_id", o.id, "err", err)
			}
			continue
		}
		retry := now.Add(s.backoff(o.attempts + 1))
		attempts := "attempts + 1"
		if ctx.Err() != nil {
			retry, attempts = now, "attempts" // stopped, not failed: due at once for whoever runs next
		} else {
			s.log.WarnContext(ctx, "builtin payments: notification not delivered", "event_id", o.id, "payment_id", o.paymentID,
				"attempt", o.attempts+1, "retry_at", retry, "err", err)
		}
		msg := err.Error()
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if _, err := s.db.ExecContext(bg, `UPDATE builtinpay_events SET next_attempt_at = $1, attempts = `+attempts+`, last_error = $2
			WHERE id = $3`, micros(retry), msg, o.id); err != nil {
			s.log.WarnContext(ctx, "builtin payments: record a failed delivery", "event_id", o.id, "err", err)
		}
		for _, rest := range events[i+1:] {
			_, _ = s.db.ExecContext(bg, `UPDATE builtinpay_events SET next_attempt_at = $1 WHERE id = $2`, micros(retry), rest.id)
		}
		return
	}
}

// backoff is the wait before attempt n+1: RetryMin doubled per attempt,
// capped at RetryMax, the upper half jittered so that a receiver coming
// back is not hit by every retry at once.
func (s *Service) backoff(attempt int) time.Duration {
	d := s.cfg.RetryMax
	if attempt < 32 {
		d = min(s.cfg.RetryMax, s.cfg.RetryMin<<max(0, attempt-1))
	}
	return d/2 + rand.N(d/2+1)
}

// send POSTs one notification, signed now; err unless the receiver
// answered 2xx. Errors quote the webhook URL, redacted.
func (s *Service) send(ctx context.Context, o outgoing) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	body := []byte(o.body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return redact.Error(err, s.cfg.WebhookURL)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "seckill-builtinpay/1")
	req.Header.Set(SignatureHeader, Sign(s.cfg.WebhookSecret, time.Now(), body))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return redact.Error(err, s.cfg.WebhookURL)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
