package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/relay"
)

// The Temporal Web UI offers Terminate, Reset and Cancel on every order's
// workflow (docs/design.md §4.9). Each must leave the order final, its unit
// conserved, and every answer the buyer got true.

// purchase buys one unit as user and returns the order id.
func (s *system) purchase(saleID, user string) string {
	s.t.Helper()
	r := s.buy(saleID, user)
	if r.status != http.StatusAccepted {
		s.t.Fatalf("buy as %s: %d %s", user, r.status, r.body)
	}
	var p wire.Purchase
	r.decode(s.t, &p)
	return p.OrderID
}

func (s *system) pay(orderID, user string) response {
	s.t.Helper()
	return s.do("POST", "/v1/orders/"+orderID+"/pay", s.token(user, auth.RoleBuyer), nil)
}

// reconciler is the worker's reconciler over the system's services.
func (s *system) reconciler() *reconcile.Reconciler {
	return &reconcile.Reconciler{Store: s.store, Stock: s.stock, Temporal: s.tc, Events: push.NewPublisher(s.redis), Grace: time.Nanosecond}
}

// endStranded runs the reconciler's stranded pass until it ended order
// (visibility trails a close by moments) and returns how it ended it.
func (s *system) endStranded(orderID string) reconcile.Ending {
	s.t.Helper()
	var got reconcile.Ending
	testenv.Eventually(s.t, time.Minute, func() error {
		ends, err := s.reconciler().Stranded(context.Background())
		if err != nil {
			return err
		}
		for _, e := range ends {
			if fmt.Sprint(e.Ref.OrderID) == orderID {
				got = e
				return nil
			}
		}
		return fmt.Errorf("order %s not ended yet (ended %d others)", orderID, len(ends))
	})
	return got
}

// audited runs the settled audit with Temporal and returns its report.
func (s *system) audited(saleID string, quiescent bool) audit.Report {
	s.t.Helper()
	var id int64
	fmt.Sscan(saleID, &id)
	r, err := audit.Sale(context.Background(), audit.Sources{Store: s.store, Stock: s.stock, Temporal: s.tc}, id,
		audit.Expect{Settled: true, Quiescent: quiescent})
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *system) wantProblem(r response, status int, code string) wire.Problem {
	s.t.Helper()
	if r.status != status {
		s.t.Fatalf("answer %d %s, want %d %s", r.status, r.body, status, code)
	}
	p := r.problem(s.t)
	if p.Code != code {
		s.t.Fatalf("problem code %s (%s), want %s", p.Code, p.Detail, code)
	}
	return p
}

// An order awaiting payment whose workflow an operator terminates: a pay
// meanwhile answers 503 (never the 202 "it will happen"), the audit reports
// the order, the reconciler ends it CANCELLED with its unit back in both
// stores, and a pay afterwards answers 409 with that status.
func TestTerminatedOrderIsEndedByTheReconciler(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "tess")
	s.waitStatus(id, "tess", domain.StatusAwaitingPayment)
	ctx := context.Background()
	if err := s.tc.TerminateWorkflow(ctx, "order-"+id, "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}

	s.wantProblem(s.pay(id, "tess"), http.StatusServiceUnavailable, wire.CodeUnavailable)
	testenv.Eventually(t, time.Minute, func() error {
		if r := s.audited(sale.ID, false); r.Stranded != 1 || r.OK() {
			return fmt.Errorf("audit before the repair: stranded %d, ok %v; want 1 and a violation", r.Stranded, r.OK())
		}
		return nil
	})

	e := s.endStranded(id)
	if e.Status != domain.StatusCancelled || !strings.Contains(e.Reason, "terminated") {
		t.Fatalf("ended %s (%s), want CANCELLED saying it was terminated", e.Status, e.Reason)
	}
	p := s.wantProblem(s.pay(id, "tess"), http.StatusConflict, wire.CodeInvalidState)
	if p.OrderStatus != domain.StatusCancelled {
		t.Fatalf("pay after the repair: order status %s, want CANCELLED", p.OrderStatus)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.Stranded != 0 || r.DBStock != 2 || r.RedisRemaining != 2 {
		t.Fatalf("audit after the repair: %s", r)
	}
	// The unit is back on sale: the same buyer may buy again.
	s.waitStatus(s.purchase(sale.ID, "tess"), "tess", domain.StatusAwaitingPayment)
}

// A pay the workflow accepted, terminated before its MarkPaid committed:
// the buyer was told their payment is on its way (202), so the
// reconciler ends the order PAID.
func TestTerminatedAfterAnAcceptedPayIsPaid(t *testing.T) {
	s := start(t, options{cfg: api.Config{PayWait: time.Millisecond}})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "ugo")
	s.waitStatus(id, "ugo", domain.StatusAwaitingPayment)
	ctx := context.Background()

	// No row may become PAID for now: MarkPaid fails and retries.
	db := s.store.DB()
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders ADD CONSTRAINT hold_payments CHECK (status <> 'PAID') NOT VALID"); err != nil {
		t.Fatal(err)
	}
	if r := s.pay(id, "ugo"); r.status != http.StatusAccepted {
		t.Fatalf("pay while MarkPaid fails: %d %s, want 202", r.status, r.body)
	}
	// Terminated between two attempts: an attempt already running when the
	// workflow is terminated still runs on the worker, and one that wrote
	// after the constraint is gone would mark the order PAID itself.
	s.betweenAttempts(id, "MarkPaid")
	if err := s.tc.TerminateWorkflow(ctx, "order-"+id, "", "stopped mid-pay"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders DROP CONSTRAINT hold_payments"); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.getOrder(id, "ugo"); o.Status != domain.StatusAwaitingPayment {
		t.Fatalf("order is %s before the repair, want AWAITING_PAYMENT", o.Status)
	}

	if e := s.endStranded(id); e.Status != domain.StatusPaid {
		t.Fatalf("ended %s (%s), want PAID: the pay was accepted", e.Status, e.Reason)
	}
	s.waitStatus(id, "ugo", domain.StatusPaid)
	if r := s.pay(id, "ugo"); r.status != http.StatusOK {
		t.Fatalf("pay again: %d %s, want 200", r.status, r.body)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// An order terminated before its workflow placed it (PENDING, no row, the
// unit held in Redis only) gets a CANCELLED row and its Redis unit back.
func TestTerminatedPendingOrderGetsItsRow(t *testing.T) {
	s := start(t, options{temporalDown: true})
	sale := s.createSale(1)
	id := s.purchase(sale.ID, "vera")
	s.temporal.Start() // the relay starts the workflow; no worker runs it
	ctx := context.Background()
	testenv.Eventually(t, time.Minute, func() error {
		_, err := s.tc.DescribeWorkflowExecution(ctx, "order-"+id, "")
		return err
	})
	if err := s.tc.TerminateWorkflow(ctx, "order-"+id, "", "stopped before it ran"); err != nil {
		t.Fatal(err)
	}
	if e := s.endStranded(id); e.Status != domain.StatusCancelled || e.Row != "" {
		t.Fatalf("ended %+v, want CANCELLED from no row", e)
	}
	s.waitStatus(id, "vera", domain.StatusCancelled)
	s.startWorker()
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 || r.RedisRemaining != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// Reset (the Web UI's "reset to first workflow task" or "to last") re-runs
// an order from a point of its history. A reset of an ended order must not
// bring it back to AWAITING_PAYMENT nor take its unit again; a reset of an
// order awaiting payment leaves it payable.
func TestResetOrders(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(3)
	ctx := context.Background()

	cancelled := s.purchase(sale.ID, "wes")
	s.waitStatus(cancelled, "wes", domain.StatusAwaitingPayment)
	if r := s.do("POST", "/v1/orders/"+cancelled+"/cancel", s.token("wes", auth.RoleBuyer), nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	paid := s.purchase(sale.ID, "xia")
	s.waitStatus(paid, "xia", domain.StatusAwaitingPayment)
	if r := s.pay(paid, "xia"); r.status != http.StatusOK {
		t.Fatalf("pay: %d %s", r.status, r.body)
	}
	awaiting := s.purchase(sale.ID, "yan")
	s.waitStatus(awaiting, "yan", domain.StatusAwaitingPayment)

	for _, c := range []struct {
		order, user string
		first       bool
		want        domain.Status
	}{
		{cancelled, "wes", true, domain.StatusCancelled},
		{cancelled, "wes", false, domain.StatusCancelled},
		{paid, "xia", true, domain.StatusPaid},
		{paid, "xia", false, domain.StatusPaid},
		{awaiting, "yan", true, domain.StatusAwaitingPayment},
		{awaiting, "yan", false, domain.StatusAwaitingPayment},
	} {
		s.reset("order-"+c.order, c.first)
		run := s.tc.GetWorkflow(ctx, "order-"+c.order, "")
		if c.want.Final() {
			var st struct{ Status domain.Status }
			if err := run.Get(ctx, &st); err != nil || st.Status != c.want {
				t.Fatalf("reset (first %v) of %s order: run ended %+v, %v; want %s", c.first, c.want, st, err, c.want)
			}
		}
		if o, _ := s.getOrder(c.order, c.user); o.Status != c.want {
			t.Fatalf("reset (first %v): order is %s, want %s", c.first, o.Status, c.want)
		}
	}
	if r := s.pay(awaiting, "yan"); r.status != http.StatusOK {
		t.Fatalf("pay after the resets: %d %s", r.status, r.body)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 || r.RedisRemaining != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// reset resets the workflow's current run to its first or its last
// completed workflow task, as the Web UI's Reset does. An order's row is
// written inside its first workflow task, so the task may still be
// completing when the row shows it: the reset is retried until it can be.
func (s *system) reset(workflowID string, first bool) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		return testenv.ResetWorkflow(context.Background(), s.tc, workflowID, first)
	})
}

// A Reset to the first workflow task of an order whose pay was accepted but
// not yet recorded (the buyer was told 202): the reset run starts by
// placing the order, the server re-delivers the accepted pay to it, and
// the order ends PAID (VersionDeadline accepts a decision while placing).
func TestResetInTheMiddleOfAPayKeepsThePayment(t *testing.T) {
	s := start(t, options{cfg: api.Config{PayWait: time.Millisecond}})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "zoe")
	s.waitStatus(id, "zoe", domain.StatusAwaitingPayment)
	ctx := context.Background()
	db := s.store.DB()
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders ADD CONSTRAINT hold_payments CHECK (status <> 'PAID') NOT VALID"); err != nil {
		t.Fatal(err)
	}
	if r := s.pay(id, "zoe"); r.status != http.StatusAccepted {
		t.Fatalf("pay while MarkPaid fails: %d %s, want 202", r.status, r.body)
	}
	s.reset("order-"+id, true)
	if _, err := db.ExecContext(ctx, "ALTER TABLE orders DROP CONSTRAINT hold_payments"); err != nil {
		t.Fatal(err)
	}
	s.waitStatus(id, "zoe", domain.StatusPaid)
	var st struct{ Status domain.Status }
	if err := s.tc.GetWorkflow(ctx, "order-"+id, "").Get(ctx, &st); err != nil || st.Status != domain.StatusPaid {
		t.Fatalf("the reset run ended %+v, %v; want PAID", st, err)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// A Reset between the payment timer's firing and the row's EXPIRED: the
// reset run knows nothing of the timer (a Reset re-delivers updates, not a
// fired timer), so it gives the order a new payment window and the buyer
// may pay. A pay refused in that gap must therefore not have told the
// buyer EXPIRED: it names the row's status until the row is written.
func TestResetBeforeAnExpiryIsWrittenTellsNoLie(t *testing.T) {
	s := start(t, options{cfg: api.Config{Relay: relay.Options{PaymentTimeout: 5 * time.Second}}})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "ida")
	s.waitStatus(id, "ida", domain.StatusAwaitingPayment)
	ctx := context.Background()
	// The expiry cannot be written (the database refuses it, as if down
	// for that one write): the ending retries, for as long as the test.
	if _, err := s.store.DB().ExecContext(ctx, `
		CREATE FUNCTION hold_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.status = 'EXPIRED' THEN RAISE EXCEPTION 'the test holds expiries'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER hold_expiry BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION hold_expiry();`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(ctx, "order-"+id, "")
		if err != nil {
			return err
		}
		var pending []string
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "EndOrder" { // the ending, retrying the expiry
				return nil
			}
			pending = append(pending, a.GetActivityType().GetName())
		}
		return fmt.Errorf("the payment timer has not fired yet (pending activities %v, status %v)", pending, d.GetWorkflowExecutionInfo().GetStatus())
	})
	refused := s.pay(id, "ida")
	p := s.wantProblem(refused, http.StatusConflict, wire.CodeInvalidState)

	s.reset("order-"+id, true)
	if r := s.pay(id, "ida"); r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("pay in the reset run's payment window: %d %s", r.status, r.body)
	}
	s.waitStatus(id, "ida", domain.StatusPaid)
	if p.OrderStatus.Final() {
		t.Fatalf("the pay refused before the reset said the order is %s (%s); it ended PAID", p.OrderStatus, p.Detail)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}

// betweenAttempts waits until the order's pending activity has failed and
// its next attempt is more than a second away: no attempt of it is
// running, so a Terminate now leaves none that could still write.
func (s *system) betweenAttempts(orderID, activity string) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(context.Background(), "order-"+orderID, "")
		if err != nil {
			return err
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() != activity {
				continue
			}
			if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED && a.GetLastFailure() != nil &&
				time.Until(a.GetNextAttemptScheduleTime().AsTime()) > time.Second {
				return nil
			}
			return fmt.Errorf("%s: attempt %d, %v, next attempt at %v", activity, a.GetAttempt(), a.GetState(), a.GetNextAttemptScheduleTime().AsTime())
		}
		return fmt.Errorf("%s is not pending", activity)
	})
}

// hold makes the database refuse, as if down for them alone, the order
// writes that match cond (on the new row, NEW), until release: whatever
// tries them retries.
func (s *system) hold(name, event, cond string) (release func()) {
	s.t.Helper()
	ctx := context.Background()
	_, err := s.store.DB().ExecContext(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF %[3]s THEN RAISE EXCEPTION 'the test holds this write'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER %[1]s BEFORE %[2]s ON orders FOR EACH ROW EXECUTE FUNCTION %[1]s();`, name, event, cond))
	if err != nil {
		s.t.Fatal(err)
	}
	return func() {
		s.t.Helper()
		if _, err := s.store.DB().ExecContext(ctx, fmt.Sprintf("DROP TRIGGER %[1]s ON orders; DROP FUNCTION %[1]s()", name)); err != nil {
			s.t.Fatal(err)
		}
	}
}

// cancelWorkflow is the Web UI's Cancel on an order's workflow.
func (s *system) cancelWorkflow(orderID string) {
	s.t.Helper()
	if err := s.tc.CancelWorkflow(context.Background(), "order-"+orderID, ""); err != nil {
		s.t.Fatal(err)
	}
}

// The Web UI's Cancel on an order awaiting payment and on one whose pay
// was accepted but not recorded yet: the first ends CANCELLED with its
// unit back on sale and a later pay refused as CANCELLED; the second
// ends PAID, as its buyer was told (an accepted payment is final).
func TestWebUICancel(t *testing.T) {
	s := start(t, options{cfg: api.Config{PayWait: time.Millisecond}})
	sale := s.createSale(3)

	awaiting := s.purchase(sale.ID, "cy")
	s.waitStatus(awaiting, "cy", domain.StatusAwaitingPayment)
	s.cancelWorkflow(awaiting)
	s.waitStatus(awaiting, "cy", domain.StatusCancelled)
	p := s.wantProblem(s.pay(awaiting, "cy"), http.StatusConflict, wire.CodeInvalidState)
	if p.OrderStatus != domain.StatusCancelled {
		t.Fatalf("pay after the Web UI's Cancel names %s, want CANCELLED", p.OrderStatus)
	}

	paying := s.purchase(sale.ID, "di")
	s.waitStatus(paying, "di", domain.StatusAwaitingPayment)
	release := s.hold("hold_payment", "UPDATE", "NEW.status = 'PAID'")
	if r := s.pay(paying, "di"); r.status != http.StatusAccepted {
		t.Fatalf("pay while the payment cannot be written: %d %s, want 202", r.status, r.body)
	}
	s.cancelWorkflow(paying)
	release()
	s.waitStatus(paying, "di", domain.StatusPaid)
	// The row is PAID when MarkPaid commits; the workflow closes in the
	// task after it, and the audit wants no workflow running.
	s.waitClosed("order-" + paying)

	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 2 || r.RedisRemaining != 2 {
		t.Fatalf("audit (want 2 units left: the cancelled one back): %s", r)
	}
}

// The Web UI's Cancel and Reset on PENDING orders, whose workflow is still
// placing them (the database refuses the row for now): the cancelled one
// ends CANCELLED with a row and its unit back; the reset one is placed by
// the new run once the database takes it, and its buyer pays.
func TestWebUIActionsOnAPendingOrder(t *testing.T) {
	s := start(t, options{})
	sale := s.createSale(3)
	release := s.hold("hold_rows", "INSERT", "NEW.status = 'AWAITING_PAYMENT'")
	cancelled := s.purchase(sale.ID, "ed")
	reset := s.purchase(sale.ID, "flo")
	for _, id := range []string{cancelled, reset} {
		testenv.Eventually(t, time.Minute, func() error {
			_, err := s.tc.DescribeWorkflowExecution(context.Background(), "order-"+id, "")
			return err
		})
	}
	s.cancelWorkflow(cancelled)
	s.reset("order-"+reset, true)
	if o, _ := s.getOrder(reset, "flo"); o.Status != domain.StatusPending {
		t.Fatalf("the reset order is %s while the database refuses its row, want PENDING", o.Status)
	}
	release()

	s.waitStatus(cancelled, "ed", domain.StatusCancelled)
	if p := s.wantProblem(s.pay(cancelled, "ed"), http.StatusConflict, wire.CodeInvalidState); p.OrderStatus != domain.StatusCancelled {
		t.Fatalf("pay of the cancelled PENDING order names %s, want CANCELLED", p.OrderStatus)
	}
	s.waitStatus(reset, "flo", domain.StatusAwaitingPayment)
	if r := s.pay(reset, "flo"); r.status != http.StatusOK {
		t.Fatalf("pay of the reset order: %d %s", r.status, r.body)
	}
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 2 || r.RedisRemaining != 2 {
		t.Fatalf("audit (want 2 units left: the cancelled one back): %s", r)
	}
}

// A pay accepted (202) and not recorded, then the Web UI's Reset, and the
// reset run terminated before it took up the pay the Reset gave it again
// (no worker is running): the reconciler reads that re-delivered pay in the
// closed run's history and ends the order PAID, as its buyer was told.
func TestTerminatedResetRunKeepsTheAcceptedPay(t *testing.T) {
	s := start(t, options{cfg: api.Config{PayWait: time.Millisecond}})
	sale := s.createSale(2)
	id := s.purchase(sale.ID, "gus")
	s.waitStatus(id, "gus", domain.StatusAwaitingPayment)
	release := s.hold("hold_payment", "UPDATE", "NEW.status = 'PAID'")
	if r := s.pay(id, "gus"); r.status != http.StatusAccepted {
		t.Fatalf("pay while the payment cannot be written: %d %s, want 202", r.status, r.body)
	}
	s.stopW()
	s.reset("order-"+id, true)
	if err := s.tc.TerminateWorkflow(context.Background(), "order-"+id, "", "stopped from the Web UI"); err != nil {
		t.Fatal(err)
	}
	release()
	if e := s.endStranded(id); e.Status != domain.StatusPaid {
		t.Fatalf("the reconciler ended the order %s (%s), want PAID: its pay was accepted", e.Status, e.Reason)
	}
	s.waitStatus(id, "gus", domain.StatusPaid)
	if r := s.audited(sale.ID, true); !r.OK() || r.DBStock != 1 {
		t.Fatalf("audit: %s", r)
	}
}
