// Package audit checks the invariants of docs/design.md §2 for a sale against
// Postgres, Redis and Temporal. Tests, `seckill bench`, `seckill audit` and
// the chaos suite all end with it.
package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/ent/stockmovement"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Sources are where the audit looks. Temporal may be nil: the
// workflow checks are then skipped and OpenWorkflows is -1.
type Sources struct {
	Store    *store.Store
	Stock    *stock.Stock
	Temporal client.Client
}

// Expect says which state the caller believes the sale is in; the
// invariants that hold only in that state are checked too.
type Expect struct {
	// Settled: no order is on its way (no intent waiting, no workflow
	// between admission and AWAITING_PAYMENT or inside its compensation).
	// Then DB stock + live orders = total, Redis remaining = DB stock and
	// Redis buyers = the users holding live orders.
	Settled bool
	// Quiescent: Settled, and no order workflow of the sale is running.
	Quiescent bool
}

// Report is what the audit found for one sale.
type Report struct {
	SaleID         int64                 `json:"sale_id"`
	TotalStock     int                   `json:"total_stock"`
	DBStock        int                   `json:"db_stock"`
	RedisRemaining int                   `json:"redis_remaining"`
	ByStatus       map[domain.Status]int `json:"orders_by_status"`
	LiveOrders     int                   `json:"live_orders"`
	Oversold       int                   `json:"oversold"`
	Deducted       int                   `json:"ledger_deducted"`
	Restored       int                   `json:"ledger_restored"`
	RedisBuyers    int                   `json:"redis_buyers"`
	Backlog        int64                 `json:"relay_backlog"`
	Line           int64                 `json:"line"`
	OpenWorkflows  int64                 `json:"open_workflows"`
	// Stranded counts the orders whose workflow closed without ending
	// them (an operator's Terminate): the reconciler ends them
	// (docs/design.md §4.8). Checked with Temporal when Settled; -1 if not.
	Stranded int `json:"stranded"`
	// Lost are the accepted purchases lost (invariant 4): admissions the
	// reconciler remembered (docs/design.md §3.14) that Redis no longer
	// holds, with no order row and no workflow, in a settled sale or older
	// than reconcile.DefaultLostAfter (or found lost by a reconciler).
	Lost []LostPurchase `json:"lost_purchases,omitempty"`
	// Retired: the sale has ended and its keys have left Redis; only the
	// database's invariants are checked.
	Retired    bool     `json:"retired,omitempty"`
	Violations []string `json:"violations"`
}

// LostPurchase is an accepted purchase no order will come of.
type LostPurchase struct {
	OrderID int64  `json:"order_id,string"`
	UserID  string `json:"user_id"`
}

// OK reports whether no invariant was violated.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// String is a readable one-paragraph report.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sale %d: total %d, db stock %d, redis remaining %d, live orders %d, oversold %d, ledger -%d +%d, redis buyers %d, backlog %d, open workflows %d; by status:",
		r.SaleID, r.TotalStock, r.DBStock, r.RedisRemaining, r.LiveOrders, r.Oversold, r.Deducted, r.Restored, r.RedisBuyers, r.Backlog, r.OpenWorkflows)
	statuses := make([]string, 0, len(r.ByStatus))
	for s := range r.ByStatus {
		statuses = append(statuses, string(s))
	}
	sort.Strings(statuses)
	for _, s := range statuses {
		fmt.Fprintf(&b, " %s=%d", s, r.ByStatus[domain.Status(s)])
	}
	if r.OK() {
		b.WriteString("\nOK: every invariant holds")
	} else {
		b.WriteString("\nVIOLATIONS:")
		for _, v := range r.Violations {
			b.WriteString("\n  - " + v)
		}
	}
	return b.String()
}

// Sale audits one sale.
func Sale(ctx context.Context, src Sources, saleID int64, exp Expect) (Report, error) {
	r := Report{SaleID: saleID, OpenWorkflows: -1, Stranded: -1}
	sl, err := src.Store.Sale(ctx, saleID)
	if err != nil {
		return r, err
	}
	r.TotalStock, r.DBStock = sl.TotalStock, sl.Stock
	db := src.Store.Client()

	r.ByStatus, err = src.Store.CountByStatus(ctx, saleID)
	if err != nil {
		return r, err
	}
	for s, n := range r.ByStatus {
		if s.Live() {
			r.LiveOrders += n
		}
	}
	// Invariant 1: never oversold.
	if r.LiveOrders > r.TotalStock {
		r.Oversold = r.LiveOrders - r.TotalStock
		r.violate("oversold: %d live orders for %d units", r.LiveOrders, r.TotalStock)
	}
	if r.DBStock < 0 || r.DBStock > r.TotalStock {
		r.violate("db stock %d outside 0..%d", r.DBStock, r.TotalStock)
	}

	// Invariant 2: one live unit per buyer.
	live, err := src.Store.LiveBuyers(ctx, saleID)
	if err != nil {
		return r, fmt.Errorf("audit live orders: %w", err)
	}
	liveByUser := make(map[string]int64, len(live))
	for _, b := range live {
		if prev, dup := liveByUser[b.UserID]; dup {
			r.violate("user %s holds two live orders: %d and %d", b.UserID, prev, b.OrderID)
		}
		liveByUser[b.UserID] = b.OrderID
	}

	// The ledger explains the stock exactly, at every moment, because each
	// stock change commits with its ledger row.
	moves, err := db.StockMovement.Query().Where(stockmovement.SaleID(saleID)).All(ctx)
	if err != nil {
		return r, fmt.Errorf("audit ledger: %w", err)
	}
	// Units, not rows: a restore of an order that never deducted writes a
	// tombstone with delta 0.
	for _, m := range moves {
		if m.Kind == stockmovement.KindDEDUCT {
			r.Deducted -= m.Delta
		} else {
			r.Restored += m.Delta
		}
	}
	if r.TotalStock-r.DBStock != r.Deducted-r.Restored {
		r.violate("ledger does not explain stock: total %d - stock %d != deducted %d - restored %d",
			r.TotalStock, r.DBStock, r.Deducted, r.Restored)
	}
	if err := checkLedgerPerOrder(ctx, db, saleID, moves, exp.Settled || exp.Quiescent, &r); err != nil {
		return r, err
	}

	st, err := src.Stock.Inspect(ctx, saleID)
	if err != nil {
		return r, err
	}
	r.RedisRemaining, r.RedisBuyers, r.Backlog, r.Line = st.Remaining, int(st.Buyers), st.Backlog, st.Line
	switch {
	case !st.Warm && !time.Now().Before(sl.EndsAt):
		// Retired: an ended sale's keys leave Redis once its work is done,
		// and the database alone answers for it.
		r.Retired = true
	case !st.Warm:
		r.violate("sale is not loaded in Redis")
	}
	if r.RedisRemaining < 0 {
		r.violate("redis remaining is negative: %d", r.RedisRemaining)
	}

	if src.Temporal != nil {
		resp, err := src.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("SaleId = '%d' AND ExecutionStatus = 'Running'", saleID),
		})
		if err != nil {
			return r, fmt.Errorf("audit open workflows: %w", err)
		}
		r.OpenWorkflows = resp.GetCount()
	}
	if src.Temporal != nil && (exp.Settled || exp.Quiescent) {
		// Invariant 4 for orders whose workflow will not end them: a
		// Terminate leaves a live order that no running workflow owns.
		var holds reconcile.Holds
		if src.Stock != nil {
			holds = src.Stock.Holder
		}
		stranded, err := reconcile.FindStranded(ctx, src.Temporal, src.Store, holds, saleID)
		if err != nil {
			return r, fmt.Errorf("audit stranded orders: %w", err)
		}
		r.Stranded = len(stranded)
		for _, s := range stranded {
			row := string(s.Row)
			if row == "" {
				row = "without a row"
			}
			r.violate("order %d is %s but its workflow closed (%s) without ending it", s.Ref.OrderID, row, s.Closed)
		}
	}

	if err := checkLost(ctx, src, saleID, exp.Settled || exp.Quiescent, &r); err != nil {
		return r, err
	}

	if exp.Settled || exp.Quiescent {
		// Invariant 3: conservation.
		if r.DBStock+r.LiveOrders != r.TotalStock {
			r.violate("conservation: db stock %d + live orders %d != total %d", r.DBStock, r.LiveOrders, r.TotalStock)
		}
		if r.RedisRemaining != r.DBStock && !r.Retired {
			r.violate("redis remaining %d != db stock %d", r.RedisRemaining, r.DBStock)
		}
		if r.Backlog != 0 {
			r.violate("%d intents still wait for their workflow", r.Backlog)
		}
		// The line holds the stream's orders (docs/design.md §3.11): with
		// no intent left, nobody is in line.
		if r.Line != 0 {
			r.violate("%d orders still in line with no intent waiting", r.Line)
		}
		buyers, err := src.Stock.Buyers(ctx, saleID)
		if err != nil {
			return r, err
		}
		for u, id := range buyers {
			if liveByUser[u] != id {
				r.violate("redis says user %s holds order %d, the database says %d", u, id, liveByUser[u])
			}
		}
		for u, id := range liveByUser {
			if _, ok := buyers[u]; !ok && !r.Retired {
				r.violate("user %s holds live order %d that redis does not know", u, id)
			}
		}
	}
	if exp.Quiescent && r.OpenWorkflows > 0 {
		r.violate("%d order workflows still running", r.OpenWorkflows)
	}
	return r, nil
}

// checkLedgerPerOrder finds orders whose ledger contradicts their status:
// a live order (a REFUNDED one too: its unit stays out of the sale) must
// have deducted and not restored; in a settled sale an ended order that
// deducted must have restored (or its unit leaked), REFUNDED_RESTOCKED
// included.
func checkLedgerPerOrder(ctx context.Context, db *ent.Client, saleID int64, moves []*ent.StockMovement, settled bool, r *Report) error {
	type ledger struct{ deducted, restored bool }
	byOrder := map[int64]*ledger{}
	for _, m := range moves {
		l := byOrder[m.OrderID]
		if l == nil {
			l = &ledger{}
			byOrder[m.OrderID] = l
		}
		switch {
		case m.Kind == stockmovement.KindDEDUCT:
			l.deducted = true
		case m.Delta > 0: // not a tombstone
			l.restored = true
		}
	}
	orders, err := db.Order.Query().Where(order.SaleID(saleID)).Select(order.FieldID, order.FieldStatus).All(ctx)
	if err != nil {
		return fmt.Errorf("audit orders: %w", err)
	}
	for _, o := range orders {
		l := byOrder[o.ID]
		if l == nil {
			l = &ledger{}
		}
		status := domain.Status(o.Status)
		switch {
		case l.restored && !l.deducted:
			r.violate("order %d restored a unit it never deducted", o.ID)
		case status == domain.StatusAwaitingPayment || status == domain.StatusPaid || status == domain.StatusRefunded:
			if !l.deducted || l.restored {
				r.violate("order %d is %s but its ledger is deducted=%v restored=%v", o.ID, status, l.deducted, l.restored)
			}
		case !status.Live() && settled && l.deducted && !l.restored:
			// Until the sale settles, an ended order may still be between
			// FinishOrder and RestoreStock.
			r.violate("order %d is %s but its unit was never restored", o.ID, status)
		}
	}
	return nil
}

// checkLost finds the accepted purchases that were lost (invariant 4) in
// the reconciler's memory of admissions: Redis no longer holds the buyer
// with that order, the order has no row and no workflow, and either a
// reconciler found it lost, the sale is settled (nothing is on its way), or
// it was admitted longer ago than reconcile.DefaultLostAfter (a relay
// holding its intent would have started it by then). An admission made
// and lost between two reconciler passes was never remembered: the audit
// cannot see it (docs/design.md §3.14).
func checkLost(ctx context.Context, src Sources, saleID int64, settled bool, r *Report) error {
	unplaced, err := src.Store.UnplacedAdmissions(ctx, saleID)
	if err != nil || len(unplaced) == 0 {
		return err
	}
	buyers, err := src.Stock.Buyers(ctx, saleID)
	if err != nil {
		return err
	}
	for _, a := range unplaced {
		if reconcile.Held(a, buyers) {
			continue // on its way to its saga, or its buyer bought again
		}
		if a.LostAt.IsZero() {
			gone, err := reconcile.Gone(ctx, src.Temporal, a, reconcile.DefaultLostAfter, settled)
			if err != nil {
				return fmt.Errorf("audit lost purchases: %w", err)
			}
			if !gone {
				continue // on its way, or its workflow writes its row (or the stranded check names it)
			}
		}
		r.Lost = append(r.Lost, LostPurchase{OrderID: a.OrderID, UserID: a.UserID})
	}
	if len(r.Lost) == 0 {
		return nil
	}
	var b strings.Builder
	for i, l := range r.Lost {
		if i == 20 {
			fmt.Fprintf(&b, ", and %d more (--json lists them all)", len(r.Lost)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "order %d (buyer %s)", l.OrderID, l.UserID)
	}
	r.violate("%d accepted purchases lost: Redis lost their reservations before their orders were written: %s", len(r.Lost), b.String())
	return nil
}
