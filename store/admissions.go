package store

import (
	"context"
	"fmt"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/admission"
	"github.com/seckill/seckill/ent/order"
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
}

// RememberAdmissions records buyers a pass saw holding a unit of saleID
// without an order row. An admission remembered already is left as it is,
// so passes of several reconcilers may record the same buyers.
func (s *Store) RememberAdmissions(ctx context.Context, saleID int64, buyers []Buyer, replicated bool) error {
	if len(buyers) == 0 {
		return nil
	}
	creates := make([]*ent.AdmissionCreate, len(buyers))
	for i, b := range buyers {
		creates[i] = s.db.Admission.Create().SetID(b.OrderID).SetSaleID(saleID).SetUserID(b.UserID).SetReplicated(replicated)
	}
	err := s.db.Admission.CreateBulk(creates...).OnConflictColumns(admission.FieldID).DoNothing().Exec(ctx)
	if err != nil {
		return fmt.Errorf("remember admissions of sale %d: %w", saleID, err)
	}
	return nil
}

// UnplacedAdmissions lists the remembered admissions of saleID that have
// no order row, oldest first: those still on their way to the saga, and
// those lost.
func (s *Store) UnplacedAdmissions(ctx context.Context, saleID int64) ([]Admission, error) {
	rows, err := s.db.Admission.Query().
		Where(admission.SaleID(saleID), func(sel *entsql.Selector) {
			orders := entsql.Table(order.Table)
			sel.Where(entsql.NotExists(entsql.Select(orders.C(order.FieldID)).From(orders).
				Where(entsql.ColumnsEQ(orders.C(order.FieldID), sel.C(admission.FieldID)))))
		}).
		Order(ent.Asc(admission.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("unplaced admissions of sale %d: %w", saleID, err)
	}
	out := make([]Admission, len(rows))
	for i, r := range rows {
		out[i] = Admission{OrderID: r.ID, SaleID: r.SaleID, UserID: r.UserID, Replicated: r.Replicated, SeenAt: r.SeenAt}
		if r.LostAt != nil {
			out[i].LostAt = *r.LostAt
		}
	}
	return out, nil
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
