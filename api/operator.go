package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/workflows"
)

// Operators control a live sale: end it now, add units, cancel it. Each
// change is written to Postgres first and then mirrored into Redis, both
// under the sale's redsync lock, the lock warm-up and the reconciler take:
// none of them can interleave with it.

// SaleCancelledReason is the reason an order cancelled with its sale gets.
const SaleCancelledReason = "sale cancelled by the operator"

type cancelOutput struct {
	Status int
	Body   wire.Sale
}

func (s *Server) registerOperator() {
	huma.Register(s.api, huma.Operation{
		OperationID: "end-sale", Method: http.MethodPost, Path: "/v1/sales/{id}/end",
		Summary:     "End a sale now (admin)",
		Description: "Purchases answer ENDED from now on; orders already admitted go on to their end. Ending an ended sale changes nothing. A sale that has not opened yet never opens.",
		Tags:        []string{"sales"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		MaxBodyBytes: 1 << 10,
		Responses:    s.problems(errNoToken, errAdminsOnly, errNoSale, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *saleIDPath) (*saleOutput, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		sl, err := s.endSale(ctx, id)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &saleOutput{Body: s.saleView(ctx, sl)}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "add-units", Method: http.MethodPost, Path: "/v1/sales/{id}/units",
		Summary:     "Add units to a sale (admin)",
		Description: "The database gets the units first, then Redis, which puts them on sale at once: buyers refused as sold out may buy again. A sale that has ended (or was cancelled) answers 409 ENDED.",
		Tags:        []string{"sales"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		MaxBodyBytes: 1 << 10,
		Responses:    s.problems(errMalformed, errNoToken, errAdminsOnly, errNoSale, errEnded, errTooLarge, errNotJSON, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *struct {
		ID   string `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577180163178496" doc:"The sale's id, as in the id of a sale."`
		Body wire.AddUnitsBody
	}) (*saleOutput, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		sl, err := s.addUnits(ctx, id, in.Body.Units)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &saleOutput{Body: s.saleView(ctx, sl)}, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "cancel-sale", Method: http.MethodPost, Path: "/v1/sales/{id}/cancel",
		Summary:     "Cancel a sale (admin)",
		Description: "Ends the sale now and cancels every order of it that is not paid, each through its own workflow, in the background: the answer is 202 with the sale, and `GET /v1/sales/{id}/stats` shows the progress (`cancelling`, `open_orders`). Paid orders stand. Cancelling a cancelled sale resumes its cancellation.",
		Tags:        []string{"sales"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: 1 << 10,
		Responses: s.problems(errNoToken, errAdminsOnly, errNoSale, errInvalid, errUnavailable),
	}, func(ctx context.Context, in *saleIDPath) (*cancelOutput, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		sl, err := s.cancelSale(ctx, id)
		if err != nil {
			return nil, toHTTP(ctx, err)
		}
		return &cancelOutput{Status: http.StatusAccepted, Body: s.saleView(ctx, sl)}, nil
	})
}

// endSale ends the sale now in Postgres, then in Redis.
func (s *Server) endSale(ctx context.Context, id int64) (*ent.Sale, error) {
	// After the change, whatever its outcome: the database may have it.
	defer s.forgetSale(id)
	var sl *ent.Sale
	err := s.deps.Stock.WithSaleLock(ctx, id, func(ctx context.Context) error {
		var (
			changed bool
			err     error
		)
		sl, changed, err = s.deps.Store.EndSale(ctx, id, time.Now())
		if err != nil {
			return err
		}
		return s.mirrorEnd(ctx, sl, changed, fault.OperatorEndDB, fault.OperatorEndRedis)
	})
	if err != nil {
		return nil, operatorError(err)
	}
	slog.InfoContext(ctx, "sale ended by the operator", "sale_id", id, "ends_at", sl.EndsAt)
	return sl, nil
}

// mirrorEnd gives Redis the window the database holds. A sale Redis does
// not hold is loaded with it if this call changed the window: a warm-up
// that read the database before the change and waits for the lock then
// finds the sale loaded, and cannot load the old window. db and mirrored
// are the operation's fault points after the database's and Redis's write.
//
// The database has ended the sale when this runs, so a failure here is
// not "nothing changed": it is errEndedNotMirrored, and the reconciler
// mirrors the end (reconcile.Reconciler.Mirror).
func (s *Server) mirrorEnd(ctx context.Context, sl *ent.Sale, changed bool, db, mirrored fault.Point) error {
	err := fault.Hit(db)
	if err == nil {
		// Redis follows even if the caller goes away now.
		ctx = context.WithoutCancel(ctx)
		var ok bool
		ok, err = s.deps.Stock.End(ctx, sl.ID, sl.StartsAt, sl.EndsAt)
		if err == nil && !ok && changed {
			err = s.loadSale(ctx, sl)
		}
	}
	if err == nil {
		err = fault.Hit(mirrored)
	}
	if err != nil {
		slog.ErrorContext(ctx, "sale ended in the database but not in redis", "sale_id", sl.ID, "err", err)
		return fmt.Errorf("%w: the sale was ended in the database; Redis follows at the next reconciliation, and orders admitted after the end are refused (retrying is safe): %w",
			errEndedNotMirrored, err)
	}
	return nil
}

// addUnits adds units to the sale in Postgres, then in Redis, and clears
// the sold-out flags of every api instance.
func (s *Server) addUnits(ctx context.Context, id int64, units int) (*ent.Sale, error) {
	defer s.forgetSale(id)
	var sl *ent.Sale
	err := s.deps.Stock.WithSaleLock(ctx, id, func(ctx context.Context) error {
		var err error
		if sl, err = s.deps.Store.AddUnits(ctx, id, units, time.Now()); err != nil {
			return err
		}
		if err := fault.Hit(fault.OperatorAddDB); err != nil {
			return fmt.Errorf("%w: %d units were added to the database; Redis gets them at the next reconciliation (do not retry): %w",
				errAddedNotMirrored, units, err)
		}
		// Postgres has the units: from here on Redis holds fewer than the
		// database until it has them too, the side that cannot oversell.
		// A failure here is repaired by the reconciler, which raises
		// Redis to what the database proves; retrying would add twice.
		ctx = context.WithoutCancel(ctx)
		ok, err := s.deps.Stock.AddUnits(ctx, id, units, sl.TotalStock)
		if err == nil && !ok {
			// Redis does not hold the sale: load it, with the units, from
			// the database.
			err = s.loadSale(ctx, sl)
		}
		if err == nil {
			err = fault.Hit(fault.OperatorAddRedis)
		}
		if err != nil {
			slog.ErrorContext(ctx, "units added in the database but not in redis", "sale_id", id, "units", units, "err", err)
			return fmt.Errorf("%w: %d units were added to the database; Redis gets them at the next reconciliation (do not retry): %w",
				errAddedNotMirrored, units, err)
		}
		return nil
	})
	if err != nil {
		return nil, operatorError(err)
	}
	s.orders.Restocked(id)
	slog.InfoContext(ctx, "units added by the operator", "sale_id", id, "units", units, "total_stock", sl.TotalStock)
	return sl, nil
}

// errAddedNotMirrored marks an add that reached the database only, and
// errEndedNotMirrored an end or a cancel.
var (
	errAddedNotMirrored = errors.New("units added in the database only")
	errEndedNotMirrored = errors.New("sale ended in the database only")
)

// loadSale loads sl into Redis from the database unless Redis holds it,
// for a caller holding the sale's lock.
func (s *Server) loadSale(ctx context.Context, sl *ent.Sale) error {
	// fault: at the callers: operator.*.redis (mirrorEnd, addUnits).
	_, err := orders.Load(ctx, s.deps.Store, s.deps.Stock, sl)
	return err
}

// cancelSale marks the sale cancelled and ends it, in Postgres then Redis,
// and hands its open orders to the background cancellation.
func (s *Server) cancelSale(ctx context.Context, id int64) (*ent.Sale, error) {
	defer s.forgetSale(id)
	var sl *ent.Sale
	err := s.deps.Stock.WithSaleLock(ctx, id, func(ctx context.Context) error {
		var (
			changed bool
			err     error
		)
		sl, changed, err = s.deps.Store.CancelSale(ctx, id, time.Now())
		if err != nil {
			return err
		}
		return s.mirrorEnd(ctx, sl, changed, fault.OperatorCancelDB, fault.OperatorCancelRedis)
	})
	if err != nil {
		return nil, operatorError(err)
	}
	slog.InfoContext(ctx, "sale cancelled by the operator", "sale_id", id, "cancelled_at", *sl.CancelledAt)
	s.cancels.request(id)
	return sl, nil
}

// operatorError keeps the business answers and marks the rest as
// unavailability.
func operatorError(err error) error {
	switch {
	case errors.Is(err, domain.ErrUnknownSale), errors.Is(err, domain.ErrEnded):
		return err
	case errors.Is(err, errEndedNotMirrored):
		// The cause (a Redis error) stays in the log.
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the sale was ended in the database; Redis follows at the next reconciliation, and orders admitted after the end are refused (retrying is safe)")
	case errors.Is(err, errAddedNotMirrored):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error())
	}
	return unavailable(err)
}

// Sale cancellations run in the background, owned by the Server: one pass
// per cancelled sale with open orders, at most maxSaleCancellations of them
// sending updates at once, each at most cancelParallelism updates at once. They resume on start and every
// cancelRescan: a cancelled sale with open order rows is cancelled again
// (the cancel update is idempotent), so a crashed api loses nothing.
const (
	maxSaleCancellations = 4
	cancelParallelism    = 16
	cancelRescan         = 15 * time.Second
	// cancelPatience bounds how long one pass waits on a sale whose open
	// orders stop moving (a workflow not started because Temporal is
	// down, say); the next rescan picks it up again.
	cancelPatience = 5 * time.Minute
)

// cancellations are the sales being cancelled by this instance.
type cancellations struct {
	wake    chan int64
	mu      sync.Mutex
	running map[int64]bool
}

func newCancellations() *cancellations {
	return &cancellations{wake: make(chan int64, 64), running: map[int64]bool{}}
}

// request asks the background task to cancel the sale's open orders. If
// its queue is full the next rescan finds the sale.
func (c *cancellations) request(id int64) {
	select {
	case c.wake <- id:
	default:
	}
}

func (c *cancellations) claim(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[id] {
		return false
	}
	c.running[id] = true
	return true
}

func (c *cancellations) release(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, id)
}

// runCancellations is the background task that cancels the open orders
// of cancelled sales. It returns when ctx ends, after its passes stopped.
func (s *Server) runCancellations(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxSaleCancellations)
	launch := func(id int64) {
		if !s.cancels.claim(id) {
			return
		}
		wg.Go(func() {
			defer s.cancels.release(id)
			s.cancelOpenOrders(ctx, id, slots)
		})
	}
	rescan := func() {
		ids, err := s.deps.Store.CancelledWithOpenOrders(ctx)
		if err != nil {
			if ctx.Err() == nil {
				slog.WarnContext(ctx, "list cancelled sales to resume", "err", err)
			}
			return
		}
		for _, id := range ids {
			launch(id)
		}
	}
	rescan()
	t := time.NewTicker(cancelRescan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-s.cancels.wake:
			launch(id)
		case <-t.C:
			rescan()
		}
	}
}

// cancelOpenOrders sends the cancel update to every open order of a
// cancelled sale until none is left: the order rows awaiting payment, and
// the orders admitted without a row yet, which either deduct before the
// cancellation (and are then cancelled here once awaiting payment) or find
// the sale cancelled and end CANCELLED on their own (store.DeductStock).
//
// A pass holds one of slots while it sends updates, not while it waits for
// orders to move, so a sale stuck on a Temporal outage never holds up the
// others.
func (s *Server) cancelOpenOrders(ctx context.Context, id int64, slots chan struct{}) {
	log := slog.With("sale_id", id)
	log.InfoContext(ctx, "cancelling the open orders of a cancelled sale")
	var (
		pause    = 200 * time.Millisecond
		last     = int64(-1)
		progress = time.Now()
	)
	for ctx.Err() == nil {
		open, err := s.openOrders(ctx, id)
		switch {
		case err != nil:
			log.WarnContext(ctx, "read open orders", "err", err)
		case open.total() == 0:
			log.InfoContext(ctx, "every open order of the cancelled sale is cancelled")
			return
		case len(open.rows) > 0:
			select {
			case slots <- struct{}{}:
				s.cancelEach(ctx, open.rows)
				<-slots
			case <-ctx.Done():
				return
			}
		}
		if n := open.total(); err == nil && n != last {
			last, progress, pause = n, time.Now(), 200*time.Millisecond
		} else if time.Since(progress) > cancelPatience {
			log.WarnContext(ctx, "open orders of the cancelled sale stopped moving; the next rescan resumes", "open_orders", last)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// openOrders are a sale's orders that are neither final nor paid.
type openOrders struct {
	rows      []*ent.Order // PENDING and AWAITING_PAYMENT rows (up to a page)
	unwritten int64        // admitted in Redis, no row yet (or no workflow yet)
}

func (o openOrders) total() int64 { return int64(len(o.rows)) + o.unwritten }

func (s *Server) openOrders(ctx context.Context, id int64) (openOrders, error) {
	rows, err := s.deps.Store.OpenOrders(ctx, id, 1000)
	if err != nil {
		return openOrders{}, err
	}
	st, err := s.stats(ctx, id)
	if err != nil {
		return openOrders{}, err
	}
	return openOrders{rows: rows, unwritten: st.Pending + st.RelayBacklog}, nil
}

// cancelEach sends the cancel update to each order, a bounded number at
// once. Orders it could not cancel yet are retried by the next round.
func (s *Server) cancelEach(ctx context.Context, open []*ent.Order) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, cancelParallelism)
	for _, o := range open {
		if o.Status != order.StatusAWAITING_PAYMENT {
			continue // a PENDING row: its workflow has not reached the wait
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.cancelOrder(ctx, o)
		})
	}
	wg.Wait()
}

// cancelOrder asks one order's workflow to cancel it. The update id is the
// one a buyer's cancel uses, so the two join each other; the workflow
// decides once between it, a payment and the timer, and a paid order is
// never touched.
func (s *Server) cancelOrder(ctx context.Context, o *ent.Order) {
	log := slog.With("sale_id", o.SaleID, "order_id", o.ID, "user_id", o.UserID)
	uctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	h, err := s.deps.Temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID: domain.WorkflowID(o.ID), UpdateID: workflows.UpdateCancel, UpdateName: workflows.UpdateCancel,
		Args:         []any{workflows.CancelRequest{Reason: SaleCancelledReason}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err == nil {
		err = fault.Hit(fault.OperatorCancelOrder)
	}
	if err == nil {
		var st workflows.OrderState
		err = h.Get(uctx, &st)
		if err == nil {
			log.DebugContext(ctx, "order cancelled with its sale", "status", st.Status)
			return
		}
	}
	var (
		app *temporal.ApplicationError
		nf  *serviceerror.NotFound
	)
	switch {
	case errors.As(err, &app) && app.Type() == workflows.ErrTypeInvalidState:
		// PENDING: the workflow has not reached the wait yet; the next
		// round retries. Any other status: decided already (paid, or
		// ending), nothing to do.
		return
	case errors.As(err, &nf):
		return // the workflow has ended; its row is final
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return // accepted but still compensating, or no worker took it yet: the next round looks again
	case ctx.Err() != nil:
		return
	}
	log.WarnContext(ctx, "cancel an order of a cancelled sale", "err", err)
}
