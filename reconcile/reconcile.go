// Package reconcile repairs drift between Redis (the admission filter) and
// Postgres (the source of truth) for live sales: a Redis that lost its data,
// buyers Redis forgot, reservations whose order ended without their release,
// and a remaining count that no longer matches the database.
//
// Each sale is reconciled under its redsync lock (Redlock over the
// configured Redis nodes, extended while the work runs), so several
// workers can run the loop and only one touches a sale at a time.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// Report says what a pass over one sale repaired.
type Report struct {
	SaleID           int64
	Rebuilt          bool // Redis did not know the sale; loaded from the database
	BuyersRestored   int  // live orders Redis did not hold a buyer entry for
	BuyersRefused    int  // entries not restored: their order had been released in Redis
	StaleReleased    int  // ended orders whose Redis reservation was still held
	RemainingFixed   bool // Redis remaining set to the database stock
	RemainingWas     int
	RemainingNow     int
	SkippedInFlight  int // orders admitted but not yet in the database: remaining left alone
	ReleaseGraceLeft int // ended orders younger than the grace period, left to their saga
	AwaitingRestore  int // ended orders whose unit the database has not restored yet: kept
	// Raced: a purchase or release changed the sale in Redis after the
	// pass read it, so the repair it planned was not applied. The next
	// pass plans again from what is then true.
	Raced bool
	// LostAdmissions counts the admissions a pass remembered (store.
	// RememberAdmissions, by this reconciler or another, before a restart
	// or after) that Redis has forgotten (it lost the sale, or went back in
	// time: a restart without persistence, a failover to a replica behind)
	// and that have no order row and no workflow: their buyers were told
	// 202, and no order will come of it. Lost names them all, LostOrders
	// up to ten of their order ids. The rebuild cannot give them their unit
	// back; this says so. Each is counted by one pass only.
	LostAdmissions int
	LostOrders     []int64
	Lost           []store.Admission
	// Recovered are the lost admissions this pass admitted again under
	// their order ids: the sale was open, had a unit, and the buyer held no
	// other. Their orders are placed like any admission; the others stay
	// lost, and later passes offer them their unit again while the sale is
	// open.
	Recovered []int64
	// offer is what recoverLost tries, oldest first: the admissions this
	// pass found lost, and those an earlier pass found lost and did not
	// admit again (it stopped after marking them, its re-admission failed,
	// or the sale had no unit then).
	offer []store.Admission
	// Remembered counts the admissions without an order row this pass
	// recorded for the first time.
	Remembered int
}

// Repaired reports whether anything changed.
func (r Report) Repaired() bool {
	return r.Rebuilt || r.BuyersRestored > 0 || r.StaleReleased > 0 || r.RemainingFixed
}

// Reconciler repairs sales.
type Reconciler struct {
	Store *store.Store
	Stock *stock.Stock
	// Grace is how long an ended order may keep its Redis reservation
	// before the reconciler releases it (its saga normally does so within
	// milliseconds). Default 1 minute.
	Grace time.Duration
	// OnRepair, if set, is told of every pass that changed something.
	OnRepair func(Report)
	// RetireAfter is how long after its end a sale keeps its hot keys in
	// Redis once it is drained and every order of it is final. Default a
	// day; negative: never retire.
	RetireAfter time.Duration
	// OnRetire, if set, is told of every sale retired.
	OnRetire func(saleID int64)
	// Temporal, if set, lets Run end the orders whose workflow closed
	// without ending them (Stranded); Events tells their buyers.
	Temporal client.Client
	Events   *push.Publisher
	// OnStranded, if set, is told of every stranded order ended.
	OnStranded func(Ending)
	Logger     *slog.Logger

	// LostAfter is how long after its admission (the time in its order id)
	// a remembered admission that Redis no longer holds, with no order row
	// and no workflow, waits before it is called lost: a relay may hold its
	// intent, read before Redis lost it, and be about to start it (a start
	// takes at most 10 s; a batch a few). Default 1 minute; negative: at
	// once, for seckill dev, whose in-process Redis dies with its only
	// relay.
	LostAfter time.Duration

	// Providers are the payment providers, by name, whose records
	// Payments reconciles against the orders; none: no such pass.
	Providers map[string]payment.Provider
	// PaymentInterval is how often Run reconciles the providers' records,
	// once for the deployment however many reconcilers run. Default
	// DefaultPaymentInterval; negative: never.
	PaymentInterval time.Duration
	// SettleMargin is how old a capture must be before the reconciliation
	// hands it to its PaymentSettleWorkflow. Default DefaultSettleMargin.
	SettleMargin time.Duration
	// PaymentLookback is how long after its end a sale's captures are
	// still reconciled. Default DefaultPaymentLookback.
	PaymentLookback time.Duration
	// SettlesPerPass bounds the settle workflows a pass starts. Default
	// DefaultSettlesPerPass.
	SettlesPerPass int
	// OnPaymentFind, if set, is told of every capture handed to its
	// settle workflow.
	OnPaymentFind func(Find)

	// settled holds the captures (provider/id) whose settle workflow the
	// last pass found started: the next pass asks Temporal about none of
	// them again. Rebuilt by every pass, so it holds at most a listing.
	settledMu sync.Mutex
	settled   map[string]bool

	// remembered is, by sale, the order ids without a row that a pass of
	// this reconciler has recorded: a later pass records only the new ones.
	// A restart forgets it and records them again, which writes nothing.
	rememberedMu sync.Mutex
	remembered   map[int64]map[int64]bool
}

// Sale reconciles one sale under its lock.
func (rc *Reconciler) Sale(ctx context.Context, saleID int64) (Report, error) {
	rep := Report{SaleID: saleID}
	err := rc.Stock.WithSaleLock(ctx, saleID, func(ctx context.Context) error {
		var err error
		rep, err = rc.sale(ctx, saleID)
		if err == nil {
			rc.recoverLost(ctx, &rep)
		}
		return err
	})
	if err == nil && rep.Raced {
		rc.logger().Info("reconciler left a sale that changed while it looked to the next pass", "sale_id", saleID)
	}
	if err == nil {
		rc.logLost(rep)
	}
	if err == nil && len(rep.Recovered) > 0 {
		rc.logger().Warn("lost purchases admitted again under their order ids: their orders will be placed",
			"sale_id", saleID, "recovered", len(rep.Recovered), "order_ids", rep.Recovered)
	}
	if err == nil && (rep.Repaired() || rep.LostAdmissions > 0) {
		// A Redis that did not hold the sale at all (seckill dev's, at
		// every start; one restarted empty) loaded again from the database
		// is routine: INFO. Any other drift is worth a look: WARN. A lost
		// admission has its ERROR above.
		level := slog.LevelWarn
		if rep.Rebuilt && rep.LostAdmissions == 0 && rep.StaleReleased == 0 {
			level = slog.LevelInfo
		}
		rc.logger().Log(ctx, level, "reconciler repaired a sale", "sale_id", saleID, "rebuilt", rep.Rebuilt,
			"buyers_restored", rep.BuyersRestored, "stale_released", rep.StaleReleased,
			"remaining_fixed", rep.RemainingFixed, "remaining_was", rep.RemainingWas, "remaining_now", rep.RemainingNow)
		if rc.OnRepair != nil {
			rc.OnRepair(rep)
		}
	}
	return rep, err
}

// sale makes one pass. The sale lock keeps other reconcilers and warm-ups
// out, but not purchases and sagas, so the pass is built to be right
// whatever they do meanwhile:
//
//  1. Redis is read first, atomically, at some version v0.
//  2. The database is read after, in one transaction that sees one instant.
//     A saga ending an order writes the database (status, then stock)
//     before it releases the reservation, so a release Redis showed at v0
//     is in the database snapshot too; a purchase writes its row only after
//     its deduction, so an order with a row has deducted.
//  3. The repair applies, in one atomic script, only if the version is
//     still v0: no purchase, release or load landed since step 1.
func (rc *Reconciler) sale(ctx context.Context, saleID int64) (Report, error) {
	rep := Report{SaleID: saleID}
	rs, replicated, err := rc.Stock.SnapshotReplicated(ctx, saleID)
	if err != nil {
		return rep, err
	}
	db, err := rc.Store.SaleSnapshot(ctx, saleID)
	if err != nil {
		return rep, err
	}
	if err := rc.remember(ctx, rs, replicated, db, &rep); err != nil {
		return rep, err
	}
	if rs.Warm {
		// A warm-up that stopped between listing and loading is repaired
		// by the load; one that ran in the order of older versions
		// (loaded, then listed) may have left a loaded sale unlisted,
		// whose intents no relay would read: list every loaded sale.
		if err := rc.Stock.List(ctx, saleID); err != nil {
			return rep, err
		}
		if err := fault.Hit(fault.ReconcileList); err != nil {
			return rep, err
		}
	}
	if !rs.Warm {
		// Redis lost the sale (a restart without persistence): the
		// database knows the stock and who holds a unit. Nothing can be
		// admitted meanwhile (reserve.lua refuses an unloaded sale) and
		// warm-ups take the lock we hold. The stock and the buyers come
		// from the one snapshot, not from orders.Load, whose two reads
		// could see a saga's deduction in one and not the other.
		loaded, err := rc.Stock.Load(ctx, orders.RedisSale(db.Sale, db.LiveBuyers()))
		if err != nil {
			return rep, err
		}
		rep.Rebuilt = loaded
		rep.RemainingNow = db.Sale.Stock
		return rep, fault.Hit(fault.ReconcileRebuild)
	}

	plan := rc.plan(rs, db, &rep)
	rep.RemainingWas, rep.RemainingNow = rs.Remaining, rs.Remaining
	if plan.Empty() {
		return rep, nil
	}
	res, err := rc.Stock.Repair(ctx, saleID, rs.Version, plan)
	if err != nil {
		return rep, err
	}
	if !res.Applied {
		rep.Raced = true
		return rep, nil
	}
	if err := fault.Hit(fault.ReconcileRepair); err != nil {
		return rep, err
	}
	rep.BuyersRestored, rep.BuyersRefused, rep.StaleReleased = res.BuyersRestored, res.BuyersRefused, res.Released
	rep.RemainingWas, rep.RemainingNow = res.RemainingWas, res.RemainingNow
	rep.RemainingFixed = plan.SetRemaining
	return rep, nil
}

// remember keeps the reconciler's memory of admitted purchases
// (docs/design.md §3.14) and finds in it the ones Redis lost.
//
// It records every buyer Redis holds (rs) without an order row (db): an
// admission on its way to its saga. With --admit-ack=replica only a
// snapshot the replicas confirmed is recorded (SnapshotReplicated), so an
// admission a failover may still take, whose buyer was answered
// UNCONFIRMED, is not remembered as a 202 until a replica has it.
//
// A remembered admission is lost when Redis no longer holds it, it has no
// order row and no workflow, and it is older than LostAfter. Nothing else
// takes a buyer out of Redis without a row: a release follows the order's
// final row (the saga's and the stranded repair's order of steps), and the
// rows are read after Redis. A lost admission's intent went with it (one
// script wrote both), so no order can still come of it.
func (rc *Reconciler) remember(ctx context.Context, rs stock.Snapshot, replicated bool, db store.SaleSnapshot, rep *Report) error {
	saleID := rep.SaleID
	rows := make(map[int64]bool, len(db.Orders))
	for _, o := range db.Orders {
		rows[o.ID] = true
	}
	unplaced, err := rc.Store.UnplacedAdmissions(ctx, saleID)
	if err != nil {
		return err
	}
	if err := rc.markLost(ctx, unplaced, rs.Buyers, rs.Warm, rep); err != nil {
		return err
	}

	if rc.Stock.Acknowledged() && !replicated {
		return nil // the next pass records them, once a replica confirms
	}
	rc.rememberedMu.Lock()
	defer rc.rememberedMu.Unlock()
	if rc.remembered == nil {
		rc.remembered = map[int64]map[int64]bool{}
	}
	before := rc.remembered[saleID]
	inFlight := map[int64]bool{}
	var fresh []store.Buyer
	for user, id := range rs.Buyers {
		if rows[id] {
			continue
		}
		inFlight[id] = true
		if !before[id] {
			fresh = append(fresh, store.Buyer{UserID: user, OrderID: id})
		}
	}
	if len(fresh) > 0 {
		if err := rc.Store.RememberAdmissions(ctx, saleID, fresh, replicated); err != nil {
			return err
		}
		// A stop here leaves rc.remembered as it was: the next pass
		// records them again, which writes nothing.
		if err := fault.Hit(fault.AdmissionsRemembered); err != nil {
			return err
		}
	}
	rc.remembered[saleID] = inFlight
	rep.Remembered = len(fresh)
	return nil
}

// logLost tells of the admissions a pass found lost, at ERROR.
func (rc *Reconciler) logLost(rep Report) {
	if rep.LostAdmissions == 0 {
		return
	}
	buyers := make([]string, 0, len(rep.LostOrders))
	for _, a := range rep.Lost[:len(rep.LostOrders)] {
		buyers = append(buyers, a.UserID)
	}
	rc.logger().Error("accepted purchases lost: Redis lost their reservations before their orders were written, and no workflow will write them",
		"sale_id", rep.SaleID, "lost", rep.LostAdmissions, "order_ids", rep.LostOrders, "buyers", buyers)
}

// recoverLost admits the lost purchases of rep.offer again, under their
// own order ids, so that the 202 their buyers hold is true after all.
// reserve.lua decides as for any purchase: the sale must be open and
// loaded, have a unit, and the buyer hold none (one who bought again has
// their new order; one who retried with their Idempotency-Key after a
// failover has theirs). It is safe however late: the order is the same
// order (same id, sale and buyer), so a relay that still starts it from an
// intent read before Redis lost it meets the same workflow, and the saga
// deducts once per order id. What it cannot restore is the purchase's
// Idempotency-Key: a retry with it answers 409 ALREADY_PURCHASED naming the
// order, not 202. One that cannot be admitted now is offered again by every
// later pass while its sale is open (invariant 4, docs/design.md §2: a 202 has an order);
// that it still cannot is said once, by the pass that found it lost.
func (rc *Reconciler) recoverLost(ctx context.Context, rep *Report) {
	for _, a := range rep.offer {
		id, err := rc.Stock.Reserve(ctx, a.SaleID, a.UserID, a.OrderID, "")
		if redisack.IsNotAcknowledged(err) {
			err = nil // not confirmed by a replica: the relay starts it once one has it
		}
		if err == nil && id == a.OrderID {
			// A stop here leaves the buyer held under the order: the relay
			// starts it, and the next pass finds it held.
			err = fault.Hit(fault.AdmissionReadmitted)
		}
		if err != nil || id != a.OrderID {
			level := slog.LevelDebug
			if a.LostAt.IsZero() {
				level = slog.LevelInfo // found lost by this pass
			}
			rc.logger().Log(ctx, level, "a lost purchase cannot be admitted again", "order_id", a.OrderID, "sale_id", a.SaleID, "user_id", a.UserID, "err", err)
			continue
		}
		err = rc.Store.MarkAdmissionRecovered(ctx, a.OrderID)
		if err == nil {
			err = fault.Hit(fault.AdmissionRecovered)
		}
		if err != nil {
			rc.logger().Warn("record a recovered purchase", "order_id", a.OrderID, "err", err)
		}
		rep.Recovered = append(rep.Recovered, a.OrderID)
	}
}

// DefaultLostAfter is Reconciler.LostAfter's default, and how old an
// admission the audit finds gone must be, outside a settled audit, to be
// called lost.
const DefaultLostAfter = time.Minute

// markLost marks as lost, and adds to rep, the admissions of unplaced
// (none with an order row) that Redis does not hold (buyers, read before
// them; loaded: whether Redis holds the sale at all), that have no
// workflow and are older than LostAfter, and that no other reconciler
// marked first. It offers them (rep.offer) with those Redis does not hold
// that an earlier pass marked lost and did not admit again.
func (rc *Reconciler) markLost(ctx context.Context, unplaced []store.Admission, buyers map[string]int64, loaded bool, rep *Report) error {
	lostAfter := rc.LostAfter
	if lostAfter == 0 {
		lostAfter = DefaultLostAfter
	}
	for _, a := range unplaced {
		held := loaded && Held(a, buyers)
		switch {
		case held:
			continue
		case !a.LostAt.IsZero():
			if a.RecoveredAt.IsZero() {
				rep.offer = append(rep.offer, a)
			}
			continue
		}
		if gone, err := Gone(ctx, rc.Temporal, a, lostAfter, false); err != nil || !gone {
			if err != nil {
				return err
			}
			continue
		}
		marked, err := rc.Store.MarkAdmissionLost(ctx, a.OrderID)
		if err != nil {
			return err
		}
		if !marked {
			continue
		}
		// A stop here leaves the loss recorded (the audit names it) but
		// neither logged, counted nor admitted again by this pass: the
		// next pass offers it its unit.
		if err := fault.Hit(fault.AdmissionLost); err != nil {
			return err
		}
		rep.Lost = append(rep.Lost, a)
		rep.offer = append(rep.offer, a)
		if len(rep.LostOrders) < 10 {
			rep.LostOrders = append(rep.LostOrders, a.OrderID)
		}
	}
	rep.LostAdmissions = len(rep.Lost)
	return nil
}

// EndedLost finds the admissions lost in sales that ended before a pass
// looked at them again (Sale reconciles only open sales): those admitted
// in the last day, remembered, not found lost yet, with no order row, of a
// sale not in open. Nothing is repaired in an ended sale, and a lost
// purchase cannot be admitted again; it is logged and counted.
func (rc *Reconciler) EndedLost(ctx context.Context, open map[int64]bool) ([]Report, error) {
	recent, err := rc.Store.UnplacedAdmissionsSince(ctx, time.Now().Add(-24*time.Hour))
	if err != nil {
		return nil, err
	}
	var sales []int64
	for _, a := range recent {
		if !open[a.SaleID] && !slices.Contains(sales, a.SaleID) {
			sales = append(sales, a.SaleID)
		}
	}
	var reps []Report
	for _, id := range sales {
		// Redis first, then the rows: a release follows its order's row,
		// so an admission Redis no longer held has its row by then, or
		// never will.
		buyers, err := rc.Stock.Buyers(ctx, id)
		if err != nil {
			return reps, err
		}
		unplaced, err := rc.Store.UnplacedAdmissions(ctx, id)
		if err != nil {
			return reps, err
		}
		rep := Report{SaleID: id}
		if err := rc.markLost(ctx, unplaced, buyers, true, &rep); err != nil {
			return reps, err
		}
		if rep.LostAdmissions > 0 {
			rc.logLost(rep)
			if rc.OnRepair != nil {
				rc.OnRepair(rep)
			}
			reps = append(reps, rep)
		}
	}
	return reps, nil
}

// Held reports whether Redis still accounts for a remembered admission, so
// that it is not lost: Redis holds the sale (loaded) and, in buyers, the
// buyer, under the admission's order or another one. A buyer holding
// another order of the sale bought again and has their unit: one told
// UNCONFIRMED whose keyed retry met a failover's new primary, which never
// had the first reservation, was admitted anew (a fenced relay, or a
// reconciler on the old primary, may have recorded the first one), and one
// who pressed buy again with a new key after a loss has theirs. The
// reconciler and the audit judge by it alike.
func Held(a store.Admission, buyers map[string]int64) bool {
	_, ok := buyers[a.UserID]
	return ok
}

// Gone reports whether a remembered admission that Redis no longer holds,
// and that has no order row, is lost: it was admitted longer than after
// ago (a relay holding its intent would have started it by then), or its
// sale is settled (nothing is on its way), and no workflow was started for
// it (one writes its row; Stranded ends one that closed without). tc nil:
// Temporal is not asked. The reconciler and the audit judge by it alike.
func Gone(ctx context.Context, tc client.Client, a store.Admission, after time.Duration, settled bool) (bool, error) {
	if !settled && time.Since(orderid.Time(a.OrderID)) < after {
		return false, nil
	}
	if tc == nil {
		return true, nil
	}
	started, err := WorkflowExists(ctx, tc, a.OrderID)
	return !started, err
}

// WorkflowExists reports whether order orderID's workflow was started.
func WorkflowExists(ctx context.Context, tc client.Client, orderID int64) (bool, error) {
	_, err := tc.DescribeWorkflowExecution(ctx, domain.WorkflowID(orderID), "")
	var missing *serviceerror.NotFound
	switch {
	case errors.As(err, &missing):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("describe the workflow of order %d: %w", orderID, err)
	}
	return true, nil
}

// plan decides the repairs from the two snapshots and counts in rep what
// it leaves alone. Only drift the snapshots prove is repaired.
func (rc *Reconciler) plan(rs stock.Snapshot, db store.SaleSnapshot, rep *Report) stock.RepairPlan {
	grace := rc.Grace
	if grace <= 0 {
		grace = time.Minute
	}
	plan := stock.RepairPlan{RestoreBuyers: map[string]int64{}, RestoreKeys: map[string]string{}, Release: map[string]int64{}}
	byID := make(map[int64]*ent.Order, len(db.Orders))
	for _, o := range db.Orders {
		byID[o.ID] = o
		// A live order Redis has no entry for: it lost the entry (the
		// order was live at v0 too, see sale). The script refuses it if
		// the order has been released since.
		if _, held := rs.Buyers[o.UserID]; !held && domain.Status(o.Status).Live() {
			plan.RestoreBuyers[o.UserID] = o.ID
			if o.IdempotencyKey != "" {
				plan.RestoreKeys[o.UserID] = o.IdempotencyKey
			}
		}
	}
	for user, id := range rs.Buyers {
		o, ok := byID[id]
		switch {
		case !ok:
			rep.SkippedInFlight++ // admitted, its workflow has not written it yet
		case domain.Status(o.Status).Live():
			// held, as it should be
		case time.Since(o.UpdatedAt) < grace:
			rep.ReleaseGraceLeft++ // its saga is ending it and will release it
		case db.HoldsUnit(id):
			// Its saga has not restored the unit in the database yet;
			// releasing it now would put it on sale in Redis only. Redis
			// and the database both count it as taken, so the count
			// below stays right.
			rep.AwaitingRestore++
		default:
			// Ended, and the database has the unit back, but the saga's
			// release was lost.
			plan.Release[user] = id
		}
	}
	// With nothing on its way, Redis must hold exactly the database's
	// stock once the releases are done. An order in flight moves one of
	// the two counts before the other, so the right number is unknowable
	// and the count waits for a later pass.
	if rep.SkippedInFlight == 0 && rep.ReleaseGraceLeft == 0 && rs.Backlog == 0 &&
		rs.Remaining+len(plan.Release) != db.Sale.Stock {
		plan.SetRemaining, plan.Remaining, plan.Total = true, db.Sale.Stock, db.Sale.TotalStock
	}
	return plan
}

// All reconciles every sale that has not ended, and returns the reports
// of those it could reconcile and the errors of the others.
func (rc *Reconciler) All(ctx context.Context) ([]Report, error) {
	sales, err := rc.Store.OpenSales(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	// One sale that cannot be reconciled now (its lock is held, its keys
	// are damaged) must not leave every later sale unrepaired: the errors
	// are joined and the pass goes on.
	var reps []Report
	var errs error
	open := make(map[int64]bool, len(sales))
	for _, s := range sales {
		open[s.ID] = true
		r, err := rc.Sale(ctx, s.ID)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("reconcile sale %d: %w", s.ID, err))
			continue
		}
		reps = append(reps, r)
	}
	ended, err := rc.EndedLost(ctx, open)
	if err != nil {
		errs = errors.Join(errs, fmt.Errorf("lost admissions of ended sales: %w", err))
	}
	return append(reps, ended...), errs
}

// Run reconciles every interval until ctx ends.
func (rc *Reconciler) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := rc.All(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("reconcile", "err", err)
		}
		if err := rc.Mirror(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("mirror sale windows", "err", err)
		}
		if _, err := rc.Stranded(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("end stranded orders", "err", err)
		}
		if _, err := rc.Retire(ctx); err != nil && ctx.Err() == nil {
			rc.logger().Warn("retire sales", "err", err)
		}
		if rc.paymentsDue(ctx) {
			reps, err := rc.Payments(ctx)
			rc.logPayments(reps)
			if err != nil && ctx.Err() == nil {
				rc.logger().Warn("reconcile payments", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Mirror gives Redis the end the database holds, for every loaded sale
// whose Redis window ends later: an operator's end or cancel commits in
// the database first, and if its Redis step failed (the operator got a
// 503, or the api stopped) Redis would admit buyers until the old end.
// Orders admitted in that gap are refused by PlaceOrder (store.deduct), so
// their buyers hear FAILED rather than keep a unit the sale did not have.
// The window only ever moves earlier, so a stale read cannot reopen a sale.
func (rc *Reconciler) Mirror(ctx context.Context) error {
	ids, err := rc.Stock.Sales(ctx)
	if err != nil || len(ids) == 0 {
		return err
	}
	ends, err := rc.Stock.Ends(ctx, ids)
	if err != nil {
		return err
	}
	sales, err := rc.Store.SalesByID(ctx, ids)
	if err != nil {
		return err
	}
	var errs error
	for _, id := range ids {
		sl, ok := sales[id]
		if held, loaded := ends[id]; !ok || !loaded || held <= sl.EndsAt.UnixMilli() {
			continue
		}
		err := rc.Stock.WithSaleLock(ctx, id, func(ctx context.Context) error {
			if _, err := rc.Stock.End(ctx, id, sl.StartsAt, sl.EndsAt); err != nil {
				return err
			}
			return fault.Hit(fault.ReconcileMirror)
		})
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("mirror the end of sale %d: %w", id, err))
			continue
		}
		rc.logger().Warn("reconciler ended a sale in Redis that the database had ended", "sale_id", id, "ends_at", sl.EndsAt)
	}
	return errs
}

// Retire drops from Redis the sales that ended more than RetireAfter ago,
// whose intents have all been started and whose orders are all final
// (their rows, and the row of every unit Redis still records). Such a sale
// needs nothing from Redis any more: a purchase is answered ENDED and the
// buyers' orders are listed from the database. A sale that still holds
// work is left for a later pass. It returns the sales retired.
func (rc *Reconciler) Retire(ctx context.Context) ([]int64, error) {
	after := rc.RetireAfter
	switch {
	case after < 0:
		return nil, nil
	case after == 0:
		after = 24 * time.Hour
	}
	loaded, err := rc.Stock.Sales(ctx)
	if err != nil {
		return nil, err
	}
	var retired []int64
	for _, id := range loaded {
		ok, err := rc.retire(ctx, id, after)
		if err != nil {
			return retired, fmt.Errorf("retire sale %d: %w", id, err)
		}
		if ok {
			retired = append(retired, id)
			rc.logger().Info("sale retired from Redis", "sale_id", id)
			if rc.OnRetire != nil {
				rc.OnRetire(id)
			}
		}
	}
	return retired, nil
}

func (rc *Reconciler) retire(ctx context.Context, id int64, after time.Duration) (bool, error) {
	// The sale row first: every pass looks at every loaded sale, and most
	// are live, so the orders are read only once the sale is due.
	sl, err := rc.Store.Sale(ctx, id)
	switch {
	case errors.Is(err, domain.ErrUnknownSale):
		return rc.drop(ctx, id) // nothing in the database to answer for
	case err != nil || time.Since(sl.EndsAt) < after:
		return false, err
	}
	db, err := rc.Store.SaleSnapshot(ctx, id)
	if err != nil {
		return false, err
	}
	final := make(map[int64]bool, len(db.Orders))
	for _, o := range db.Orders {
		if !domain.Status(o.Status).Final() {
			return false, nil // an order still awaits payment or its saga
		}
		final[o.ID] = true
	}
	buyers, err := rc.Stock.Buyers(ctx, id)
	if err != nil {
		return false, err
	}
	for _, order := range buyers {
		if !final[order] {
			return false, nil // admitted, its saga has not written it yet
		}
	}
	return rc.drop(ctx, id)
}

// drop retires the sale's keys; a sale Redis still finds open or holding
// intents is left for a later pass.
func (rc *Reconciler) drop(ctx context.Context, id int64) (bool, error) {
	err := rc.Stock.Retire(ctx, id)
	if errors.Is(err, stock.ErrNotDrained) {
		return false, nil
	}
	return err == nil, err
}

func (rc *Reconciler) logger() *slog.Logger {
	if rc.Logger != nil {
		return rc.Logger
	}
	return slog.Default()
}
