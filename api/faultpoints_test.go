package api_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/workflows"
)

// The fault points (fault.Points, docs/reliability.md): every write of the
// purchase, relay, warm-up, operator, reconciler, retirement, engine probe
// and payment notification paths gets two cases here, against real
// Postgres, Redis and Temporal: the write applied and its caller told it failed (mode
// "error"), and the component stopped right after it (mode "stop": its
// goroutine ends there, as in a crash; a new api instance or reconciler
// pass takes over). Each case heals, settles every order it made and ends
// with the invariant check and the per-answer check: every answer a caller
// got agrees with how its order or sale ended (for a probe: its answer
// says what stopped it, and it leaves nothing open).

type mode string

const (
	modeError mode = "error"
	modeStop  mode = "stop"
)

// arm arms p for the case's mode: one injected error, or one stop.
// stopped is closed when the stop has happened.
func arm(t *testing.T, p fault.Point, m mode) (stopped chan struct{}) {
	t.Helper()
	stopped = make(chan struct{})
	a := fault.Fail(1)
	if m == modeStop {
		a = fault.Stop(1, stopped)
	} else {
		close(stopped)
	}
	t.Cleanup(fault.Arm(p, a))
	return stopped
}

// hit waits until the armed point has been reached.
func hit(t *testing.T, p fault.Point, before int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		if fault.Hits(p) <= before {
			return fmt.Errorf("%s not reached yet", p)
		}
		return nil
	})
}

// inGoroutine runs f where a stop can end it without ending the test.
func inGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// ledger is what callers were told, for the per-answer check.
type ledger struct {
	purchases   map[string]string // order id → buyer, for every 202
	refused     map[string]bool   // buyers answered 503 to a purchase: no order, or the one a retry finds
	unconfirmed map[string]string // buyers answered 503 UNCONFIRMED → the order id it named
}

func newLedger() *ledger {
	return &ledger{purchases: map[string]string{}, refused: map[string]bool{}, unconfirmed: map[string]string{}}
}

var apiNodes atomic.Int64

// newAPI replaces the api: the one serving now is stopped whole (its
// relays, reconciler and listeners end, as with its process), another
// instance starts over the same services, and the test's requests go to
// it from now on. Stopped apis do not linger: twenty of them polling
// Redis and Temporal starved CI's busy cores until a run timed out. A
// system with the built-in provider gets its api back at the same
// address, as a restarted process keeps its public URL: the provider
// sends its notifications there, and the worker calls the provider there.
func (s *system) newAPI(cfg api.Config) {
	s.t.Helper()
	if s.stopAPI != nil {
		s.stopAPI()
	}
	node := 100 + int(apiNodes.Add(1))
	deps := api.Deps{Store: s.store, Stock: s.stock, Temporal: s.tc, Signer: s.signer, IDs: orderid.New(node)}
	hs := httptest.NewUnstartedServer(nil)
	if s.payService != nil {
		cfg.PaymentProvider, cfg.PayReturnURL = builtin.Name, s.url+"/"
		deps.Payments, deps.BuiltinPay = s.payments, s.payService
		hs.Listener.Close()
		l, err := net.Listen("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			s.t.Fatalf("the api again at %s: %v", s.url, err)
		}
		hs.Listener = l
		// Kept-alive connections went to the stopped api.
		http.DefaultClient.CloseIdleConnections()
	}
	srv := api.New(cfg, deps)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Run(ctx); close(done) }()
	hs.Config.Handler = srv.Handler()
	hs.Start()
	s.stopAPI = sync.OnceFunc(func() { hs.Close(); cancel(); <-done })
	s.t.Cleanup(s.stopAPI)
	s.srv, s.url = srv, hs.URL
}

// buyWith buys with an Idempotency-Key; a stopped handler drops the
// connection, which is answered here as status 0.
func (s *system) buyWith(saleID, user, key string) response {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.url+"/v1/sales/"+saleID+"/orders", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token(user, auth.RoleBuyer))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{status: 0}
	}
	defer resp.Body.Close()
	return readResponse(resp)
}

// sold buys one unit as user, retrying with the same key until an answer
// comes (a stop or an injected error answers first), and records it.
func (s *system) sold(l *ledger, saleID, user string) string {
	s.t.Helper()
	key := "k-" + user
	r := s.buyWith(saleID, user, key)
	if r.status != http.StatusAccepted {
		if r.status != 0 {
			// UNAVAILABLE: nothing changed. UNCONFIRMED: the purchase may
			// have been taken, under the order id it names.
			if p := r.problem(s.t); r.status != http.StatusServiceUnavailable || p.Code != wire.CodeUnavailable && p.Code != wire.CodeUnconfirmed {
				s.t.Fatalf("answer %d %s, want 503 UNAVAILABLE or UNCONFIRMED", r.status, r.body)
			} else if p.Code == wire.CodeUnconfirmed {
				l.unconfirmed[user] = p.OrderID
			}
		}
		l.refused[user] = true
		// Retried with the same key until answered: a stopped warm-up holds
		// the sale's lock until it expires, meanwhile purchases answer 503.
		testenv.Eventually(s.t, time.Minute, func() error {
			if r = s.buyWith(saleID, user, key); r.status != http.StatusAccepted {
				return fmt.Errorf("buy as %s: %d %s", user, r.status, r.body)
			}
			return nil
		})
	}
	var p wire.Purchase
	r.decode(s.t, &p)
	if named, ok := l.unconfirmed[user]; ok && named != p.OrderID {
		s.t.Fatalf("%s was told UNCONFIRMED for order %s, and the retry found order %s", user, named, p.OrderID)
	}
	l.purchases[p.OrderID] = user
	return p.OrderID
}

// settle ends every order of the ledger (a cancel for those awaiting
// payment) and runs the checks: each 202 has a final row, each buyer told
// 503 holds at most the order a retry found, and the sale's invariants
// hold with no workflow running.
func (s *system) settle(l *ledger, saleID string) {
	s.t.Helper()
	for id, user := range l.purchases {
		testenv.Eventually(s.t, 2*time.Minute, func() error {
			o, r := s.getOrder(id, user)
			switch {
			case r.status != http.StatusOK:
				return fmt.Errorf("order %s: %d", id, r.status)
			case o.Status == domain.StatusPending:
				return fmt.Errorf("order %s still pending", id)
			case o.Status == domain.StatusAwaitingPayment:
				c := s.do("POST", "/v1/orders/"+id+"/cancel", s.token(user, auth.RoleBuyer), nil)
				return fmt.Errorf("order %s cancelled now: %d", id, c.status)
			case !o.Status.Final():
				return fmt.Errorf("order %s is %s", id, o.Status)
			}
			return nil
		})
	}
	var sale int64
	fmt.Sscan(saleID, &sale)
	ctx := context.Background()
	rows, err := s.store.Client().Order.Query().All(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, o := range rows {
		if o.SaleID != sale {
			continue
		}
		id := strconv.FormatInt(o.ID, 10)
		if _, told := l.purchases[id]; !told {
			s.t.Errorf("order %s of %s has a row, but no buyer was answered 202 for it", id, o.UserID)
		}
	}
	testenv.Eventually(s.t, time.Minute, func() error {
		rc := s.reconciler()
		if _, err := rc.Stranded(ctx); err != nil {
			return err
		}
		if _, err := rc.All(ctx); err != nil {
			return err
		}
		if r := s.audited(saleID, true); !r.OK() {
			return errors.New(r.String())
		}
		return nil
	})
}

// openSale creates a sale of units over the API, loaded into Redis.
func (s *system) openSale(units int) string { return s.createSale(units).ID }

// unloadedSale creates a sale in the database only, as if its warm-up had
// never run.
func (s *system) unloadedSale(units int) string {
	s.t.Helper()
	sl, err := s.store.CreateSale(context.Background(), store.NewSale{Name: "cold", PriceCents: 100, Stock: units,
		StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		s.t.Fatal(err)
	}
	return strconv.FormatInt(sl.ID, 10)
}

func (s *system) operator(path string, body any) response {
	s.t.Helper()
	return s.do("POST", path, s.token("ops", auth.RoleAdmin), body)
}

// operatorTold checks an operator's answer under a fault: the change, or
// a 503 that says the database has it (error), or no answer (stop).
func (s *system) operatorTold(r response, m mode, ok int) {
	s.t.Helper()
	switch {
	case m == modeStop && r.status == 0:
	case r.status == ok:
	case r.status == http.StatusServiceUnavailable:
		if p := r.problem(s.t); !strings.Contains(p.Detail, "database") {
			s.t.Fatalf("a 503 after the database committed must say so: %q", p.Detail)
		}
	default:
		s.t.Fatalf("operator answer %d %s", r.status, r.body)
	}
}

// operatorDo is operator that answers a dropped connection (the handler
// stopped at a point) as status 0.
func (s *system) operatorDo(path string, body any) response {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest("POST", s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token("ops", auth.RoleAdmin))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}
	}
	defer resp.Body.Close()
	return readResponse(resp)
}

func readResponse(resp *http.Response) response {
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// faultCase drives a path to its point under mode m, heals and settles.
type faultCase func(t *testing.T, s *system, m mode, cfg api.Config)

var faultCases = map[fault.Point]faultCase{
	fault.PurchaseReserve: func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(3), newLedger()
		before := fault.Hits(fault.PurchaseReserve)
		arm(t, fault.PurchaseReserve, m)
		// Answered 503 or dropped, then found by the retry. Go's client
		// itself replays a request with an Idempotency-Key whose
		// connection dropped, as a buyer's app would.
		s.sold(l, sale, "pia")
		if m == modeError && !l.refused["pia"] || fault.Hits(fault.PurchaseReserve) < before+2 {
			t.Fatalf("the armed point did not fail the purchase (refused %v, hits %d)", l.refused["pia"], fault.Hits(fault.PurchaseReserve)-before)
		}
		// The reservation ran before the point: the answer must not say
		// that nothing changed.
		if m == modeError && l.unconfirmed["pia"] == "" {
			t.Fatalf("the purchase that failed after its reservation was not answered UNCONFIRMED with its order")
		}
		s.settle(l, sale)
	},
	fault.RelayStart: func(t *testing.T, s *system, m mode, cfg api.Config) {
		sale, l := s.openSale(3), newLedger()
		before := fault.Hits(fault.RelayStart)
		arm(t, fault.RelayStart, m)
		id := s.sold(l, sale, "ray")
		hit(t, fault.RelayStart, before)
		s.waitStatus(id, "ray", domain.StatusAwaitingPayment) // reclaimed, found started, acknowledged
		s.settle(l, sale)
	},
	fault.RelayAck: func(t *testing.T, s *system, m mode, cfg api.Config) {
		sale, l := s.openSale(3), newLedger()
		before := fault.Hits(fault.RelayAck)
		stopped := arm(t, fault.RelayAck, m)
		id := s.sold(l, sale, "ada")
		hit(t, fault.RelayAck, before)
		<-stopped
		if m == modeStop {
			s.newAPI(cfg) // the stopped relay's api is gone
		}
		s.waitStatus(id, "ada", domain.StatusAwaitingPayment)
		s.settle(l, sale)
	},
	fault.RelayFenced:         fencedCase,
	fault.WarmList:            warmCase(fault.WarmList),
	fault.WarmLoad:            warmCase(fault.WarmLoad),
	fault.OperatorEndDB:       endCase(fault.OperatorEndDB, "end"),
	fault.OperatorEndRedis:    endCase(fault.OperatorEndRedis, "end"),
	fault.OperatorCancelDB:    endCase(fault.OperatorCancelDB, "cancel"),
	fault.OperatorCancelRedis: endCase(fault.OperatorCancelRedis, "cancel"),
	fault.OperatorAddDB:       addCase(fault.OperatorAddDB),
	fault.OperatorAddRedis:    addCase(fault.OperatorAddRedis),
	fault.OperatorCancelOrder: func(t *testing.T, s *system, m mode, cfg api.Config) {
		sale, l := s.openSale(3), newLedger()
		id := s.sold(l, sale, "cy")
		s.waitStatus(id, "cy", domain.StatusAwaitingPayment)
		before := fault.Hits(fault.OperatorCancelOrder)
		arm(t, fault.OperatorCancelOrder, m)
		s.operatorTold(s.operatorDo("/v1/sales/"+sale+"/cancel", nil), m, http.StatusAccepted)
		hit(t, fault.OperatorCancelOrder, before)
		s.waitStatus(id, "cy", domain.StatusCancelled) // the next round sends it again
		s.settle(l, sale)
	},
	fault.ReconcileList: reconcileCase(fault.ReconcileList, func(t *testing.T, s *system, sale int64) {}),
	fault.ReconcileRebuild: reconcileCase(fault.ReconcileRebuild, func(t *testing.T, s *system, sale int64) {
		if err := s.redis.FlushDB(context.Background()).Err(); err != nil { // Redis restarted empty
			t.Fatal(err)
		}
	}),
	fault.ReconcileRepair: reconcileCase(fault.ReconcileRepair, func(t *testing.T, s *system, sale int64) {
		if err := s.redis.Set(context.Background(), "seckill:{sale:"+strconv.FormatInt(sale, 10)+"}:stock", 0, 0).Err(); err != nil { // a count that drifted
			t.Fatal(err)
		}
	}),
	fault.ReconcileMirror: func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(3), newLedger()
		s.sold(l, sale, "mo")
		var id int64
		fmt.Sscan(sale, &id)
		if _, _, err := s.store.EndSale(context.Background(), id, time.Now()); err != nil { // the operator's Redis step was lost
			t.Fatal(err)
		}
		arm(t, fault.ReconcileMirror, m)
		inGoroutine(func() { _ = s.reconciler().Mirror(context.Background()) })
		if err := s.reconciler().Mirror(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.wantProblem(s.buy(sale, "late"), http.StatusConflict, wire.CodeEnded)
		s.settle(l, sale)
	},
	fault.StrandedFinish:  strandedCase(fault.StrandedFinish),
	fault.StrandedRestore: strandedCase(fault.StrandedRestore),
	fault.StrandedRelease: strandedCase(fault.StrandedRelease),
	fault.AdmissionsRemembered: func(t *testing.T, s *system, m mode, _ api.Config) {
		ctx := context.Background()
		sale, l := s.openSale(3), newLedger()
		var sid int64
		fmt.Sscan(sale, &sid)
		// The database refuses mem's row for now: the relay starts the
		// order, its saga retries PlaceOrder, and a pass finds mem in Redis
		// without a row.
		release := sync.OnceFunc(s.hold("hold_mem", "INSERT", "NEW.user_id = 'mem'"))
		t.Cleanup(release)
		id := s.sold(l, sale, "mem")
		rc := s.reconciler()
		before := fault.Hits(fault.AdmissionsRemembered)
		arm(t, fault.AdmissionsRemembered, m)
		inGoroutine(func() { _, _ = rc.Sale(ctx, sid) })
		if fault.Hits(fault.AdmissionsRemembered) == before {
			t.Fatalf("the pass did not reach %s", fault.AdmissionsRemembered)
		}
		// The next pass remembers mem again, writing no second record, and
		// calls nothing lost: Redis holds mem.
		if rep := nextPass(t, rc, sid); rep.Remembered != 1 || rep.LostAdmissions != 0 {
			t.Fatalf("the next pass: %+v; want mem remembered again, nothing lost", rep)
		}
		got, err := s.store.UnplacedAdmissions(ctx, sid)
		if err != nil || len(got) != 1 || strconv.FormatInt(got[0].OrderID, 10) != id || !got[0].LostAt.IsZero() {
			t.Fatalf("remembered %+v %v; want mem's order %s once, not lost", got, err, id)
		}
		release()
		s.waitStatus(id, "mem", domain.StatusAwaitingPayment)
		if rep, err := rc.Sale(ctx, sid); err != nil || rep.Remembered != 0 || rep.LostAdmissions != 0 {
			t.Fatalf("the pass after its row: %+v %v; want nothing remembered or lost", rep, err)
		}
		s.settle(l, sale)
	},
	fault.AdmissionLost:          lostCase(fault.AdmissionLost),
	fault.AdmissionReadmitted:    lostCase(fault.AdmissionReadmitted),
	fault.AdmissionRecovered:     lostCase(fault.AdmissionRecovered),
	fault.RetireKeys:             retireCase(fault.RetireKeys),
	fault.RetireUnlist:           retireCase(fault.RetireUnlist),
	fault.ProbeLock:              probeCase(fault.ProbeLock),
	fault.ProbeJobs:              probeCase(fault.ProbeJobs),
	fault.ProbeTake:              probeCase(fault.ProbeTake),
	fault.ProbeStart:             probeCase(fault.ProbeStart),
	fault.ProbeDelete:            probeCase(fault.ProbeDelete),
	fault.PaymentSignal:          paySignalCase,
	fault.PaymentSettle:          paySettleCase,
	fault.ReconcilePaymentSettle: payReconcileCase,
}

// paySignalCase: a buyer pays at the built-in provider; its capture's
// notification is signalled to the order's workflow, and the api fails or
// stops right after. The provider sends it again until it gets a 2xx: the
// order is PAID by that payment once, and nothing is refunded.
func paySignalCase(t *testing.T, s *system, m mode, cfg api.Config) {
	sale, l := s.openSale(3), newLedger()
	id := s.sold(l, sale, "pat")
	s.waitStatus(id, "pat", domain.StatusAwaitingPayment)
	pay := s.startPayment(id, "pat")
	before := fault.Hits(fault.PaymentSignal)
	stopped := arm(t, fault.PaymentSignal, m)
	if status, _ := s.submitCheckout(pay.RedirectURL, "pay"); status != http.StatusSeeOther {
		t.Fatalf("pay on the hosted page: %d, want 303", status)
	}
	hit(t, fault.PaymentSignal, before)
	<-stopped
	stoppedAt := time.Now()
	if m == modeStop {
		s.newAPI(cfg) // the stopped api's process is gone; the provider's next attempt reaches its successor
	}
	s.waitStatus(id, "pat", domain.StatusPaid)
	s.sentAgain(pay.ID, m, stoppedAt)
	got, _ := s.getOrder(id, "pat")
	if got.PaymentID != pay.ID || got.RefundedAt != nil {
		t.Fatalf("order paid by %q, refunded at %v; want paid by %s, no refund", got.PaymentID, got.RefundedAt, pay.ID)
	}
	// A repeat that came after the order's workflow closed was settled by
	// the payment's own workflow, which keeps the capture that paid.
	ctx := context.Background()
	var did workflows.Settlement
	if err := s.tc.GetWorkflow(ctx, workflows.SettleWorkflowID(builtin.Name, pay.ID), "").Get(ctx, &did); err == nil && did != workflows.SettleKept {
		t.Fatalf("the repeat's settle workflow did %q, want kept", did)
	}
	if n := s.refunds(pay.ID); n != 0 || s.paymentState(pay.ID) != "captured" {
		t.Fatalf("payment %s: %d refunds, %s at the provider; want none, captured", pay.ID, n, s.paymentState(pay.ID))
	}
	s.settle(l, sale)
}

// paySettleCase: a capture comes after its order was cancelled and its
// workflow closed; the api starts the payment's PaymentSettleWorkflow and
// fails or stops right after. The provider sends the capture again, the
// start finds the workflow started, and the capture is refunded once.
func paySettleCase(t *testing.T, s *system, m mode, cfg api.Config) {
	ctx := context.Background()
	sale, l, id, pay := s.cancelledWithPayment("lia")
	before := fault.Hits(fault.PaymentSettle)
	stopped := arm(t, fault.PaymentSettle, m)
	if _, err := s.payService.CaptureLate(ctx, pay.ID); err != nil {
		t.Fatal(err)
	}
	hit(t, fault.PaymentSettle, before)
	<-stopped
	stoppedAt := time.Now()
	if m == modeStop {
		s.newAPI(cfg)
	}
	s.waitRefunded(id, "lia", domain.StatusCancelled, "late: the order had ended CANCELLED")
	var did workflows.Settlement
	if err := s.tc.GetWorkflow(ctx, workflows.SettleWorkflowID(builtin.Name, pay.ID), "").Get(ctx, &did); err != nil || did != workflows.SettleRefunded {
		t.Fatalf("settle workflow: %q, %v; want refunded", did, err)
	}
	s.sentAgain(pay.ID, m, stoppedAt)
	s.checkOneRefund(pay.ID)
	s.settle(l, sale)
}

// cancelledWithPayment sells user an order of a new sale, starts its
// payment at the provider, cancels it and waits until its workflow has
// closed: a capture of that payment now comes late.
func (s *system) cancelledWithPayment(user string) (sale string, l *ledger, id string, pay *wire.PaymentAction) {
	s.t.Helper()
	sale, l = s.openSale(3), newLedger()
	id = s.sold(l, sale, user)
	s.waitStatus(id, user, domain.StatusAwaitingPayment)
	pay = s.startPayment(id, user)
	if r := s.do("POST", "/v1/orders/"+id+"/cancel", s.token(user, auth.RoleBuyer), nil); r.status != http.StatusOK {
		s.t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	s.waitClosed("order-" + id)
	return sale, l, id, pay
}

// payReconcileCase: a capture comes after its order was cancelled and its
// workflow closed, and its notification is held at the provider; the
// reconciliation's pass starts the payment's PaymentSettleWorkflow and
// fails or stops right after. The workflow refunds the capture, the next
// pass finds it settled and starts nothing, and the notification, let go,
// finds the workflow too: one settlement, one refund.
func payReconcileCase(t *testing.T, s *system, m mode, _ api.Config) {
	ctx := context.Background()
	sale, l, id, pay := s.cancelledWithPayment("rex")
	if err := s.payService.SetControls(builtin.Controls{NotifyHold: true}); err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { _ = s.payService.SetControls(builtin.Controls{}) })
	t.Cleanup(release)
	if _, err := s.payService.CaptureLate(ctx, pay.ID); err != nil {
		t.Fatal(err)
	}
	rc := &reconcile.Reconciler{Store: s.store, Stock: s.stock, Temporal: s.tc, Providers: s.payments, SettleMargin: time.Nanosecond}
	before := fault.Hits(fault.ReconcilePaymentSettle)
	arm(t, fault.ReconcilePaymentSettle, m)
	inGoroutine(func() { _, _ = rc.Payments(ctx) })
	hit(t, fault.ReconcilePaymentSettle, before)
	s.waitRefunded(id, "rex", domain.StatusCancelled, "late: the order had ended CANCELLED")
	reps, err := rc.Payments(ctx)
	for _, r := range reps {
		for _, f := range r.Settling {
			err = errors.Join(err, fmt.Errorf("the next pass started %s's settle workflow again", f.PaymentID))
		}
	}
	if err != nil {
		t.Fatalf("the next pass: %v", err)
	}
	release()
	s.delivered(pay.ID, "payment.captured")
	var did workflows.Settlement
	if err := s.tc.GetWorkflow(ctx, workflows.SettleWorkflowID(builtin.Name, pay.ID), "").Get(ctx, &did); err != nil || did != workflows.SettleRefunded {
		t.Fatalf("settle workflow: %q, %v; want refunded", did, err)
	}
	s.checkOneRefund(pay.ID)
	s.settle(l, sale)
}

// delivered waits until the built-in provider has delivered payment id's
// notification of type typ, and returns the attempts it took.
func (s *system) delivered(id, typ string) (attempts int, at time.Time) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		var micros sql.NullInt64
		err := s.store.DB().QueryRowContext(context.Background(), `SELECT attempts, delivered_at FROM builtinpay_events
			WHERE payment_id = $1 AND type = $2`, id, typ).Scan(&attempts, &micros)
		switch {
		case err != nil:
			return err
		case !micros.Valid:
			return fmt.Errorf("%s of %s not delivered yet (%d attempts)", typ, id, attempts)
		}
		at = time.UnixMicro(micros.Int64)
		return nil
	})
	return attempts, at
}

// sentAgain checks that payment id's capture notification was delivered
// again after the fault at stoppedAt. An error answered 503: a failed
// attempt the provider counts. A stop took the built-in provider's sender
// with its api (it runs in the api's process), and a sender stopped in
// the middle of a send does not count that attempt: the successor's sender
// delivers it, after the stop.
func (s *system) sentAgain(id string, m mode, stoppedAt time.Time) {
	s.t.Helper()
	attempts, at := s.delivered(id, "payment.captured")
	if (m == modeError && attempts < 2) || at.Before(stoppedAt) {
		s.t.Fatalf("the capture's notification was delivered at attempt %d, at %s (the fault at %s); want it sent again after the fault",
			attempts, at.Format(time.RFC3339Nano), stoppedAt.Format(time.RFC3339Nano))
	}
}

// refunds counts payment id's refunds at the built-in provider.
func (s *system) refunds(id string) int {
	s.t.Helper()
	var n int
	if err := s.store.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM builtinpay_refunds WHERE payment_id = $1`, id).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// waitClosed waits until the workflow's current run has closed.
func (s *system) waitClosed(workflowID string) {
	s.t.Helper()
	testenv.Eventually(s.t, time.Minute, func() error {
		d, err := s.tc.DescribeWorkflowExecution(context.Background(), workflowID, "")
		if err != nil {
			return err
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("%s still running", workflowID)
		}
		return nil
	})
}

// probeCase: an engine probe meets the fault at p. Whatever it answered,
// the answer says what happened (a 503 names the cause; a stalled probe
// answers long before its deadline), the deployment's lock comes free, the
// next probe measures, no probe workflow is left open and no job is left
// for a relay.
func probeCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, cfg api.Config) {
		const n = 2 * relay.ProbeChunk
		probe := func() response { return s.operatorDo("/v1/admin/engine-probe", map[string]any{"workflows": n}) }
		before := fault.Hits(p)
		arm(t, p, m)
		r := probe()
		if fault.Hits(p) == before {
			t.Fatalf("the probe did not reach %s", p)
		}
		switch {
		case p == fault.ProbeStart && m == modeStop:
			// Only that start's goroutine ends; the workflow was started.
			if r.status != http.StatusOK {
				t.Fatalf("probe with one start stopped after it: %d %s, want 200", r.status, r.body)
			}
		case p == fault.ProbeDelete:
			// The probe had measured: its answer stands, and counts a
			// deletion told failed as undeleted (a stop ends only that
			// deletion's goroutine, counted neither way). An earlier
			// case's probe left workflows the sweep may delete too.
			var got wire.EngineProbe
			if r.status == http.StatusOK {
				r.decode(t, &got)
			}
			want := map[mode]int{modeError: 1, modeStop: 0}[m]
			if r.status != http.StatusOK || got.Workflows != n || got.Undeleted != want || got.Deleted < n-1 {
				t.Fatalf("probe with a deletion %s: %d %s, want 200 with at least %d deleted and %d undeleted", m, r.status, r.body, n-1, want)
			}
		case m == modeStop && (p == fault.ProbeLock || p == fault.ProbeJobs):
			if r.status != 0 {
				t.Fatalf("probe stopped at %s answered %d %s", p, r.status, r.body)
			}
			if p == fault.ProbeLock { // the dead probe's lock holds until it expires
				again := probe()
				if pr := again.problem(t); again.status != http.StatusServiceUnavailable || !strings.Contains(pr.Detail, "probe is running") || again.header.Get("Retry-After") == "" {
					t.Fatalf("probe while a dead one holds the lock: %d %s, want 503 with Retry-After", again.status, again.body)
				}
			}
		default:
			pr := s.wantProblem(r, http.StatusServiceUnavailable, wire.CodeUnavailable)
			if strings.Contains(pr.Detail, "did not finish") {
				t.Fatalf("the probe waited for its deadline instead of saying what stopped it: %s", pr.Detail)
			}
			t.Logf("answered: %s", pr.Detail)
		}
		if p == fault.ProbeTake && m == modeStop {
			s.newAPI(cfg) // a relay whose probe loop is alive
		}
		testenv.Eventually(t, time.Minute, func() error {
			if r := probe(); r.status != http.StatusOK {
				return fmt.Errorf("the next probe: %d %s", r.status, r.body)
			}
			return nil
		})
		testenv.Eventually(t, time.Minute, func() error {
			if running, err := s.probeWorkflows("Running"); err != nil || running != 0 {
				return fmt.Errorf("%d probe workflows still running (%v)", running, err)
			}
			return nil
		})
		if left, err := s.redis.LLen(context.Background(), "seckill:engine-probe:jobs").Result(); err != nil || left != 0 {
			t.Fatalf("%d probe jobs left for the relays (%v)", left, err)
		}
	}
}

// warmCase: a purchase finds its sale not loaded and warms it.
func warmCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.unloadedSale(3), newLedger()
		arm(t, p, m)
		s.sold(l, sale, "wu")
		s.sold(l, sale, "wei")
		s.settle(l, sale)
	}
}

// endCase: an operator ends or cancels a sale with an order awaiting
// payment; afterwards nobody is admitted, the order ends as its sale
// says, and the heal is the reconciler's mirror (and, for a cancel, the
// new api's rescan).
func endCase(p fault.Point, what string) faultCase {
	return func(t *testing.T, s *system, m mode, cfg api.Config) {
		sale, l := s.openSale(3), newLedger()
		id := s.sold(l, sale, "eve")
		s.waitStatus(id, "eve", domain.StatusAwaitingPayment)
		arm(t, p, m)
		want := http.StatusOK
		if what == "cancel" {
			want = http.StatusAccepted
		}
		s.operatorTold(s.operatorDo("/v1/sales/"+sale+"/"+what, nil), m, want)
		// A stopped operator holds the sale's lock until it expires.
		testenv.Eventually(t, time.Minute, func() error { return s.reconciler().Mirror(context.Background()) })
		if what == "cancel" {
			s.newAPI(cfg) // resumes the cancellation on start
			s.waitStatus(id, "eve", domain.StatusCancelled)
		}
		s.wantProblem(s.buy(sale, "late"), http.StatusConflict, wire.CodeEnded)
		s.settle(l, sale)
	}
}

// addCase: an operator adds units to a sold-out sale; the reconciler
// raises Redis to the database's count, and the units are sold.
func addCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(1), newLedger()
		s.waitStatus(s.sold(l, sale, "al"), "al", domain.StatusAwaitingPayment)
		arm(t, p, m)
		s.operatorTold(s.operatorDo("/v1/sales/"+sale+"/units", map[string]any{"units": 2}), m, http.StatusOK)
		var id int64
		fmt.Sscan(sale, &id)
		// A stopped operator holds the sale's lock until it expires.
		testenv.Eventually(t, time.Minute, func() error {
			_, err := s.reconciler().Sale(context.Background(), id)
			return err
		})
		s.sold(l, sale, "bea")
		s.sold(l, sale, "cal")
		s.settle(l, sale)
	}
}

// reconcileCase: a reconciler pass over a sale with an order, after
// prepare damaged its Redis state; the next pass finishes the repair.
func reconcileCase(p fault.Point, prepare func(t *testing.T, s *system, sale int64)) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(3), newLedger()
		s.waitStatus(s.sold(l, sale, "rex"), "rex", domain.StatusAwaitingPayment)
		var id int64
		fmt.Sscan(sale, &id)
		prepare(t, s, id)
		before := fault.Hits(p)
		arm(t, p, m)
		inGoroutine(func() { _, _ = s.reconciler().Sale(context.Background(), id) })
		if fault.Hits(p) == before {
			t.Fatalf("the pass did not reach %s", p)
		}
		s.settle(l, sale)
	}
}

// lostCase: a purchase answered 202 and remembered by a pass is lost with
// its sale's keys before its workflow started (Redis restarted empty). A
// pass finds it lost and admits it again under its order id, meeting the
// fault at p; the next pass (a restarted reconciler) finishes what the
// first left, and the order is placed once.
func lostCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		ctx := context.Background()
		sale, l := s.unloadedSale(3), newLedger()
		var sid int64
		fmt.Sscan(sale, &sid)
		order := orderid.FirstAt(time.Now())
		if err := s.store.RememberAdmissions(ctx, sid, []store.Buyer{{UserID: "lou", OrderID: order}}, false); err != nil {
			t.Fatal(err)
		}
		id := strconv.FormatInt(order, 10)
		l.purchases[id] = "lou"
		pass := func() *reconcile.Reconciler {
			rc := s.reconciler()
			rc.LostAfter = -1 // no relay holds its intent: Redis lost it
			return rc
		}
		before := fault.Hits(p)
		arm(t, p, m)
		inGoroutine(func() { _, _ = pass().Sale(ctx, sid) })
		if fault.Hits(p) == before {
			t.Fatalf("the pass did not reach %s", p)
		}
		// Stopped after the mark, the first pass admitted nothing: the next
		// one does. Stopped after the admission, the next finds lou held.
		var want []int64
		if p == fault.AdmissionLost {
			want = []int64{order}
		}
		if rep := nextPass(t, pass(), sid); rep.LostAdmissions != 0 || !slices.Equal(rep.Recovered, want) {
			t.Fatalf("the next pass: %+v; want admitted again %v, the loss not marked twice", rep, want)
		}
		if held, ok, err := s.stock.Holder(ctx, sid, "lou"); err != nil || !ok || held != order {
			t.Fatalf("lou holds %d %v %v, want order %d", held, ok, err, order)
		}
		s.waitStatus(id, "lou", domain.StatusAwaitingPayment)
		if sl, err := s.store.Sale(ctx, sid); err != nil || sl.Stock != 2 {
			t.Fatalf("sale after the order was placed: %+v %v; want 2 of 3 units left (placed once)", sl, err)
		}
		s.settle(l, sale)
	}
}

// fencedCase: a relay reads a purchase's intent from a primary its fence
// no longer vouches for (one no Sentinel confirmed: it never holds), so it
// starts nothing and remembers the order (store.RememberFenced), meeting the
// fault there. The same relay's next round, or after a stop the relay that
// reclaims the intent, remembers it again, once. Then the old primary's data
// is gone, as a demotion discards it: a reconciler pass over the new one (the
// system's Redis) admits the purchase again under its order id, and it is
// placed once.
func fencedCase(t *testing.T, s *system, m mode, _ api.Config) {
	ctx := context.Background()
	sale, l := s.unloadedSale(3), newLedger()
	var sid int64
	fmt.Sscan(sale, &sid)
	old, _ := testenv.Redis(t)
	st := stock.New(old, redsync.New(goredis.NewPool(old)))
	if _, err := st.Warm(ctx, stock.Sale{ID: sid, PriceCents: 100, Remaining: 3,
		StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	order := orderid.FirstAt(time.Now())
	if _, err := st.Reserve(ctx, sid, "fen", order, ""); err != nil { // admitted before the fence closed
		t.Fatal(err)
	}
	id := strconv.FormatInt(order, 10)
	l.purchases[id] = "fen"
	fence := redisack.NewFence(old, "seckill", nil, redis.Options{})
	t.Cleanup(fence.Close)
	st.Acknowledge(redisack.Policy{Replicas: 1, Timeout: 300 * time.Millisecond, Fence: fence})
	relayOn := func(consumer string) {
		r := relay.New(st, starterFunc(func(context.Context, workflows.OrderInput) (bool, error) {
			t.Errorf("%s started order %s behind a fence that does not hold", consumer, id)
			return false, errors.New("fenced")
		}), relay.Options{Consumer: consumer, MinIdle: time.Second, Fenced: s.store.RememberFenced})
		rctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel) // a stopped relay's loop is gone: nothing to wait for
		go func() { _ = r.Run(rctx) }()
	}
	before := fault.Hits(fault.RelayFenced)
	stopped := arm(t, fault.RelayFenced, m)
	relayOn("fenced-1")
	hit(t, fault.RelayFenced, before)
	<-stopped
	if m == modeStop {
		relayOn("fenced-2")
	}
	hit(t, fault.RelayFenced, before+1) // remembered again
	got, err := s.store.UnplacedAdmissions(ctx, sid)
	if err != nil || len(got) != 1 || got[0].OrderID != order || got[0].UserID != "fen" || !got[0].LostAt.IsZero() {
		t.Fatalf("remembered %+v %v; want fen's order %s once, not lost", got, err, id)
	}
	rc := s.reconciler()
	rc.LostAfter = -1 // the old primary, and every relay reading it, is gone
	if rep := nextPass(t, rc, sid); !slices.Equal(rep.Recovered, []int64{order}) {
		t.Fatalf("the pass after the failover: %+v; want order %s admitted again", rep, id)
	}
	s.waitStatus(id, "fen", domain.StatusAwaitingPayment)
	if sl, err := s.store.Sale(ctx, sid); err != nil || sl.Stock != 2 {
		t.Fatalf("sale after the order was placed: %+v %v; want 2 of 3 units left (placed once)", sl, err)
	}
	s.settle(l, sale)
}

// starterFunc is a relay.Starter from a function.
type starterFunc func(context.Context, workflows.OrderInput) (bool, error)

func (f starterFunc) Start(ctx context.Context, in workflows.OrderInput) (bool, error) {
	return f(ctx, in)
}

// nextPass runs rc's pass over the sale once its lock is free: a stopped
// pass holds it until it expires.
func nextPass(t *testing.T, rc *reconcile.Reconciler, sale int64) reconcile.Report {
	t.Helper()
	var rep reconcile.Report
	testenv.Eventually(t, time.Minute, func() error {
		var err error
		rep, err = rc.Sale(context.Background(), sale)
		return err
	})
	return rep
}

// strandedCase: an order awaiting payment is terminated; the reconciler
// ends it, stopping after one of its steps; the next pass finishes.
func strandedCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(3), newLedger()
		id := s.sold(l, sale, "sid")
		s.waitStatus(id, "sid", domain.StatusAwaitingPayment)
		if err := s.tc.TerminateWorkflow(context.Background(), "order-"+id, "", "fault test"); err != nil {
			t.Fatal(err)
		}
		// The sale ends first: the drift repair of open sales would release
		// a unit the stranded repair left held in Redis, and hide that it
		// did not finish (found by TestInterleavings on a cancelled sale).
		s.operatorTold(s.operator("/v1/sales/"+sale+"/end", nil), modeError, http.StatusOK)
		before := fault.Hits(p)
		arm(t, p, m)
		testenv.Eventually(t, time.Minute, func() error {
			inGoroutine(func() { _, _ = s.reconciler().Stranded(context.Background()) })
			if fault.Hits(p) == before {
				return fmt.Errorf("%s not reached yet", p)
			}
			return nil
		})
		s.waitStatus(id, "sid", domain.StatusCancelled)
		s.settle(l, sale)
	}
}

// retireCase: an ended sale whose orders are final is retired; a pass
// stopped half-way is finished by the next.
func retireCase(p fault.Point) faultCase {
	return func(t *testing.T, s *system, m mode, _ api.Config) {
		sale, l := s.openSale(2), newLedger()
		id := s.sold(l, sale, "tom")
		s.waitStatus(id, "tom", domain.StatusAwaitingPayment)
		s.operatorTold(s.operator("/v1/sales/"+sale+"/end", nil), modeError, http.StatusOK)
		s.settle(l, sale)
		var sid int64
		fmt.Sscan(sale, &sid)
		rc := s.reconciler()
		rc.RetireAfter = time.Nanosecond
		arm(t, p, m)
		inGoroutine(func() { _, _ = rc.Retire(context.Background()) })
		if _, err := rc.Retire(context.Background()); err != nil {
			t.Fatal(err)
		}
		listed, err := s.stock.Sales(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range listed {
			if l == sid {
				t.Fatalf("sale %d still listed after the second pass", sid)
			}
		}
		if r := s.audited(sale, true); !r.OK() || !r.Retired {
			t.Fatalf("audit of the retired sale: %s", r)
		}
	}
}

// paysAtProvider: the fault points of the payment paths ("payment
// notification", "payment reconciliation") have cases that need orders
// paid at the built-in provider.
func paysAtProvider(info fault.Info) bool { return strings.HasPrefix(info.Path, "payment ") }

// TestFaultPoints runs both cases of every point on one system, those of
// the payment notification on a second one whose orders pay at the
// built-in provider.
func TestFaultPoints(t *testing.T) {
	cfg := api.Config{PayWait: 5 * time.Second, Relay: relay.Options{MinIdle: time.Second}}
	plain := start(t, options{cfg: cfg})
	var paying *system
	results := map[fault.Point][]string{}
	for _, info := range fault.Points {
		c := faultCases[info.Point]
		if c == nil {
			t.Errorf("fault point %s has no case", info.Point)
			continue
		}
		s := plain
		if paysAtProvider(info) {
			if paying == nil {
				paying = start(t, options{cfg: cfg, builtinPay: true})
			}
			s = paying
		}
		for _, m := range []mode{modeError, modeStop} {
			if m == modeStop {
				s.newAPI(cfg) // a healthy api for the case: an earlier stop may have ended a relay
			}
			began := time.Now()
			var sc system
			passed := t.Run(string(info.Point)+"/"+string(m), func(t *testing.T) {
				sc = *s
				sc.t = t
				c(t, &sc, m, cfg)
			})
			if sc.srv != s.srv {
				// The case stopped the test's api and ended its own with it.
				s.newAPI(cfg)
			}
			// Each case's time on stderr, where a CI run that times out
			// still shows how far it got and what was slow.
			fmt.Fprintf(os.Stderr, "fault point %s/%s: passed=%t in %.1f s\n", info.Point, m, passed, time.Since(began).Seconds())
			results[info.Point] = append(results[info.Point], fmt.Sprintf("%s: %s in %.1f s", m, map[bool]string{true: "healed, checks clean", false: "FAILED"}[passed], time.Since(began).Seconds()))
		}
	}
	// SECKILL_FAULT_REPORT=FILE writes the table of docs/reliability.md.
	if path := os.Getenv("SECKILL_FAULT_REPORT"); path != "" {
		var b strings.Builder
		b.WriteString("| point | path | the write | a stop right after it leaves, and what repairs it | result |\n|---|---|---|---|---|\n")
		for _, info := range fault.Points {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", info.Point, info.Path, info.Write, info.Stop, strings.Join(results[info.Point], "; "))
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEveryWriteIsAFaultPoint keeps the list honest, so that a new write
// without a point is hard to add unnoticed: every point constant is listed
// in fault.Points and reached from the code, and in the files of the paths
// every call that writes to Redis, Postgres or Temporal is followed, within
// a few lines, by a fault.Hit, or says on the line above why it needs none
// ("// fault: …").
func TestEveryWriteIsAFaultPoint(t *testing.T) {
	src := func(path string) string {
		b, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	consts := regexp.MustCompile(`(?m)^\t(\w+)\s+Point = "([^"]+)"`).FindAllStringSubmatch(src("fault/points.go"), -1)
	if len(consts) != len(fault.Points) {
		t.Errorf("fault/points.go declares %d points, fault.Points lists %d", len(consts), len(fault.Points))
	}
	var code strings.Builder
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != ".." && (d.Name() == "ent" || d.Name() == "fault" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		code.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range consts {
		if !strings.Contains(code.String(), "fault."+c[1]) {
			t.Errorf("fault point %s (%s) is declared but no code reaches it", c[1], c[2])
		}
	}

	writes := regexp.MustCompile(`\.Admit\(|starter\.Start\(|\.Started\(|\.SAdd\(|\.SRem\(|Script\.Run\(|\bLoad\(ctx|\.Repair\(ctx|` +
		`Stock\.End\(|\.EndSale\(|\.CancelSale\(|\.AddUnits\(|\.UpdateWorkflow\(|\.FinishOrder\(|\.MarkPaid\(|\.MarkPaidWith\(|\.RestoreStock\(|Stock\.Release\(|\.List\(ctx|` +
		`WithProbeLock\(|\.LPush\(|\.RPop\(|\.StartProbe\(ctx|\.DeleteWorkflowExecution\(|` +
		`\.RememberAdmissions\(|\.Fenced\(ctx|\.MarkAdmissionLost\(|\.MarkAdmissionRecovered\(|Stock\.Reserve\(|` +
		`\.SignalWorkflow\(|Temporal\.ExecuteWorkflow\(|\.StartSettle\(`)
	for _, file := range []string{"orders/purchase.go", "relay/relay.go", "stock/stock.go", "stock/retire.go",
		"api/operator.go", "reconcile/reconcile.go", "reconcile/stranded.go", "api/probe.go", "relay/probe.go", "api/payments.go",
		"reconcile/payments.go"} {
		lines := strings.Split(src(file), "\n")
		for i, line := range lines {
			code := strings.TrimSpace(line)
			if strings.HasPrefix(code, "//") || strings.HasPrefix(code, "func ") || !writes.MatchString(code) {
				continue
			}
			if i > 0 && strings.Contains(lines[i-1], "// fault:") {
				continue
			}
			covered := false
			for j := i; j < len(lines) && j <= i+12 && !covered; j++ {
				covered = strings.Contains(lines[j], "fault.Hit(") || strings.Contains(lines[j], "mirrorEnd(")
			}
			if !covered {
				t.Errorf("%s:%d writes without a fault point after it: %s", file, i+1, code)
			}
		}
	}
}
