package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/lib/pq"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/order"
)

// seckill_place_order_v1 (placeFunc, placeParams, placeBody) is PlaceOrder's
// transaction as one Postgres function, so that placing an order is one
// statement where the transaction through ent is six (BEGIN, the DEDUCT
// row, the sale's update, the tombstone check, the order row, COMMIT),
// each a round trip and a parse. The sale row's lock, which every placing
// of a sale queues for, is then held for the function's remaining
// statements and the commit, with no round trip to the worker in between
// (docs/design.md §4.2).
//
// It does what placeTx does, in the same order (the sale's lock before
// the order row, as EndOrder takes them), and answers only the case of
// every placed order: the unit taken and the row written (its insert
// absorbs a conflict on the id, as placeTx's does). Anything else (no
// unit, the sale cancelled or over, a tombstone, the DEDUCT row of an
// earlier attempt that committed, the buyer's other live order) raises,
// which rolls the whole statement back, and PlaceOrder then runs placeTx,
// which finds out which and answers as it always has.
//
// The function is VOLATILE (plpgsql's default): each of its statements
// takes a new snapshot under READ COMMITTED, so the tombstone check, made
// after the sale's lock is taken, sees a RESTORE committed while it
// waited for that lock, as placeTx's separate SELECT does.
//
// Its name carries its version: a change of its body or its parameters is
// a new name (_v2), so that binaries of two versions migrating side by
// side each keep the function they call, and no overload is left behind.
const (
	placeFunc   = "seckill_place_order_v1"
	placeParams = `(
	p_order bigint, p_sale bigint, p_user varchar, p_amount bigint, p_key varchar,
	p_admitted timestamptz, p_not_before timestamptz, p_now timestamptz
)`
	placeBody = `
BEGIN
	INSERT INTO stock_movements (order_id, sale_id, kind, delta, created_at)
		VALUES (p_order, p_sale, 'DEDUCT', -1, p_now);
	UPDATE sales SET stock = stock - 1
		WHERE id = p_sale AND stock > 0 AND cancelled_at IS NULL AND ends_at > p_not_before;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'seckill_place_order_v1: order % of sale %: no unit to take', p_order, p_sale;
	END IF;
	IF EXISTS (SELECT 1 FROM stock_movements WHERE order_id = p_order AND kind = 'RESTORE') THEN
		RAISE EXCEPTION 'seckill_place_order_v1: order % was compensated', p_order;
	END IF;
	INSERT INTO orders (id, sale_id, user_id, quantity, amount_cents, status, reason, idempotency_key,
			created_at, updated_at, admitted_at, payment_provider, payment_id, refund_id, refund_reason)
		VALUES (p_order, p_sale, p_user, 1, p_amount, 'AWAITING_PAYMENT', '', p_key,
			p_now, p_now, p_admitted, '', '', '', '')
		ON CONFLICT (id) DO NOTHING;
END
`
)

// migratePlaceFunction creates the function, or replaces one whose body
// differs (Postgres only). Processes migrating at once take turns (an
// advisory lock): two creations of one function at once fail
// ("duplicate key value", "tuple concurrently updated"). A body already in
// place is left alone, so that a migration replans nobody's calls.
func (s *Store) migratePlaceFunction(ctx context.Context) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, placeLock); err != nil {
		return err
	}
	var body string
	err = tx.QueryRowContext(ctx, `SELECT prosrc FROM pg_proc
		WHERE proname = $1
		AND pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`, placeFunc).Scan(&body)
	switch {
	case err == nil && body == placeBody:
		return nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE OR REPLACE FUNCTION `+placeFunc+placeParams+
		` RETURNS void LANGUAGE plpgsql AS $$`+placeBody+`$$`); err != nil {
		return err
	}
	return tx.Commit()
}

// placeLock is the advisory lock key of migratePlaceFunction.
const placeLock = 0x5ec411_91ace

// placeOffFor is how long PlaceOrder goes without the function once the
// database refuses the call itself (an error of class 42: no such
// function, for a worker upgraded before `seckill migrate` ran; no right
// to execute it; a column it names gone): each order then costs one
// failed call less, and the log says why once per pause.
const placeOffFor = time.Minute

// placeInOne places the order with the function and reports whether it
// did; when it did not, placeTx must run. Its refusals (P0001, raised;
// 23505, the DEDUCT row or the buyer's other live order; 23503, no such
// sale) and transient errors (which placeTx then meets too) are not
// logged: placeTx answers them.
//
// The row's created_at and the ledger row's are the time of the call, not
// of the insert after the sale's lock (as through ent): within the local
// activity either way.
func (s *Store) placeInOne(ctx context.Context, ref domain.OrderRef) (ok bool) {
	if s.dialect != dialectPostgres || time.Now().UnixNano() < s.placeOffUntil.Load() || !placeable(ref) {
		return false
	}
	admitted := AdmittedAt(ref)
	_, err := s.sql.ExecContext(ctx, `SELECT `+placeFunc+`($1, $2, $3, $4, $5, $6, $7, $8)`,
		ref.OrderID, ref.SaleID, ref.UserID, ref.AmountCents, ref.IdempotencyKey,
		admitted, admitted.Add(-AdmissionSkew), time.Now())
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code.Class() == "42" {
		// Of the placings refused at once, the one that starts the pause
		// says why.
		if off := s.placeOffUntil.Load(); time.Now().UnixNano() >= off &&
			s.placeOffUntil.CompareAndSwap(off, time.Now().Add(placeOffFor).UnixNano()) {
			slog.WarnContext(ctx, "placing orders through the transaction for a while: the database refused "+placeFunc+
				" (has `seckill migrate` run, and may this role execute it?)",
				"code", string(pqErr.Code), "err", pqErr.Message, "for", placeOffFor)
		}
	}
	return err == nil
}

// placeable says whether ref passes the checks ent makes before it writes
// an order row; an order that does not is left to placeTx, which refuses
// it as it always has.
func placeable(ref domain.OrderRef) bool {
	return order.IDValidator(ref.OrderID) == nil && order.UserIDValidator(ref.UserID) == nil &&
		order.AmountCentsValidator(ref.AmountCents) == nil && order.IdempotencyKeyValidator(ref.IdempotencyKey) == nil
}
