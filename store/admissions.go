package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/admission"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/orderid"
)

// Admission is a purchase Redis admitted, as the reconciler remembers it
// (docs/design.md §3.14).
type Admission struct {
	OrderID int64
	SaleID  int64
	UserID  string
	// Replicated: a replica confirmed it held the admission when it was
	// remembered (--admit-ack=replica).
	Replicated bool
	SeenAt     time.Time
	// LostAt is when a reconciler found it lost; zero if none has.
	LostAt time.Time
	// RecoveredAt is when a reconciler admitted it again; zero if none has.
	RecoveredAt time.Time
}

// rememberChunk is how many admissions one insert of RememberAdmissions
// writes.
const rememberChunk = 1000

// RememberAdmissions records buyers a pass saw holding a unit of saleID
// without an order row. An admission remembered already is left as it is,
// so passes of several reconcilers may record the same buyers.
func (s *Store) RememberAdmissions(ctx context.Context, saleID int64, buyers []Buyer, replicated bool) error {
	// A wave can leave tens of thousands admitted ahead of their sagas; one
	// statement holds at most 65,535 parameters in Postgres (and fewer in
	// SQLite), so they go in chunks.
	for chunk := range slices.Chunk(buyers, rememberChunk) {
		creates := make([]*ent.AdmissionCreate, len(chunk))
		for i, b := range chunk {
			creates[i] = s.db.Admission.Create().SetID(b.OrderID).SetSaleID(saleID).SetUserID(b.UserID).SetReplicated(replicated)
		}
		err := s.db.Admission.CreateBulk(creates...).OnConflictColumns(admission.FieldID).DoNothing().Exec(ctx)
		if err != nil {
			return fmt.Errorf("remember admissions of sale %d: %w", saleID, err)
		}
	}
	return nil
}

// RememberFenced records, as admissions no replica was seen to hold, the
// orders of intents a relay read from a primary the Sentinels no longer
// confirm (relay.Options.Fenced): their buyers were told 202 or
// UNCONFIRMED, and the old primary's demotion discards them, so the
// reconciler and the audit must know them (docs/design.md §3.14).
func (s *Store) RememberFenced(ctx context.Context, orders []domain.OrderRef) error {
	bySale := map[int64][]Buyer{}
	for _, o := range orders {
		bySale[o.SaleID] = append(bySale[o.SaleID], Buyer{UserID: o.UserID, OrderID: o.OrderID})
	}
	for sale, buyers := range bySale {
		if err := s.RememberAdmissions(ctx, sale, buyers, false); err != nil {
			return err
		}
	}
	return nil
}

// UnplacedAdmissions lists the remembered admissions of saleID that have
// no order row, oldest first: those still on their way to the saga, and
// those lost.
func (s *Store) UnplacedAdmissions(ctx context.Context, saleID int64) ([]Admission, error) {
	rows, err := s.db.Admission.Query().Where(admission.SaleID(saleID), unplaced).
		Order(ent.Asc(admission.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("unplaced admissions of sale %d: %w", saleID, err)
	}
	return admissions(rows), nil
}

// UnplacedAdmissionsSince lists the remembered admissions of every sale
// admitted since since (the time in their order ids: a range of the
// primary key) that have no order row and have not been found lost.
func (s *Store) UnplacedAdmissionsSince(ctx context.Context, since time.Time) ([]Admission, error) {
	rows, err := s.db.Admission.Query().
		Where(admission.IDGTE(orderid.FirstAt(since)), admission.LostAtIsNil(), unplaced).
		Order(ent.Asc(admission.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("unplaced admissions since %s: %w", since, err)
	}
	return admissions(rows), nil
}

// unplaced keeps the admissions without an order row.
func unplaced(sel *entsql.Selector) {
	orders := entsql.Table(order.Table)
	sel.Where(entsql.NotExists(entsql.Select(orders.C(order.FieldID)).From(orders).
		Where(entsql.ColumnsEQ(orders.C(order.FieldID), sel.C(admission.FieldID)))))
}

func admissions(rows []*ent.Admission) []Admission {
	out := make([]Admission, len(rows))
	for i, r := range rows {
		out[i] = Admission{OrderID: r.ID, SaleID: r.SaleID, UserID: r.UserID, Replicated: r.Replicated, SeenAt: r.SeenAt}
		if r.LostAt != nil {
			out[i].LostAt = *r.LostAt
		}
		if r.RecoveredAt != nil {
			out[i].RecoveredAt = *r.RecoveredAt
		}
	}
	return out
}

// MarkAdmissionLost records that the admission was found lost. It reports
// false when another reconciler marked it first, so each loss is counted
// once.
func (s *Store) MarkAdmissionLost(ctx context.Context, orderID int64) (bool, error) {
	n, err := s.db.Admission.Update().Where(admission.ID(orderID), admission.LostAtIsNil()).
		SetLostAt(time.Now()).Save(ctx)
	if err != nil {
		return false, fmt.Errorf("mark admission %d lost: %w", orderID, err)
	}
	return n == 1, nil
}

// MarkAdmissionRecovered records that a lost admission was admitted again
// under its order id.
func (s *Store) MarkAdmissionRecovered(ctx context.Context, orderID int64) error {
	if err := s.db.Admission.UpdateOneID(orderID).SetRecoveredAt(time.Now()).Exec(ctx); err != nil {
		return fmt.Errorf("mark admission %d recovered: %w", orderID, err)
	}
	return nil
}
