package builtin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/payment"
)

// The service's tables. Times are Unix microseconds in BIGINT columns and
// flags are 0/1 integers, so one set of statements (with $n placeholders)
// runs on Postgres and on SQLite alike.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS builtinpay_payments (
		id              TEXT PRIMARY KEY,
		idempotency_key TEXT NOT NULL UNIQUE,
		request_hash    TEXT NOT NULL,
		order_id        BIGINT NOT NULL,
		sale_id         BIGINT NOT NULL,
		user_id         TEXT NOT NULL,
		amount_minor    BIGINT NOT NULL,
		currency        TEXT NOT NULL,
		captured_minor  BIGINT NOT NULL DEFAULT 0,
		state           TEXT NOT NULL,
		cancel_reason   TEXT NOT NULL DEFAULT '',
		return_url      TEXT NOT NULL,
		expires_at      BIGINT NOT NULL,
		form_token      TEXT NOT NULL,
		late_capture    INTEGER NOT NULL DEFAULT 0,
		created_at      BIGINT NOT NULL,
		updated_at      BIGINT NOT NULL,
		captured_at     BIGINT
	)`,
	`CREATE INDEX IF NOT EXISTS builtinpay_payments_captured ON builtinpay_payments (captured_at, id)`,
	`CREATE INDEX IF NOT EXISTS builtinpay_payments_pending ON builtinpay_payments (expires_at) WHERE state = 'pending'`,
	// A refund is whole, so a payment has at most one.
	`CREATE TABLE IF NOT EXISTS builtinpay_refunds (
		id              TEXT PRIMARY KEY,
		payment_id      TEXT NOT NULL UNIQUE REFERENCES builtinpay_payments (id),
		idempotency_key TEXT NOT NULL UNIQUE,
		amount_minor    BIGINT NOT NULL,
		currency        TEXT NOT NULL,
		reason          TEXT NOT NULL,
		state           TEXT NOT NULL,
		created_at      BIGINT NOT NULL
	)`,
	// The outbox: one row per notification, written in the transaction of
	// the change it tells of, sent by Run until the receiver answers 2xx.
	// body is frozen at the change, so a repeat is the same event.
	`CREATE TABLE IF NOT EXISTS builtinpay_events (
		id              TEXT PRIMARY KEY,
		payment_id      TEXT NOT NULL REFERENCES builtinpay_payments (id),
		type            TEXT NOT NULL,
		body            TEXT NOT NULL,
		created_at      BIGINT NOT NULL,
		next_attempt_at BIGINT NOT NULL,
		attempts        INTEGER NOT NULL DEFAULT 0,
		delivered_at    BIGINT,
		last_error      TEXT NOT NULL DEFAULT ''
	)`,
	`CREATE INDEX IF NOT EXISTS builtinpay_events_due ON builtinpay_events (next_attempt_at) WHERE delivered_at IS NULL`,
}

// Migrate creates the service's tables and indexes if they are missing.
// It runs in one transaction, retried: Postgres may refuse one of two
// instances creating the same table at the same instant.
func (s *Service) Migrate(ctx context.Context) error { return Migrate(ctx, s.db) }

// Migrate is Service.Migrate on db, for `seckill migrate`, which runs no
// service.
func Migrate(ctx context.Context, db *sql.DB) error {
	var err error
	for range 3 {
		if err = migrate(ctx, db); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("builtin payments: migrate: %w", err)
}

func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// record is a payment's row.
type record struct {
	ID           string
	Key          string
	RequestHash  string
	OrderID      int64
	SaleID       int64
	UserID       string
	Amount       payment.Money
	Captured     int64
	State        payment.State
	CancelReason string
	ReturnURL    string
	ExpiresAt    time.Time
	FormToken    string
	LateCapture  bool
	Created      time.Time
	Updated      time.Time
	CapturedAt   *time.Time
}

// expired reports whether a pending payment's window has passed.
func (r record) expired(now time.Time) bool {
	return r.State == payment.Pending && !now.Before(r.ExpiresAt)
}

const paymentColumns = `id, idempotency_key, request_hash, order_id, sale_id, user_id, amount_minor, currency,
	captured_minor, state, cancel_reason, return_url, expires_at, form_token, late_capture, created_at, updated_at, captured_at`

type scanner interface{ Scan(dest ...any) error }

func scanPayment(row scanner) (record, error) {
	var (
		r                         record
		expires, created, updated int64
		late                      int64
		capturedAt                sql.NullInt64
		state                     string
	)
	err := row.Scan(&r.ID, &r.Key, &r.RequestHash, &r.OrderID, &r.SaleID, &r.UserID, &r.Amount.Minor, &r.Amount.Currency,
		&r.Captured, &state, &r.CancelReason, &r.ReturnURL, &expires, &r.FormToken, &late, &created, &updated, &capturedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, errNoPayment
	}
	if err != nil {
		return r, err
	}
	r.State = payment.State(state)
	r.ExpiresAt, r.Created, r.Updated = fromMicros(expires), fromMicros(created), fromMicros(updated)
	r.LateCapture = late != 0
	if capturedAt.Valid {
		t := fromMicros(capturedAt.Int64)
		r.CapturedAt = &t
	}
	return r, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getPayment(ctx context.Context, q querier, id string) (record, error) {
	return scanPayment(q.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM builtinpay_payments WHERE id = $1`, id))
}

func micros(t time.Time) int64      { return t.UnixMicro() }
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// errNoPayment: no payment with the id asked for.
var errNoPayment = errors.New("no such payment")

// insertPayment writes a new payment unless its idempotency key is taken,
// and returns the payment the key names: the new one, or the earlier one
// (replayed).
func (s *Service) insertPayment(ctx context.Context, r record) (got record, replayed bool, err error) {
	_, err = s.db.ExecContext(ctx, `INSERT INTO builtinpay_payments (`+paymentColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
		ON CONFLICT (idempotency_key) DO NOTHING`,
		r.ID, r.Key, r.RequestHash, r.OrderID, r.SaleID, r.UserID, r.Amount.Minor, r.Amount.Currency,
		int64(0), string(payment.Pending), "", r.ReturnURL, micros(r.ExpiresAt), r.FormToken, 0,
		micros(r.Created), micros(r.Created), nil)
	if err != nil {
		return record{}, false, err
	}
	got, err = scanPayment(s.db.QueryRowContext(ctx,
		`SELECT `+paymentColumns+` FROM builtinpay_payments WHERE idempotency_key = $1`, r.Key))
	if err != nil {
		return record{}, false, err
	}
	return got, got.ID != r.ID, nil
}

// move is one state change of a payment.
type move struct {
	to     payment.State
	from   []payment.State
	reason string // a cancellation's: "requested", "expired"
	// onlyExpired limits a cancel to a payment whose window has passed.
	onlyExpired bool
}

// transition applies m to payment id if it is in one of m.from, and
// writes the change's notification to the outbox in the same transaction,
// so no change goes untold and no event tells of a change that was rolled
// back. It returns the payment as it stands, and whether it changed.
func (s *Service) transition(ctx context.Context, id string, m move) (record, bool, error) {
	now := s.now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return record{}, false, err
	}
	defer tx.Rollback()

	set := `state = $1, updated_at = $2, cancel_reason = $3`
	if m.to == payment.Captured {
		set += `, captured_minor = amount_minor, captured_at = $2`
	}
	args := []any{string(m.to), micros(now), m.reason, id}
	where := `id = $4 AND state IN (` + placeholders(len(args)+1, len(m.from)) + `)`
	for _, st := range m.from {
		args = append(args, string(st))
	}
	if m.onlyExpired {
		args = append(args, micros(now))
		where += fmt.Sprintf(` AND expires_at <= $%d`, len(args))
	}
	res, err := tx.ExecContext(ctx, `UPDATE builtinpay_payments SET `+set+` WHERE `+where, args...)
	if err != nil {
		return record{}, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return record{}, false, err
	}
	rec, err := getPayment(ctx, tx, id)
	if err != nil || n == 0 {
		return rec, false, err
	}
	if err := s.insertEvent(ctx, tx, rec, nil, now); err != nil {
		return record{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return record{}, false, err
	}
	s.notifyNow()
	return rec, true, nil
}

// cancel cancels payment id if it is pending: at the shop's request
// (reason "requested"), or because its window passed ("expired", only
// then). If the buyer pressed "Pay late" (controls), a capture lands right
// after the cancel, as when a provider's cancel and a buyer's payment
// cross; the record returned is the payment as the cancel left it, which
// is what the cancel's caller is answered.
func (s *Service) cancel(ctx context.Context, id, reason string) (record, error) {
	got, changed, err := s.transition(ctx, id, move{
		to: payment.Canceled, from: []payment.State{payment.Pending}, reason: reason, onlyExpired: reason == "expired",
	})
	if err != nil || !changed || !got.LateCapture {
		return got, err
	}
	_, _, err = s.transition(ctx, id, move{to: payment.Captured, from: []payment.State{payment.Canceled}})
	return got, err
}

// placeholders is "$first, $first+1, ..." n of them.
func placeholders(first, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(first+i)
	}
	return strings.Join(p, ", ")
}

// refundRecord is a refund's row.
type refundRecord struct {
	ID        string
	PaymentID string
	Key       string
	Amount    payment.Money
	Reason    string
	State     payment.RefundState
	Created   time.Time
}

const refundColumns = `id, payment_id, idempotency_key, amount_minor, currency, reason, state, created_at`

func scanRefund(row scanner) (refundRecord, error) {
	var (
		r       refundRecord
		state   string
		created int64
	)
	err := row.Scan(&r.ID, &r.PaymentID, &r.Key, &r.Amount.Minor, &r.Amount.Currency, &r.Reason, &state, &created)
	if err != nil {
		return r, err
	}
	r.State, r.Created = payment.RefundState(state), fromMicros(created)
	return r, nil
}

// Refund outcomes other than a refund.
var (
	errNotCaptured     = errors.New("payment not captured")
	errAlreadyRefunded = errors.New("payment already refunded")
	errRefundKeyReused = errors.New("idempotency key used for another payment's refund")
)

// refund refunds payment id whole, idempotent by key: the refund the key
// already names is answered as it is; a payment refunded under another
// key is errAlreadyRefunded.
func (s *Service) refund(ctx context.Context, id, key, reason string) (refundRecord, record, error) {
	byKey := func(q querier) (refundRecord, record, bool, error) {
		rf, err := scanRefund(q.QueryRowContext(ctx, `SELECT `+refundColumns+` FROM builtinpay_refunds WHERE idempotency_key = $1`, key))
		if errors.Is(err, sql.ErrNoRows) {
			return rf, record{}, false, nil
		}
		if err != nil {
			return rf, record{}, false, err
		}
		if rf.PaymentID != id {
			return rf, record{}, true, errRefundKeyReused
		}
		p, err := getPayment(ctx, q, id)
		return rf, p, true, err
	}
	if rf, p, ok, err := byKey(s.db); ok || err != nil {
		return rf, p, err
	}

	now := s.now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return refundRecord{}, record{}, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE builtinpay_payments SET state = $1, updated_at = $2 WHERE id = $3 AND state = $4`,
		string(payment.Refunded), micros(now), id, string(payment.Captured))
	if err != nil {
		return refundRecord{}, record{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return refundRecord{}, record{}, err
		}
		// Not captured now: never was, or refunded meanwhile, maybe by a
		// concurrent call with this same key (committed: the UPDATE
		// waited for it).
		_ = tx.Rollback()
		if rf, p, ok, err := byKey(s.db); ok || err != nil {
			return rf, p, err
		}
		p, err := getPayment(ctx, s.db, id)
		switch {
		case err != nil:
			return refundRecord{}, p, err
		case p.State == payment.Refunded:
			return refundRecord{}, p, errAlreadyRefunded
		default:
			return refundRecord{}, p, errNotCaptured
		}
	}
	p, err := getPayment(ctx, tx, id)
	if err != nil {
		return refundRecord{}, record{}, err
	}
	// Refunds succeed at once here; a real provider's may stay pending.
	rf := refundRecord{
		ID: newID("re_"), PaymentID: id, Key: key, Amount: payment.Money{Minor: p.Captured, Currency: p.Amount.Currency},
		Reason: reason, State: payment.RefundSucceeded, Created: now,
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO builtinpay_refunds (`+refundColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		rf.ID, rf.PaymentID, rf.Key, rf.Amount.Minor, rf.Amount.Currency, rf.Reason, string(rf.State), micros(rf.Created)); err != nil {
		return refundRecord{}, record{}, err
	}
	if err := s.insertEvent(ctx, tx, p, &rf, now); err != nil {
		return refundRecord{}, record{}, err
	}
	if err := tx.Commit(); err != nil {
		return refundRecord{}, record{}, err
	}
	s.notifyNow()
	return rf, p, nil
}

// insertEvent writes the notification of p's change (and of refund rf)
// to the outbox, due at once unless the controls delay it.
func (s *Service) insertEvent(ctx context.Context, tx *sql.Tx, p record, rf *refundRecord, now time.Time) error {
	ev := apiEvent{Object: "event", ID: newID("evt_"), Created: now, Data: eventData{Payment: s.wire(p)}}
	switch p.State {
	case payment.Captured:
		ev.Type = "payment.captured"
	case payment.Declined:
		ev.Type = "payment.declined"
	case payment.Canceled:
		ev.Type = "payment.canceled"
	case payment.Refunded:
		ev.Type = "refund.succeeded"
	default:
		return fmt.Errorf("no event for a payment %s", p.State)
	}
	if rf != nil {
		w := wireRefund(*rf)
		ev.Data.Refund = &w
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// Due by the wall clock, which the sender runs by, whatever clock
	// the payments' times come from.
	due := time.Now().Add(s.Controls().NotifyDelay)
	_, err = tx.ExecContext(ctx, `INSERT INTO builtinpay_events (id, payment_id, type, body, created_at, next_attempt_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, ev.ID, p.ID, ev.Type, string(body), micros(now), micros(due))
	return err
}
