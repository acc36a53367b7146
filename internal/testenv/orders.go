package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/store"
)

// OrderRow is an order row a test writes straight to the database, as an
// order's workflow would have.
type OrderRow struct {
	ID, SaleID int64
	UserID     string
	Status     domain.Status
	// AdmittedAt is the row's admitted_at; zero: the id's time.
	AdmittedAt time.Time
}

// WriteOrders writes rows in the order given, a few hundred per
// statement. A PAID row gets a paid_at.
func WriteOrders(t testing.TB, st *store.Store, rows []OrderRow) {
	t.Helper()
	const batch = 500
	for len(rows) > 0 {
		n := min(batch, len(rows))
		creates := make([]*ent.OrderCreate, n)
		for i, r := range rows[:n] {
			c := st.Client().Order.Create().SetID(r.ID).SetSaleID(r.SaleID).SetUserID(r.UserID).
				SetAmountCents(19900).SetStatus(order.Status(r.Status)).
				SetAdmittedAt(store.AdmittedAt(domain.OrderRef{OrderID: r.ID, AdmittedAt: r.AdmittedAt}))
			if r.Status == domain.StatusPaid {
				c.SetPaidAt(time.Now())
			}
			creates[i] = c
		}
		if err := st.Client().Order.CreateBulk(creates...).Exec(context.Background()); err != nil {
			t.Fatalf("write %d orders: %v", n, err)
		}
		rows = rows[n:]
	}
}
